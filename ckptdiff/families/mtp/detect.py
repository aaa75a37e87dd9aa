"""Whether a config.json carries MTP layers (decided from the config alone, without loading the family)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: model_types whose checkpoints keep MTP layers under ``mtp.*`` (and announce them by model_type alone, unless a
#: count of 0 says there are none): Qwen3-Next, and Qwen3.5 (its multimodal and text-only configs, dense and MoE).
MTP_PREFIX_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
#: Layouts that keep MTP layer i under names of their own, counted from 0 (not after the main layers): layout →
#: (the name prefixes, ``{i}`` the layer; the architectures that announce the layout even when an export stored
#: none of it; its words). MiMo: model.mtp_layers.{i} (token_layernorm, hidden_layernorm, input_proj,
#: final_layernorm beside a Qwen2 block); ERNIE-4.5: model.mtp_emb_norm.{i}, mtp_hidden_norm.{i},
#: mtp_linear_proj.{i} and the block model.mtp_block.{i}.
INDEXED_LAYOUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "mimo": (("model.mtp_layers.{i}.",), ("MiMoForCausalLM",), "MiMo"),
    "ernie": (
        ("model.mtp_block.{i}.", "model.mtp_emb_norm.{i}.", "model.mtp_hidden_norm.{i}.", "model.mtp_linear_proj.{i}."),
        ("Ernie4_5_MoeForCausalLM",),
        "ERNIE-4.5",
    ),
}
#: Words in an architecture name that say it is an MTP/NextN head on its own (a standalone export).
MTP_ARCHITECTURE_WORDS = ("MTP", "NextN")


def text_settings(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text model's settings: ``text_config`` when the config nests one (Kimi-K2.5), else the top level."""
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


#: The config keys that hold the MTP layer count (transformers maps ``num_mtp_layers`` onto the first; Qwen3.5's
#: text config says ``mtp_num_hidden_layers``).
NEXTN_KEYS = ("num_nextn_predict_layers", "num_mtp_layers", "mtp_num_hidden_layers")
#: model_type → the count transformers' config class gives when config.json has no key (DeepseekV3Config and
#: Glm4MoeConfig default to 1; both engines read their configs through those classes).
NEXTN_DEFAULTS = {"deepseek_v3": 1, "glm4_moe": 1}


def nextn_layers(config: Mapping[str, Any]) -> int | None:
    """``num_nextn_predict_layers`` (or ``num_mtp_layers``; in the text config or at the top); when absent, the
    default of the model type's transformers config class; None when neither says."""
    text = text_settings(config)
    for holder in (text, config):
        for key in NEXTN_KEYS:
            value = holder.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    model_type = text.get("model_type") or config.get("model_type")
    return NEXTN_DEFAULTS.get(model_type) if isinstance(model_type, str) else None


def detect(config: Mapping[str, Any]) -> bool:
    """A checkpoint with MTP layers: it announces some (``num_nextn_predict_layers`` > 0, or its model type's
    default when the key is absent; Kimi-K2's 0 announces none), is a model type that keeps them under ``mtp.*``
    (unless its count is 0), or its architecture is an MTP/NextN head."""
    if (nextn_layers(config) or 0) > 0:
        return True
    model_type = text_settings(config).get("model_type") or config.get("model_type")
    if model_type in MTP_PREFIX_TYPES:
        return nextn_layers(config) != 0
    architectures = config.get("architectures") or []
    return isinstance(architectures, list) and any(
        isinstance(a, str) and any(word in a for word in MTP_ARCHITECTURE_WORDS) for a in architectures
    )
