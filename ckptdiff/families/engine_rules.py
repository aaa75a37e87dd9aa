"""A family's ``engines`` package, shared by the families whose rules are one module per engine holding ``ENGINE``
(DFlash, MTP): the engines of the family's registry line, each one's rules looked up when asked for (so a mutation
that replaces a module's ``ENGINE`` is seen), replayed by the package's ``replay.simulate``, and the support
table's cell from each engine's ``classes`` (a class the engine builds whose loader ckptdiff has no rules for,
its ``not_modelled`` set, is marked so)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from . import family

if TYPE_CHECKING:
    from ..checkpoint import Checkpoint
    from ..report import EngineResult


class _Built(Protocol):
    """A class an engine builds for the family, and where that was read."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> object: ...


class _Rules(Protocol):
    @property
    def classes(self) -> Sequence[_Built]: ...


E = TypeVar("E", bound=_Rules)


class EngineRules(Generic[E]):
    """The ``engines`` package ``package`` of family ``family_name``."""

    def __init__(self, family_name: str, package: str) -> None:
        self.family_name, self.package = family_name, package

    @property
    def names(self) -> tuple[str, ...]:
        """The engines with a pinned loader for the family: those its registry line names."""
        return family(self.family_name).engines

    def get_engine(self, name: str) -> E:
        if name not in self.names:
            raise ValueError(f"unknown engine {name!r}; choose from {', '.join(self.names)}")
        engine: E = importlib.import_module(f"{self.package}.{name}").ENGINE
        return engine

    def simulate(
        self, name: str, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
    ) -> EngineResult:
        """What engine ``name`` does with ``checkpoint`` served as the family's drafter (``base_config``: the
        target's)."""
        replay = importlib.import_module(f"{self.package}.replay").simulate
        result: EngineResult = replay(self.get_engine(name), checkpoint, side, base_config)
        return result

    def support(self, name: str) -> tuple[tuple[str, str], ...]:
        """The support table's cell: each class the engine builds for the family, and where that was read."""
        return tuple(
            (
                each.name if getattr(each, "not_modelled", None) is None else f"{each.name} (loader not modelled)",
                str(each.source),
            )
            for each in self.get_engine(name).classes
        )
