"""Whether a config.json is a DFlash drafter's (decided from the config alone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def detect(config: Mapping[str, Any]) -> bool:
    """A DFlash drafter: a ``dflash_config`` section, or a DFlash architecture (``DFlashDraftModel``)."""
    if isinstance(config.get("dflash_config"), Mapping):
        return True
    architectures = config.get("architectures") or []
    return isinstance(architectures, list) and any(isinstance(a, str) and "dflash" in a.lower() for a in architectures)
