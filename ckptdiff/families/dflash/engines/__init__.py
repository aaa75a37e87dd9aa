"""DFlash's load rules per engine, as data (one module each, holding ``ENGINE``), and their replay."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...engine_rules import EngineRules

if TYPE_CHECKING:
    from .model import DFlashEngine

RULES: EngineRules[DFlashEngine] = EngineRules("dflash", __name__)
#: The engines with a pinned DFlash loader: those its registry line names.
ENGINE_NAMES: tuple[str, ...] = RULES.names
get_engine, simulate, support = RULES.get_engine, RULES.simulate, RULES.support
