"""The words of MTP's engine events: each rule's ``wording`` key → its template over the event's params."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Params = Mapping[str, Any]

PARAM_WORDS: dict[str, Callable[[Any, Params], str]] = {}
DERIVED: dict[str, Callable[[Params], Any]] = {}
#: Headline phrases for events that end a replay early (code → template).
SUMMARIES: dict[str, str] = {
    "mtp_not_supported": "no MTP drafter class for model_type {model_type}",
    "mtp_layers_not_announced": "no MTP layers announced (num_nextn_predict_layers)",
    "mtp_layer_count_unsupported": "num_nextn_predict_layers={nextn} is not supported",
    "mtp_layer_missing": "MTP layer {layer} not in the checkpoint",
}

_NONE = (
    "no class that builds a drafter from the MTP layers of model_type {model_type} (architectures[0] "
    "{architecture}); the MTP classes {label} maps targets to are {registered}"
)

EVENTS: dict[str, str] = {
    "mtp.no_config": "{spec} has no config.json: no MTP layers can be built from it",
    "mtp.vllm.mtp_not_supported": "vLLM has " + _NONE.replace("{label}", "vLLM"),
    "mtp.sglang.mtp_not_supported": "SGLang has " + _NONE.replace("{label}", "SGLang"),
    "mtp.vllm.mtp_layers_not_announced": (
        "num_nextn_predict_layers is {nextn}: {cls} is built with n_predict from it, so it has no MTP layer to "
        "load (the checkpoint announces none)"
    ),
    "mtp.sglang.mtp_layers_not_announced": (
        'num_nextn_predict_layers is {nextn}: {cls} raises ValueError "num_nextn_predict_layers is not in the '
        'config" or builds no layer'
    ),
    "mtp.sglang.mtp_layer_count_unsupported": (
        'num_nextn_predict_layers={nextn}: SGLang\'s NextN loader asserts "Only 1 nextn layer is supported" '
        "(AssertionError)"
    ),
    "mtp.vllm.from_target": "{name}: taken from the target",
    "mtp.sglang.from_target": (
        "{name}: skipped; SGLang's NextN draft uses the target's embedding and head (set_embed_and_head)"
    ),
    "mtp.vllm.mtp_layer_missing": (
        "no tensor of MTP layer {layer} (model.layers.{layer}.*, num_hidden_layers + i for num_nextn_predict_layers="
        '{nextn}): ValueError "MTP speculative decoding layer {layer} weights missing from checkpoint"'
    ),
    "mtp.sglang.mtp_layer_missing": (
        "no tensor of MTP layer {layer} (model.layers.{layer}.*, SGLang's nextn_layer_id): SGLang loads nothing "
        "into {cls} and says nothing; the whole MTP layer stays randomly initialised"
    ),
    "mtp.vllm.missing_weight": (
        '{param} is not in the checkpoint: ValueError "Following weights were not initialized from checkpoint"'
    ),
    "mtp.vllm.random_init": (
        "{param} is not in the checkpoint; the target is quantized, so vLLM's strict check is off and it keeps its "
        "initial values, silently"
    ),
    "mtp.sglang.random_init": (
        "{param} is never loaded: SGLang does not report missing weights, so it stays randomly initialised"
    ),
    "mtp.vllm.outside_mtp_layers": (
        "{count} tensors outside the MTP layers {layers} are the target's own: the MTP drafter skips them"
    ),
    "mtp.sglang.outside_mtp_layers": (
        "{count} tensors outside the MTP layers {layers} are the target's own: the NextN loader skips them"
    ),
    "mtp.vllm.unknown_name": "{name} becomes {candidate}, which vLLM's MTP drafter has no parameter for: KeyError",
    "mtp.sglang.skipped_unknown_name": "{name}: SGLang's NextN draft has no parameter {candidate}: skipped",
    "mtp.vllm.shape_mismatch": "{name} is {got} but vLLM's {param} is {want}",
    "mtp.sglang.shape_mismatch": (
        "{name} is {got} but SGLang's {param} is {want}: AssertionError \"Attempted to load weight ({got}) into "
        'parameter ({want})"'
    ),
}
