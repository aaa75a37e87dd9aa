"""Which architecture a config.json announces, decided without loading that architecture's knowledge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_eagle3(config: Mapping[str, Any]) -> bool:
    """An EAGLE-3 drafter: its architecture says so, or it has an ``eagle_config`` or speculators' eagle3 type."""
    architectures = config.get("architectures") or []
    if isinstance(architectures, list) and any(isinstance(a, str) and "eagle3" in a.lower() for a in architectures):
        return True
    return "eagle_config" in config or config.get("speculators_model_type") == "eagle3"


#: The family's detector (:func:`ckptdiff.families.detect_family`).
detect = is_eagle3
