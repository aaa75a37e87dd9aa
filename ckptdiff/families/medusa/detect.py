"""Whether a config.json is a Medusa head's (decided from the config alone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def detect(config: Mapping[str, Any]) -> bool:
    """Medusa's config: ``medusa_num_heads``, or a Medusa architecture or model type."""
    if "medusa_num_heads" in config:
        return True
    architectures = config.get("architectures") or []
    named = isinstance(architectures, list) and any(isinstance(a, str) and "medusa" in a.lower() for a in architectures)
    model_type = config.get("model_type")
    return named or (isinstance(model_type, str) and "medusa" in model_type.lower())
