"""What a profile is: the weights an engine injects, a naming convention, and one architecture's knowledge."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..checkpoint import Checkpoint
    from ..report import Finding, TensorRow

Config = Mapping[str, Any]
#: A profile's review of a comparison: (A, B, rows, base) → rows (notes updated) and findings.
Review = Callable[
    ["Checkpoint", "Checkpoint", "tuple[TensorRow, ...]", "Checkpoint | None"],
    "tuple[tuple[TensorRow, ...], list[Finding]]",
]


@dataclass(frozen=True)
class InjectedWeight:
    """A frozen weight the serving engine takes from the base model when the checkpoint has none."""

    name: str  # the tensor name in this architecture's checkpoints (canonical naming)
    base_name: str  # where the engine finds it in a text-only base (target) model
    #: How the engine takes it, worded by the formats: "embedding", "head" (the base's head) or "tied_head".
    how: str
    #: What it is in the base, whatever the base's layout names it (:mod:`.base_layouts`).
    role: str = "embedding"


@dataclass(frozen=True)
class Convention:
    """A way of naming one architecture's tensors, e.g. SpecForge's ``midlayer.*`` or vLLM's ``model.layers.0.*``."""

    name: str
    label: str  # how findings name it: "vLLM (model.layers.0.*, model. prefix)"


@dataclass(frozen=True)
class Profile:
    """One architecture's knowledge as data: how to detect it, what its engines inject, its namings and checks."""

    name: str
    detect: Callable[[Config], bool]
    #: The weights the engine injects into any checkpoint of this architecture that lacks them.
    injected: tuple[InjectedWeight, ...] = ()
    #: The injected weights for a checkpoint with this config, when that depends on it (None: ``injected``).
    injects: Callable[[Config | None], tuple[InjectedWeight, ...]] | None = None
    #: Maps a tensor name of any known convention to the canonical one (None: names are kept).
    canonical: Callable[[str], str] | None = None
    #: Which naming convention a set of tensor names follows (None when it cannot tell).
    convention: Callable[[Iterable[str]], Convention | None] | None = None
    #: Architecture checks on a finished comparison.
    review: Review | None = None
    #: Checks of one checkpoint on its own against ``--base`` (no B), as ``review`` makes them for each side.
    review_alone: Callable[[Checkpoint, Checkpoint | None], list[Finding]] | None = None
    #: The findings as reported with ``--engine``: those that describe what engines do in prose give way to the
    #: engines' own events (None: unchanged).
    engine_view: Callable[[list[Finding]], list[Finding]] | None = None
    #: The variants of the family a side is (config, tensor names → codes; words in its ``messages.VARIANTS``).
    variants: Callable[[Config | None, Collection[str]], tuple[str, ...]] | None = None

    def variants_of(self, config: Config | None, names: Collection[str]) -> tuple[str, ...]:
        return self.variants(config, names) if self.variants is not None else ()

    def injected_weights(self, config: Config | None) -> tuple[InjectedWeight, ...]:
        return self.injects(config) if self.injects is not None else self.injected

    def injected_weight(self, name: str, config: Config | None = None) -> InjectedWeight | None:
        """The weight the engine injects under ``name`` for a checkpoint with ``config``, if any."""
        for weight in self.injected_weights(config):
            if weight.name == name:
                return weight
        return None

    def base_tensors(self, *configs: Config | None) -> set[str]:
        """The base model's tensors to read for ``--base``: those the engine may inject into these drafters."""
        return {weight.base_name for config in configs for weight in self.injected_weights(config)}

    def base_roles(self, *configs: Config | None) -> set[str]:
        """What the engine may take from the base for these drafters, as roles (``embedding``, ``lm_head``)."""
        return {weight.role for config in configs for weight in self.injected_weights(config)}

    def canonical_name(self, name: str) -> str:
        return self.canonical(name) if self.canonical is not None else name

    def naming_convention(self, names: Iterable[str]) -> Convention | None:
        return self.convention(names) if self.convention is not None else None

    def findings(
        self, a: Checkpoint, b: Checkpoint, rows: tuple[TensorRow, ...], base: Checkpoint | None = None
    ) -> tuple[tuple[TensorRow, ...], list[Finding]]:
        """Rows (with notes the profile adds) and the profile's findings for this comparison."""
        if self.review is None:
            return rows, []
        return self.review(a, b, rows, base)
