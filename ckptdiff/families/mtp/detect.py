"""Whether a config.json carries MTP layers (decided from the config alone, without loading the family)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: model_types whose checkpoints keep MTP layers under ``mtp.*`` (and announce them by model_type alone).
MTP_PREFIX_TYPES = ("qwen3_next",)
#: Words in an architecture name that say it is an MTP/NextN head on its own (a standalone export).
MTP_ARCHITECTURE_WORDS = ("MTP", "NextN")


def text_settings(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text model's settings: ``text_config`` when the config nests one (Kimi-K2.5), else the top level."""
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def nextn_layers(config: Mapping[str, Any]) -> int | None:
    """``num_nextn_predict_layers`` (in the text config or at the top), None when absent or not an int."""
    for holder in (text_settings(config), config):
        value = holder.get("num_nextn_predict_layers")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def detect(config: Mapping[str, Any]) -> bool:
    """A checkpoint with MTP layers: it announces some (``num_nextn_predict_layers`` > 0), is a model type that
    keeps them under ``mtp.*``, or its architecture is an MTP/NextN head."""
    if (nextn_layers(config) or 0) > 0:
        return True
    model_type = text_settings(config).get("model_type") or config.get("model_type")
    if model_type in MTP_PREFIX_TYPES:
        return True
    architectures = config.get("architectures") or []
    return isinstance(architectures, list) and any(
        isinstance(a, str) and any(word in a for word in MTP_ARCHITECTURE_WORDS) for a in architectures
    )
