"""The base (target) model's text settings, wherever its config.json keeps them (top level or text_config)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The settings of the base's language model: a multimodal base keeps them under ``text_config``."""
    nested = config.get("text_config")
    if isinstance(nested, Mapping) and nested:
        return nested
    return config
