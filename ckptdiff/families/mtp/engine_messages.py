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
    "mtp_not_modelled": "{cls}'s loader is not modelled",
    "mtp_layers_not_announced": "no MTP layers announced (num_nextn_predict_layers)",
    "mtp_layers_key_absent": "no num_nextn_predict_layers in the config",
    "mtp_layer_not_moe": "no MoE layer among its MTP layers",
    "mtp_layer_count_unsupported": "num_nextn_predict_layers={nextn} is not supported",
    "mtp_layer_missing": "MTP layer {layer} not in the checkpoint",
    "dtype_refused": "{name} is {got}, its parameter {want}: refused",
}

_NONE = (
    "no class that builds a drafter from the MTP layers of model_type {model_type} (architectures[0] "
    "{architecture}); the MTP classes {label} maps targets to are {registered}"
)

_NOT_MODELLED = (
    " builds {cls} from the MTP layers of architectures[0] {architecture}, but ckptdiff has no rules for its "
    "loader: it cannot say whether this checkpoint's MTP layers load (the gate fails rather than guess)"
)

EVENTS: dict[str, str] = {
    "mtp.vllm.mtp_not_modelled": "vLLM" + _NOT_MODELLED,
    "mtp.sglang.mtp_not_modelled": "SGLang" + _NOT_MODELLED,
    "mtp.no_config": "{spec} has no config.json: no MTP layers can be built from it",
    "mtp.mtp_composition_unchecked": (
        "{count} mtp.* tensors are there, so the MTP block was exported; how {label}'s {cls} loads a quantized "
        "block (its scales beside the weights) is not modelled: ckptdiff cannot say each one fits its parameter"
    ),
    # ---- Qwen3-Next's mtp.* block
    "mtp.vllm.mtp_block_missing": (
        "no mtp.* tensor: {cls} loads nothing into its MTP block (fc, pre_fc_norm_*, the MTP layers, norm) and its "
        'strict check raises ValueError "Following weights were not initialized from checkpoint"'
    ),
    "mtp.sglang.mtp_block_missing": (
        "no mtp.* tensor: SGLang loads nothing into {cls} and says nothing; the whole MTP block (fc, "
        "pre_fc_norm_*, its layer, norm) stays randomly initialised"
    ),
    "mtp.vllm.mtp_unknown_name": (
        "{name} becomes {candidate}, which vLLM's Qwen3NextMTP does not have (an MTP layer past "
        'num_nextn_predict_layers, or a weight it never builds): ValueError "There is no module or parameter named"'
    ),
    "mtp.sglang.mtp_unknown_name": (
        "{name} becomes {candidate}, which SGLang's Qwen3NextForCausalLMMTP does not have (it builds one MTP layer "
        "whatever num_nextn_predict_layers says): KeyError"
    ),
    "mtp.vllm.extra_expert": (
        "{name}: expert index past num_experts ({experts}); vLLM's fused MoE has no slot for it and skips it silently"
    ),
    "mtp.sglang.mtp_extra_expert": (
        "{name}: expert index past num_experts ({experts}); SGLang's expert mapping has no entry for it, so it "
        "looks up {candidate} as is: KeyError"
    ),
    "mtp.shard_short": (
        "{name} is {got}, fewer rows than its slot of {param} ({want}): the stacked copy narrows past its end "
        '(RuntimeError "start (0) + length ... exceeds dimension size")'
    ),
    "mtp.shard_long": (
        "{name} is {got}, more rows than its slot of {param} ({want}): the stacked copy takes the first rows and "
        "drops the rest, silently (num_attention_heads, num_key_value_heads or head_dim differ from the config)"
    ),
    "mtp.vllm.expert_short": (
        "{name} is {got}, narrower than its slot of {param} ({want}): vLLM copies it into part of the slot; the "
        "rest keeps its initial values, silently (moe_intermediate_size differs from the config)"
    ),
    "mtp.sglang.expert_short": (
        "{name} is {got}, narrower than its slot of {param} ({want}): SGLang fills the slot with values no "
        "checkpoint tensor holds, silently (moe_intermediate_size differs from the config)"
    ),
    "mtp.vllm.outside_mtp_block": (
        "{count} tensors outside mtp.* are the target's own: Qwen3NextMTP skips them (it reads mtp.* and the "
        "embedding and head, which the target's replace)"
    ),
    "mtp.sglang.outside_mtp_block": (
        "{count} tensors outside mtp.* are the target's own: Qwen3NextForCausalLMMTP skips every name without mtp"
    ),
    # ---- a quantized (FP8) mtp.* block
    "mtp.vllm.quantized_block": (
        "vLLM builds {quantized} FP8-quantized ({scheme}) and {plain} unquantized; each FP8 layer's scales are "
        "checked beside its weights"
    ),
    "mtp.sglang.quantized_block": (
        "SGLang builds {quantized} FP8-quantized ({scheme}) and {plain} unquantized; each FP8 layer's scales are "
        "checked beside its weights"
    ),
    "mtp.vllm.scale_missing": (
        "{param} is not in the checkpoint: vLLM builds this layer FP8-quantized ({scheme}), and with a quantized "
        "target its strict check is off, so the scale keeps its initial values, silently: the layer computes with "
        "garbage scales"
    ),
    "mtp.sglang.scale_missing": (
        "{param} is never loaded: SGLang builds this layer FP8-quantized ({scheme}) and does not report missing "
        "weights, so the scale keeps its initial values: the layer computes with garbage scales"
    ),
    "mtp.vllm.weight_cast_to_fp8": (
        "{module}: {count} weight(s) stored {dtype} ({name}, ...), but vLLM builds it FP8-quantized ({because}): its "
        "weight loader copies each into the FP8 weight as it is, cast without a scale, silently"
    ),
    "mtp.sglang.weight_cast_to_fp8": (
        "{module}: {count} weight(s) stored {dtype} ({name}, ...), but SGLang builds it FP8-quantized ({because}): "
        "its weight loader copies each into the FP8 weight as it is, cast without a scale, silently"
    ),
    "mtp.weight_unscaled": (
        "{module}: {count} weight(s) stored {dtype} ({name}, ...), but it is built unquantized ({because}): the FP8 "
        "values are copied in as they are, without their scale, silently"
    ),
    "mtp.vllm.scale_unexpected": (
        '{name}: vLLM builds {module} unquantized ({because}), so it has no {candidate}: ValueError "There is no '
        'module or parameter named"'
    ),
    "mtp.sglang.scale_unexpected": (
        "{name}: SGLang builds {module} unquantized ({because}), so it has no {candidate}: KeyError (a name ending "
        "in _scale: AssertionError unless it holds 1.0)"
    ),
    "mtp.mixed_shards": (
        '{module}: the ignore list skips some but not all of its shards: ValueError "Detected some but not all '
        'shards ... are quantized" when the layer is built'
    ),
    "mtp.block_misaligned": (
        "{module}: {rows} rows are not a whole number of weight_block_size's {block}-row blocks: ValueError \"... "
        'is not divisible by weight quantization block_n" when the layer is built'
    ),
    "mtp.vllm.mtp_block_missing_quantized": (
        "no mtp.* tensor: {cls} loads nothing into its MTP block, and with a quantized target vLLM's strict check "
        "is off: the whole block (fc, pre_fc_norm_*, the MTP layers, norm) stays randomly initialised, silently"
    ),
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
    "mtp.vllm.from_target": (
        "{name}: loaded, then replaced by the target's (load_eagle_model shares the target's embedding and head with "
        "an MTP drafter, which declares no copy of its own)"
    ),
    "mtp.vllm.mtp_layer_not_moe": (
        "{cls} builds its MTP layers {layers} as the target's layers, and none of them is a MoE layer "
        '(first_k_dense_replace): RuntimeError "No Glm4MoE layer found in model.layers." at construction'
    ),
    "mtp.vllm.random_init_exempt": (
        "{param} is not in the checkpoint; vLLM's strict check exempts the parameters of layers with a quantization "
        "method (linear, embedding, MoE), so it keeps its initial values, silently"
    ),
    "mtp.vllm.mtp_layer_unread": (
        "MTP layer {layer} is stored but vLLM reads only layers {layers} (num_hidden_layers + i for "
        "num_nextn_predict_layers): its tensors are never loaded"
    ),
    "mtp.sglang.mtp_layer_unread": (
        "MTP layer {layer} is stored but SGLang's NextN loader reads only layer {layers} (nextn_layer_id): its "
        "tensors are never loaded"
    ),
    "mtp.sglang.extra_expert": (
        "{name}: expert index past n_routed_experts ({experts}); SGLang's expert mapping has no slot for it and skips "
        "it silently"
    ),
    "mtp.sglang.stacked_unknown": (
        "{name} is stacked into {candidate}, which SGLang's NextN layer does not have (its MLP is built as a MoE "
        "layer): KeyError"
    ),
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
    "mtp.sglang.fp8_weight_unscaled": (
        "{name} is {dtype} beside its scales {scales}, but SGLang's NextN layer builds eh_proj as a plain "
        "nn.Linear whatever the quantization_config: the FP8 values are copied in as they are and the scales are "
        'skipped ("not found in params_dict"), so eh_proj computes with weights off by their block scales, silently'
    ),
    "mtp.sglang.dtype_refused": (
        "{name} is {got} but SGLang's {param} is {want} (FP8 quantization_config): its loader refuses to narrow a "
        'tensor (ValueError "Downcasting not allowed", or "Unsupported copy between dtypes"), raised once every '
        "tensor was handed over"
    ),
    "mtp.sglang.fp8_scale_missing": (
        "{param} is not in the checkpoint: SGLang builds it for the FP8 weight beside it and never reports it "
        "unwritten; that weight is used with the scale it was built with, not a trained one, silently"
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
