"""The words of the MTP family's findings, each from its params alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Params = Mapping[str, Any]


def _layers(layers: Any, prefix: str = "model.layers.") -> str:
    return ", ".join(f"{prefix}{layer}.*" for layer in layers) or "none"


def _missing(params: Params) -> str:
    side = params["side"]
    if params.get("layout") == "mtp":
        return (
            f"{side} stores no mtp.* tensor, though its model type keeps its MTP layers there: exported or "
            "quantized without them, the MTP drafter cannot be served from it"
        )
    if "prefix" in params:  # an indexed layout (MiMo, ERNIE-4.5): layer i under names of its own
        prefix = str(params["prefix"]).partition("{i}")[0]
        return (
            f"{side}'s config announces {params['nextn']} MTP layer(s) (num_nextn_predict_layers), but it stores none "
            f"of {_layers(params['missing'], prefix)} (stored: {_layers(params.get('stored', []), prefix)}): exported "
            "or quantized without them, the MTP drafter has no trained weights to load"
        )
    return (
        f"{side}'s config announces {params['nextn']} MTP layer(s) (num_nextn_predict_layers) after its "
        f"{params['hidden_layers']} layers, but it stores none of {_layers(params['missing'])} (stored: "
        f"{_layers(params.get('stored', []))}): exported or quantized without them; vLLM refuses to serve its MTP, "
        "SGLang serves a randomly initialised MTP layer without a word"
    )


def _unannounced(params: Params) -> str:
    return (
        f"{params['side']} stores MTP layers {_layers(params['extra'])} that num_nextn_predict_layers "
        f"({params['nextn']}) does not announce: the engines never load them"
    )


def _layout_unknown(params: Params) -> str:
    examples = ", ".join(params["examples"])
    return (
        f"{params['side']}'s config announces {params['nextn']} MTP layer(s) (num_nextn_predict_layers) after its "
        f"{params['hidden_layers']} layers and stores none of {_layers(params['missing'])}, but it holds "
        f"{params['count']} MTP tensors under names of a layout ckptdiff does not know ({examples}, ...): it cannot "
        "say whether they are the announced layers"
    )


#: The MTP layouts a side can be (profile.variants).
VARIANTS: dict[str, str] = {
    "nextn_layers": "DeepSeek-V3/GLM-4.5 MTP layers (model.layers.{N+i}: enorm, hnorm, eh_proj, shared_head)",
    "mtp_block": "Qwen3-Next/Qwen3.5 mtp.* block",
    "mimo_layers": (
        "MiMo MTP layers (model.mtp_layers.{i}: token_layernorm, hidden_layernorm, input_proj, final_layernorm)"
    ),
    "ernie_layers": (
        "ERNIE-4.5 MTP layers (model.mtp_block.{i}, mtp_emb_norm.{i}, mtp_hidden_norm.{i}, mtp_linear_proj.{i})"
    ),
    "unknown_layout": "MTP tensors under a layout ckptdiff does not know (no model.layers.{N+i}, mtp.* elsewhere)",
    "mtp_export": "standalone MTP/NextN export (its architecture is the MTP head's)",
}

FINDINGS: dict[str, Callable[[Params], str]] = {
    "mtp_layers_missing": _missing,
    "mtp_layers_unannounced": _unannounced,
    "mtp_layout_unknown": _layout_unknown,
}
