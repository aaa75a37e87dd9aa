"""EAGLE-3's load rules per engine, as data (one module each, holding ``ENGINE``), and their replay."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ... import family

if TYPE_CHECKING:
    from ....checkpoint import Checkpoint
    from ....report import EngineResult
    from ...rules import Engine

#: The engines with a pinned EAGLE-3 loader: those its registry line names.
ENGINE_NAMES: tuple[str, ...] = family("eagle3").engines


def get_engine(name: str) -> Engine:
    if name not in ENGINE_NAMES:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINE_NAMES)}")
    from ...engine_settings import current

    module = f"{name}_v1" if name == "vllm" and current().vllm_runner == "v1" else name  # vllm_v1.py: V1 runner
    engine: Engine = importlib.import_module(f"{__name__}.{module}").ENGINE  # a module attribute: Any to mypy
    return engine


def simulate(
    name: str, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
) -> EngineResult:
    """What engine ``name`` does with ``checkpoint`` served as an EAGLE-3 drafter (``base_config``: the target's)."""
    import msgspec

    from ..foreign import not_a_drafter
    from ..legacy import eagle1_event
    from .replay import simulate as replay

    result = replay(get_engine(name), checkpoint, side, base_config)
    hint = eagle1_event(checkpoint, name)
    if hint is None:
        return not_a_drafter(result, checkpoint) or result
    # after the errors, first of the warnings: it says what the rest is about
    events = sorted((hint, *result.events), key=lambda event: ("error", "warning", "info").index(event.severity))
    return msgspec.structs.replace(result, events=tuple(events))


def support(name: str) -> tuple[tuple[str, str], ...]:
    """The support table's cell: each class the engine loads EAGLE-3 drafters with, and where that was read."""
    return tuple((", ".join(loader.architectures), str(loader.source)) for loader in get_engine(name).loaders)
