"""DFlash's load rules per engine, as data (one module each, holding ``ENGINE``), and their replay."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ... import family

if TYPE_CHECKING:
    from ....checkpoint import Checkpoint
    from ....report import EngineResult
    from .model import DFlashEngine

#: The engines with a pinned DFlash loader: those its registry line names.
ENGINE_NAMES: tuple[str, ...] = family("dflash").engines


def get_engine(name: str) -> DFlashEngine:
    if name not in ENGINE_NAMES:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINE_NAMES)}")
    engine: DFlashEngine = importlib.import_module(f"{__name__}.{name}").ENGINE
    return engine


def simulate(
    name: str, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
) -> EngineResult:
    """What engine ``name`` does with ``checkpoint`` served as a DFlash drafter (``base_config``: the target's)."""
    from .replay import simulate as replay

    return replay(get_engine(name), checkpoint, side, base_config)


def support(name: str) -> tuple[tuple[str, str], ...]:
    """The support table's cell: each class the engine builds for DFlash drafters, and where that was read."""
    return tuple((each.name, str(each.source)) for each in get_engine(name).classes)
