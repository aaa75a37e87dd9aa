"""SGLang 0.5.23's DFlash drafter, as data: ``DFlashDraftModel`` (srt/models/dflash.py), its config parsed by
``parse_dflash_draft_config`` (srt/speculative/dflash_utils.py), the ids checked at start-up against the target
(srt/model_executor/model_runner_components/spec_aux_hidden_state.py), the target's embedding and head used by
the DFLASH worker (srt/speculative/dflash_worker_v2.py). Each rule cites the file and line it was read at."""

from __future__ import annotations

from ...rules import Event, Source
from .model import Alias, DFlashClass, DFlashEngine, IdsKey, Refusal, Stacked

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
    layers_required=Event("error", "layers_required", "dflash.sglang.layers_required", at(f"{UTILS}:545")),
    ids_malformed=Event("error", "target_layer_ids_malformed", "dflash.sglang.target_layer_ids_malformed", IDS),
    # a present [] is parsed as given and refused as empty (ids_malformed); only a missing key or null is unset
    ids_keys=(
        IdsKey("dflash_config.target_layer_ids", empty_is_unset=False),
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
)
