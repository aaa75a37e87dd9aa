"""vLLM 0.33.0's DFlash drafter, as data: ``DFlashQwen3ForCausalLM`` (model_executor/models/qwen3_dflash.py) for
``DFlashDraftModel`` (and Muse Glimmer's alias), the ids read by ``get_eagle3_aux_layers_from_config``
(v1/worker/gpu/spec_decode/eagle/eagle3_utils.py), the embedding and head shared by the speculator's load
(v1/worker/gpu/spec_decode/eagle/utils.py). Each rule cites the file and line it was read at."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...rules import Event, Source
from .model import Alias, DFlashClass, DFlashEngine, IdsKey, MaskLookup, Refusal, SinkBias, Stacked

REPO, VERSION = "vllm-project/vllm", "v0.33.0"


def at(path: str) -> Source:
    return Source(REPO, VERSION, path)


MODEL = "vllm/model_executor/models/qwen3_dflash.py"
REGISTRY = at("vllm/model_executor/models/registry.py:664")
RENAME = at("vllm/transformers_utils/configs/eagle.py:65 (EAGLEConfig: DFlash{arch})")
IDS = at("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:113 (get_eagle3_aux_layers_from_config)")
FC = at(f"{MODEL}:84 (_get_dflash_fc_input_size)")
LOAD = at(f"{MODEL}:851 (DFlashQwen3ForCausalLM.load_weights)")
MAPPER = at(f"{MODEL}:390 (DFlashQwen3Model.hf_to_vllm_mapper)")
AUTO = at("vllm/model_executor/models/utils.py:443 (AutoWeightsLoader._load_module)")
LOADER_UTILS = at("vllm/model_executor/model_loader/weight_utils.py:1529 (default_weight_loader)")
SHARE = at("vllm/v1/worker/gpu/spec_decode/eagle/utils.py:18 (_should_share, maybe_share_target_embed)")
#: AutoWeightsLoader drops these rotary caches from any checkpoint (REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER).
ROTARY = at("vllm/model_executor/models/utils.py:233 (REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER)")
ROTARY_CACHES = ("rotary_pos_emb.inv_freq", "rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached")
TARGET_CAPTURE = at("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:28 (set_eagle3_aux_hidden_state_layers)")
CAPTURE = at("vllm/model_executor/models/interfaces.py:1751 (get_eagle3_default_aux_hidden_state_layers)")


def _looks_up(architecture: str) -> str:
    """EAGLEConfig under method="dflash": ``DFlash{arch}`` unless the name starts or ends with DFlash."""
    keep = architecture.startswith("DFlash") or architecture.endswith("DFlash") or architecture == "LiLiCorrDraftModel"
    return architecture if keep else f"DFlash{architecture}"


#: The drafter's attention layers are registered beside the target's and grouped with them at start-up: full
#: attention of any head size (MLA included, a FullAttentionSpec) makes one group of per-layer page sizes.
KV_GROUPS = at("vllm/v1/core/kv_cache_planning.py:1143 (get_kv_cache_groups: UniformTypeKVCacheSpecs.from_specs)")
#: qwen3_dflash.py:88 sizes fc from get_eagle3_aux_layers_from_config, whose ``i + 1`` (eagle3_utils.py:124) raises
#: TypeError on an id that is no int ("3"): the drafter is never built.
IDS_NOT_INT = at(f"{MODEL}:88 (_get_dflash_fc_input_size), vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:124")
V1_IDS = at("vllm/v1/worker/gpu_model_runner.py:5190 (GPUModelRunner._get_eagle3_aux_layers_from_config)")


def v1_capture_ids(config: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The capture indices the V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``) reads for a DFlash drafter: the
    top-level EAGLE-3 aux ids, else ``dflash_config.target_layer_ids`` + 1, then an ``eagle_config`` section's
    ``eagle_aux_hidden_state_layer_ids`` in their place (even when it has none); never the top-level
    ``target_layer_ids`` the V2 runner reads. None: the target class's default capture."""
    ids = config.get("eagle_aux_hidden_state_layer_ids")
    if not ids:
        dflash, eagle = config.get("dflash_config"), config.get("eagle_config")
        if isinstance(dflash, Mapping) and dflash:
            found = dflash.get("target_layer_ids")
            ids = [i + 1 for i in found if isinstance(i, int)] if isinstance(found, list) else None
        if isinstance(eagle, Mapping) and eagle:
            ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    return tuple(ids) if ids and isinstance(ids, list) else None


def _default_ids(target_layers: int | None, draft_layers: int | None) -> tuple[int, ...] | None:
    # No ids in the config: fc is built for one feature per drafter layer, while the target captures its class's
    # EAGLE-3 default, three states (2, n // 2, n - 3): the widths agree only for a three-layer drafter.
    return None


#: use_aux_hidden_state false (or null or 0: the drafter tests its truth): the drafter builds no fc and its
#: combine_hidden_states hands the captured states on as they are, while both runners capture for DFlash whatever
#: the drafter says. V2: the speculator copies the concatenated states into its hidden_size-wide buffer, first in the
#: start-up's profiling run (model_runner.py:964, the dummy propose). V1: the proposer asserts their width.
UNPROJECTED = at(
    "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:22 (requires_aux_hidden_states: always for dflash), "
    f"{MODEL}:833 (combine_hidden_states without fc), "
    "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py:417 (_store_hidden_states: copied into hidden_size)"
)
UNPROJECTED_V1 = at(
    "vllm/v1/worker/gpu_model_runner.py:647 (use_aux_hidden_state_outputs: always for dflash), "
    f"{MODEL}:833 (combine_hidden_states without fc), "
    "vllm/v1/spec_decode/llm_base_proposer.py:552 (assert width == hidden_size)"
)
DROPS_FC = at(f"{MODEL}:476 (no fc without use_aux_hidden_state), :885 (fc. mapped to None)")
#: fc's width against the captured states is checked where the drafter combines them (combine_hidden_states). V2:
#: first in start-up's profiling run, whose dummy propose stores the captured states. V1: its dummy run feeds the
#: drafter a hidden_size-wide buffer, so first at the first draft's propose.
NOT_CAPTURED = at(
    f"{MODEL}:829 (combine_hidden_states), "
    "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py:418 (_store_hidden_states), "
    "vllm/v1/worker/gpu/model_runner.py:964 (the profiling run's dummy propose)"
)
NOT_CAPTURED_V1 = at(
    "vllm/v1/worker/gpu_model_runner.py:5190 (GPUModelRunner._get_eagle3_aux_layers_from_config), "
    f"vllm/v1/spec_decode/llm_base_proposer.py:549 (propose: combine_hidden_states), {MODEL}:829"
)

#: DFlashQwen3DecoderLayer: dflash_config.get("attention_sink_bias", <top-level add_swa_attention_sink_bias>, else
#: False), by truth value; make_attention_sink fills the per-head biases with -inf (exp(-inf) = 0: no sink), and
#: load_weights returns nothing, so no check reports one left unfilled.
SINK_BIAS = SinkBias(
    keys=("dflash_config.attention_sink_bias", "add_swa_attention_sink_bias"),
    fate_missing="default",
    missing=Event(
        "warning",
        "sink_bias_default",
        "dflash.vllm.sink_bias_default",
        at(f"{MODEL}:314 (DFlashQwen3DecoderLayer), vllm/model_executor/model_loader/weight_utils.py:1584"),
    ),
    source=at(f"{MODEL}:229 (DFlashQwen3Attention.attention_sink_bias)"),
)
#: The V2 runner's DFlash speculator resolves the mask token as it is built (speculator.py:67):
#: get_parallel_drafting_token_id takes dflash_config's key when present (a null too: int(None)), then the top-level
#: mask_token_id when not null, then dspark_noise_token_id, pard_token, ptd_token_id when present, else ValueError.
MASK_LOOKUP_AT = at("vllm/v1/worker/gpu/spec_decode/utils.py:92 (get_parallel_drafting_token_id)")
MASK_LOOKUP = MaskLookup(
    keys=(
        ("dflash_config.mask_token_id", False),
        ("mask_token_id", True),
        ("dspark_noise_token_id", False),
        ("pard_token", False),
        ("ptd_token_id", False),
    ),
    missing=Event("error", "mask_token_missing", "dflash.vllm.mask_token_missing", MASK_LOOKUP_AT),
    null=Event("error", "mask_token_null", "dflash.vllm.mask_token_null", MASK_LOOKUP_AT),
)


ENGINE = DFlashEngine(
    name="vllm",
    label="vLLM",
    classes=(
        DFlashClass(
            "DFlashQwen3ForCausalLM",
            at(f"{MODEL}:736"),
            ("DFlashDraftModel", "MuseGlimmerAssistantModel", "DFlashMuseGlimmerAssistantModel"),
        ),
    ),
    looks_up=_looks_up,
    registry=REGISTRY,
    no_class=Event("error", "dflash_not_supported", "dflash.vllm.dflash_not_supported", RENAME),
    # qwen3_dflash.py reads dflash_config's settings with no check of their values (the Qwen3-Omni DSpark
    # contract of config/speculative.py:166 is another drafter's)
    config_checks=(),
    checks_before_ids=0,
    layers_required=None,
    ids_malformed=None,
    ids_not_int=Event("error", "target_layer_ids_malformed", "dflash.vllm.target_layer_ids_not_int", IDS_NOT_INT),
    ids_keys=(
        IdsKey("eagle_aux_hidden_state_layer_ids", 0),
        IdsKey("dflash_config.target_layer_ids", 1),
        IdsKey("target_layer_ids", 1),
        IdsKey("dflash_config.layer_ids", 0),
        IdsKey("eagle_config.layer_ids", 0),
    ),
    ids_source=IDS,
    default_ids=_default_ids,
    default_ids_words="the target class's EAGLE-3 default capture (three states) against one fc feature per layer",
    fc_hidden_keys=("target_hidden_size", "hidden_size"),
    fc_source=FC,
    ids_vs_trained_depth=None,
    ids_vs_target=None,
    not_captured=Event("error", "target_layer_not_captured", "dflash.vllm.target_layer_not_captured", NOT_CAPTURED),
    param_prefix="model.",
    strips_model_prefix=False,
    aliases=(
        Alias(r"^midlayer\.", "layers.0.", MAPPER),
        Alias(r"^encoder\.output_norm_enc\.", "hidden_norm.", MAPPER),
        Alias(r"^encoder\.fc\.", "fc.", MAPPER),
    ),
    stacked=(
        Stacked("q_proj", "qkv_proj", "q"),
        Stacked("k_proj", "qkv_proj", "k"),
        Stacked("v_proj", "qkv_proj", "v"),
        Stacked("gate_proj", "gate_up_proj", "0"),
        Stacked("up_proj", "gate_up_proj", "1"),
    ),
    stacked_source=MAPPER,
    refusals=(
        Refusal(
            "mask_hidden", Event("error", "mask_hidden_refused", "dflash.vllm.mask_hidden_refused", at(f"{MODEL}:856"))
        ),
    ),
    discards=(
        ("t2d", at(f"{MODEL}:861")),
        ("mask_embedding", at(f"{MODEL}:887")),
        *((piece, ROTARY) for piece in ROTARY_CACHES),
    ),
    own_embedding=True,
    own_head=True,
    from_target=Event("info", "from_target", "dflash.vllm.from_target", SHARE),
    carried_unused=Event("info", "carried_used", "dflash.vllm.carried_used", SHARE),
    aux_flag_drops_fc=True,
    unknown=Event("error", "unknown_name", "dflash.vllm.unknown_name", AUTO),
    shape_mismatch=Event("error", "shape_mismatch", "dflash.vllm.shape_mismatch", LOADER_UTILS),
    fc_mismatch=Event("error", "fc_width_mismatch", "dflash.vllm.fc_width_mismatch", FC),
    param_missing=Event("warning", "random_init", "dflash.vllm.random_init", LOAD),
    hidden_vs_target=Event("error", "hidden_mismatch", "dflash.vllm.hidden_mismatch", SHARE.inferring()),
    mask_vs_target=Event(
        "error", "mask_token_out_of_vocab", "dflash.vllm.mask_token_out_of_vocab", at(f"{MODEL}:497").inferring()
    ),
    target_unknown=Event("info", "target_unknown", "dflash.vllm.target_unknown", IDS),
    # supports_eagle3 of each class in the registry of the installed 0.33.0 (SupportsEagle3, interfaces.py)
    capturing_targets=(
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen2ForCausalLM",
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "GptOssForCausalLM",
        "DeepseekV3ForCausalLM",
        "MiniMaxM2ForCausalLM",
    ),  # fmt: skip
    refused_targets=("Gemma3ForCausalLM", "Glm4MoeForCausalLM"),
    target_refused=Event("error", "target_not_capturable", "dflash.vllm.target_not_capturable", TARGET_CAPTURE),
    target_class_unknown=Event("info", "target_class_unknown", "dflash.vllm.target_class_unknown", TARGET_CAPTURE),
    v1_ids=v1_capture_ids,
    v1_differs=Event("info", "v1_runner_capture_differs", "dflash.vllm.v1_runner_capture_differs", V1_IDS),
    not_captured_v1=Event(
        "error", "target_layer_not_captured", "dflash.vllm.target_layer_not_captured_v1", NOT_CAPTURED_V1
    ),
    draft_kv_cache=Event("info", "draft_kv_cache", "dflash.vllm.draft_kv_cache", KV_GROUPS),
    unprojected=Event("error", "aux_states_unprojected", "dflash.vllm.aux_states_unprojected", UNPROJECTED),
    unprojected_v1=Event("error", "aux_states_unprojected", "dflash.vllm.aux_states_unprojected_v1", UNPROJECTED_V1),
    as_is=Event("info", "aux_state_as_is", "dflash.vllm.aux_state_as_is", UNPROJECTED),
    fc_unused=Event("warning", "fc_unused", "dflash.vllm.fc_unused", DROPS_FC),
    sink_bias=SINK_BIAS,
    mask_lookup=MASK_LOOKUP,
)
