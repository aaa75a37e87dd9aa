"""SGLang 0.5.23's DFlash drafter, as data: ``DFlashDraftModel`` (srt/models/dflash.py), its config parsed by
``parse_dflash_draft_config`` (srt/speculative/dflash_utils.py), the ids checked at start-up against the target
(srt/model_executor/model_runner_components/spec_aux_hidden_state.py), the target's embedding and head used by
the DFLASH worker (srt/speculative/dflash_worker_v2.py). Each rule cites the file and line it was read at."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...rules import Event, Source
from .model import Alias, ConfigCheck, DFlashClass, DFlashEngine, IdsKey, Refusal, SinkBias, Stacked, Variant

REPO, VERSION = "sgl-project/sglang", "v0.5.23"


def at(path: str) -> Source:
    return Source(REPO, VERSION, path)


MODEL = "python/sglang/srt/models/dflash.py"
UTILS = "python/sglang/srt/speculative/dflash_utils.py"
WORKER = "python/sglang/srt/speculative/dflash_worker_v2.py"
REGISTRY = at(f"{MODEL}:1317 (EntryClass)")
LOAD = at(f"{MODEL}:886 (DFlashDraftModel.load_weights)")
STARTUP = at(
    "python/sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py:247 "
    "(_resolve_dflash_aux_hidden_state)"
)
IDS = at(f"{UTILS}:657 (parse_dflash_draft_config)")
TARGET_CAPTURE = at(
    "python/sglang/srt/model_executor/model_runner_components/attention_backend_setup.py:62 "
    "(configure_aux_hidden_state_capture)"
)


def _check(line: int, *keys: str, rule: str, default: object = None, together: str | None = None) -> ConfigCheck:
    event = Event(
        "error",
        "dflash_config_refused",
        "dflash.sglang.config_refused",
        at(f"{UTILS}:{line} (parse_dflash_draft_config)"),
    )
    return ConfigCheck(keys, rule, event, default, together)


#: parse_dflash_draft_config's refusals, in its order: each setting read at ``dflash_config.<key>`` and, where it
#: falls back, the top level (a present null in dflash_config is taken as it is), then parsed (int() for the counts:
#: "16" passes) and checked. The target layer ids, parsed after the ninth, are ``ids_keys`` and ``ids_malformed``;
#: ``require_num_layers`` (``layers_required``) comes after them all.
CONFIG_CHECKS = (
    _check(593, "num_hidden_layers", rule="int_min_1"),
    _check(602, "dflash_config.num_target_layers", "num_target_layers", rule="int_min_1"),
    _check(613, "dflash_config.block_size", "block_size", rule="int_min_1"),
    _check(619, "dflash_config.conv_kernel_size", rule="int_min_0", default=0),
    _check(
        629, "dflash_config.conv_group_size", rule="int_min_0", default=0, together="dflash_config.conv_kernel_size"
    ),
    _check(635, "dflash_config.selector_rank", rule="int_min_0", default=0),
    _check(645, "dflash_config.selector_top_k", rule="int_min_0", default=0, together="dflash_config.selector_rank"),
    _check(651, "dflash_config.output_multiplier", rule="positive_float", default=1.0),
    _check(654, "dflash_config.final_logit_softcapping", rule="float_or_falsy"),
    _check(682, "dflash_config.mask_token", "mask_token", rule="token"),
    _check(692, "dflash_config.mask_token_id", "mask_token_id", rule="token_id"),
    _check(705, "dflash_config.attention_sink_bias", rule="bool", default=False),
    _check(717, "dflash_config.attention_value_scale", rule="number"),
)


def build_target_layer_ids(target_layers: int | None, draft_layers: int | None) -> tuple[int, ...] | None:
    """dflash_utils.py:348: one id per drafter layer, spread over layers 1 .. n - 3 (n // 2 for one layer)."""
    if not target_layers or not draft_layers or target_layers <= 0 or draft_layers <= 0:
        return None
    if draft_layers == 1:
        return (target_layers // 2,)
    start, end = 1, target_layers - 3
    if end < start:
        return None  # ValueError "DFlash layer selection requires num_target_layers >= 4"
    span = end - start
    return tuple(int(round(start + (i * span) / (draft_layers - 1))) for i in range(draft_layers))


def is_nemotron_35(config: Mapping[str, Any]) -> bool:
    """dflash_utils.py:461 is_nemotron_35_draft_config: a DFlash (or DSpark) drafter with its own embedding and no
    head, W4A16_NVFP4, each DFlash id one below its EAGLE-3 aux id, and no sampling from the anchor."""
    architectures = config.get("architectures") or []
    if not {"DFlashDraftModel", "Qwen3DSparkModel"} & set(architectures if isinstance(architectures, list) else ()):
        return False
    quant = config.get("quantization_config") or {}
    if not config.get("has_embed_tokens") or config.get("has_lm_head"):
        return False
    if not isinstance(quant, Mapping) or quant.get("quant_algo") != "W4A16_NVFP4":
        return False
    section = config.get("dflash_config")
    section = section if isinstance(section, Mapping) else {}
    ids = section.get("target_layer_ids", config.get("target_layer_ids"))
    aux = config.get("eagle_aux_hidden_state_layer_ids")
    if not ids or not aux or not isinstance(ids, list) or not isinstance(aux, list) or len(ids) != len(aux):
        return False
    try:
        if any(int(t) + 1 != int(a) for t, a in zip(ids, aux, strict=True)):
            return False
    except (TypeError, ValueError):
        return False
    return section.get("sample_from_anchor", config.get("sample_from_anchor", True)) is False


#: The Nemotron 3.5 draft (dflash.py:706-716, 296-312): it builds and loads its own embedding (no mask embedding), and
#: a true top-level attention_sink_bias builds F32 sinks only under the trtllm_mha draft attention backend, a
#: ValueError under any other (dflash_config's flag, read after it, builds them as for any drafter).
NEMOTRON_35 = Variant(
    "Nemotron 3.5",
    at(f"{UTILS}:461 (is_nemotron_35_draft_config)"),
    is_nemotron_35,
    {
        "own_embedding": True,
        "mask_embedding": False,
        "own_embedding_kept": True,
        "sink_backend": (
            "attention_sink_bias",
            Event("error", "sink_backend_required", "dflash.sglang.sink_backend_required", at(f"{MODEL}:296-304")),
        ),
    },
)

ENGINE = DFlashEngine(
    name="sglang",
    label="SGLang",
    classes=(
        DFlashClass(
            "DFlashDraftModel",
            at(f"{MODEL}:671"),
            ("DFlashDraftModel", "MuseGlimmerAssistantModel"),
        ),
    ),
    looks_up=lambda architecture: architecture,
    registry=REGISTRY,
    no_class=Event("error", "dflash_not_supported", "dflash.sglang.dflash_not_supported", REGISTRY),
    config_checks=CONFIG_CHECKS,
    checks_before_ids=9,  # the target layer ids are parsed after final_logit_softcapping (dflash_utils.py:657)
    layers_required=Event("error", "layers_required", "dflash.sglang.layers_required", at(f"{UTILS}:545")),
    ids_malformed=Event("error", "target_layer_ids_malformed", "dflash.sglang.target_layer_ids_malformed", IDS),
    ids_int=True,  # [int(x) for x in layer_ids] (dflash_utils.py:670): "3" is 3
    # a present [] is parsed as given and refused as empty (ids_malformed); only a missing key or null is unset, and
    # a null in dflash_config is dict.get's value there: the default ids, the top-level ones unread
    ids_keys=(
        IdsKey("dflash_config.target_layer_ids", empty_is_unset=False, null_is_unset=False),
        IdsKey("target_layer_ids", empty_is_unset=False),
    ),
    ids_source=IDS,
    default_ids=build_target_layer_ids,
    default_ids_words="one id per drafter layer from the target's depth (build_target_layer_ids)",
    fc_hidden_keys=("hidden_size",),
    fc_source=at(f"{MODEL}:747 (DFlashDraftModel: fc = num_context_features x hidden_size)"),
    ids_vs_trained_depth=Event(
        "error", "target_layer_out_of_range", "dflash.sglang.ids_vs_trained_depth", at(f"{UTILS}:579")
    ),
    ids_vs_target=Event("error", "target_layer_out_of_range", "dflash.sglang.ids_vs_target", STARTUP),
    not_captured=None,
    param_prefix="",
    strips_model_prefix=True,
    aliases=(
        Alias(r"^encoder\.fc\.weight$", "fc.weight", at(f"{MODEL}:900")),
        Alias(r"^encoder\.output_norm_enc\.weight$", "hidden_norm.weight", at(f"{MODEL}:900")),
    ),
    stacked=(
        Stacked("q_proj", "qkv_proj", "q"),
        Stacked("k_proj", "qkv_proj", "k"),
        Stacked("v_proj", "qkv_proj", "v"),
        Stacked("gate_proj", "gate_up_proj", "0"),
        Stacked("up_proj", "gate_up_proj", "1"),
    ),
    stacked_source=LOAD,
    refusals=(
        Refusal(
            "prefix_gru.",
            Event("error", "domino_weights_refused", "dflash.sglang.domino_weights_refused", at(f"{MODEL}:923")),
        ),
        Refusal(
            "embed_proj.",
            Event("error", "domino_weights_refused", "dflash.sglang.domino_weights_refused", at(f"{MODEL}:923")),
        ),
    ),
    discards=(),
    own_embedding=False,
    own_head=False,
    from_target=Event("info", "from_target", "dflash.sglang.from_target", at(f"{WORKER}:222")),
    carried_unused=Event("info", "carried_unused", "dflash.sglang.carried_unused", LOAD),
    aux_flag_drops_fc=False,
    unknown=Event("info", "skipped_unknown_name", "dflash.sglang.skipped_unknown_name", at(f"{MODEL}:945")),
    shape_mismatch=Event(
        "error",
        "shape_mismatch",
        "dflash.sglang.shape_mismatch",
        at("python/sglang/srt/model_loader/weight_utils.py:1574"),
    ),
    fc_mismatch=Event("error", "fc_width_mismatch", "dflash.sglang.fc_width_mismatch", at(f"{MODEL}:967")),
    param_missing=Event("warning", "random_init", "dflash.sglang.random_init", LOAD),
    hidden_vs_target=Event(
        "error", "hidden_mismatch", "dflash.sglang.hidden_mismatch", at(f"{WORKER}:222").inferring()
    ),
    mask_vs_target=Event(
        "error", "mask_token_out_of_vocab", "dflash.sglang.mask_token_out_of_vocab", at(f"{WORKER}:1399")
    ),
    target_unknown=Event("info", "target_unknown", "dflash.sglang.target_unknown", STARTUP),
    # the classes of the installed 0.5.23's registry that define set_dflash_layers_to_capture, and some that do not
    capturing_targets=(
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM",
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "GptOssForCausalLM",
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "KimiK25ForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Glm4MoeLiteForCausalLM",
    ),  # fmt: skip
    refused_targets=(
        "Qwen2ForCausalLM",
        "Gemma3ForCausalLM",
        "Glm4MoeForCausalLM",
        "MiniMaxM2ForCausalLM",
        "Llama4ForConditionalGeneration",
    ),  # fmt: skip
    target_refused=Event("error", "target_not_capturable", "dflash.sglang.target_not_capturable", TARGET_CAPTURE),
    target_class_unknown=Event("info", "target_class_unknown", "dflash.sglang.target_class_unknown", TARGET_CAPTURE),
    # The draft runner keeps a KV pool of its own, budgeted from the draft's own attention geometry
    # (mem_cache/draft_kv_budget.py:14, resolve_dflash_draft_cell_size, which calls this)
    draft_kv_cache=Event(
        "info",
        "draft_kv_cache",
        "dflash.sglang.draft_kv_cache",
        at("python/sglang/srt/speculative/dflash_utils.py:121 (dflash_draft_cell_size_per_token)"),
    ),
    # DFlashAttention: parse_dflash_draft_config's attention_sink_bias (a bool, config check above) builds per-head
    # biases as torch.empty; load_weights returns with no check of what it filled
    sink_bias=SinkBias(
        keys=("dflash_config.attention_sink_bias",),
        fate_missing="random",
        missing=Event("warning", "random_init", "dflash.sglang.random_init", LOAD),
        source=at(f"{MODEL}:313 (DFlashAttention.attention_sink_bias)"),
    ),
    variants=(NEMOTRON_35,),
)
