"""vLLM's EAGLE-3 drafter loading, as data (llama_eagle3.py, qwen3_eagle3.py, configs; deepseek_eagle3.py's MLA
drafter in vllm_mla.py, what they share in vllm_common.py)."""

from __future__ import annotations

from ...rules import (
    AuxIds,
    Case,
    Engine,
    Event,
    Loader,
    Param,
    Source,
    SpeculatorsAdapter,
    target_hidden_check,
)
from .capture import ClassCapture, vllm_default
from .llama_layer import MAX_LAYERS, Biases, decoder_layers, fc_block, layer_exists
from .quantized import vllm_ignores
from .settings import Draft
from .target_classes import VLLM_REFUSED
from .vllm_common import (
    AUX,
    BIAS_IGNORED,
    D2T,
    DROPS,
    EMBED,
    KV_SCALES,
    LLAMA,
    LM_HEAD,
    NESTED_IDS,
    NORM,
    QWEN3,
    REGISTRY,
    RENAMES,
    REPO,
    SHAPE,
    SPECULATIVE,
    SPECULATORS,
    SPECULATORS_ALGOS,
    UNCHECKED,
    UNKNOWN,
    VERSION,
    fc_norm_read,
    later_layers_unread,
    layer,
)
from .vllm_mla import MLA_LOADER

CT_SOURCE = Source(
    REPO,
    VERSION,
    "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py "
    "(_quantization_scheme_map_from_config)",
)
CT_ASSERTION = Event("error", "quantization_config_invalid", "eagle3.vllm.compressed_tensors_activations", CT_SOURCE)


def _compressed_tensors_int_without_activations(d: Draft) -> bool:
    """An activation-quantization format (int-/float-/naive-quantized) whose group has no input_activations and
    integer weights: vLLM asserts the weights are floats (w8a16fp8 is the only such scheme)."""
    q = d.spec.quantization
    config = d.config.get("quantization_config")
    if q is None or q.method != "compressed-tensors" or not isinstance(config, dict):
        return False
    groups = config.get("config_groups")
    for group in groups.values() if isinstance(groups, dict) else ():
        fmt = group.get("format") or config.get("format")
        weights = group.get("weights") or {}
        if fmt in ACTIVATION_FORMATS and not group.get("input_activations") and weights.get("type") != "float":
            return True
    return False


ACTIVATION_FORMATS = ("int-quantized", "float-quantized", "naive-quantized")


def _kv_scale(i: int, which: str) -> Param:
    return Param(
        f"model.layers.{i}.self_attn.attn.{which}_scale",
        lambda d: None,
        KV_SCALES,
        exists=lambda d: (
            any(n.endswith(f"layers.{i}.self_attn.{which}_proj.{which}_scale") for n in d.names)
            or (i == 0 and any(n.endswith(f"midlayer.self_attn.{which}_proj.{which}_scale") for n in d.names))
        ),
    )


KV_SCALE_PARAMS = tuple(_kv_scale(i, which) for i in range(MAX_LAYERS) for which in ("k", "v"))

#: qkv_proj: bias=attention_bias; o_proj: attention_bias or bias; LlamaMLP: bias=mlp_bias (LlamaDecoderLayer).
BIASES = Biases(
    qkv=lambda d: d.spec.attention_bias,
    o_proj=lambda d: d.spec.attention_bias or d.spec.bias,
    mlp=lambda d: d.spec.mlp_bias,
)


FC = fc_block(
    "model.fc", LLAMA, UNCHECKED, fc_norm="model.fc_norm", input_norm="model.input_norm", fc_norm_read=fc_norm_read
)
#: qwen3_eagle3 sizes fc from num_aux_layers, num_aux_hidden_states, then top-level, then nested ids.
QWEN3_FC_KEYS = ("eagle_aux_hidden_state_layer_ids", *NESTED_IDS)

LLAMA_LOADER = Loader(
    architectures=(
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "PeagleLlamaForCausalLM",
        "Eagle3MiniMaxM2ForCausalLM",
        "Eagle3Qwen2_5vlForCausalLM",
        "Eagle3Qwen3vlForCausalLM",
    ),
    source=LLAMA,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}",),
    params=(
        EMBED,
        *FC,
        *decoder_layers(layer, LLAMA, UNCHECKED, biases=BIASES, unread=later_layers_unread(LLAMA)),
        *KV_SCALE_PARAMS,
        NORM,
        LM_HEAD,
        D2T,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    fc_aux_keys=NESTED_IDS,
    ignored_unexpected=BIAS_IGNORED,
    ignores=vllm_ignores,
)

QWEN3_NORMS = tuple(
    Param(
        f"model.layers.{i}.self_attn.{norm}.weight",
        lambda d: (d.spec.head_dim_size,) if d.spec.head_dim_size else None,
        QWEN3,
        exists=layer_exists(i),
        absent=(UNCHECKED,),
    )
    for i in range(MAX_LAYERS)
    for norm in ("q_norm", "k_norm")
)

QWEN3_LOADER = Loader(
    architectures=("Eagle3Qwen3ForCausalLM", "PeagleQwen3ForCausalLM"),
    source=QWEN3,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}",),
    params=(
        EMBED,
        *fc_block(
            "model.fc",
            QWEN3,
            UNCHECKED,
            fc_norm="model.fc_norm",
            input_norm="model.input_norm",
            fc_norm_read=fc_norm_read,
        ),
        *decoder_layers(layer, QWEN3, UNCHECKED, biases=BIASES, unread=later_layers_unread(QWEN3)),
        *QWEN3_NORMS,
        NORM,
        LM_HEAD,
        *KV_SCALE_PARAMS,
        D2T,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    fc_aux_keys=QWEN3_FC_KEYS,
    ignored_unexpected=BIAS_IGNORED,
    ignores=vllm_ignores,
)

#: The runner's set-up (eagle3_utils.set_eagle3_aux_hidden_state_layers: the ids read, else the class's
#: get_eagle3_default_aux_hidden_state_layers, interfaces.py: (2, n//2, n-3), which DeepSeek-V2 does not override)
#: keeps ids as they are; every class's forward takes hidden_states + residual at index i before layer i (i = n:
#: after the last), so id j is the output of layer j-1. Observed per class by the oracle (run.py --capture).
SETUP = Source(
    REPO, VERSION, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (set_eagle3_aux_hidden_state_layers)"
)


def _vllm_family(
    label: str, architectures: tuple[str, ...], model_types: tuple[str, ...], forward: str, example: str = ""
) -> ClassCapture:
    return ClassCapture(
        label,
        architectures,
        model_types,
        indices=lambda ids, n: tuple(ids),
        default=vllm_default,
        takes="input",
        reached=lambda n: range(0, n + 1),
        setup=SETUP,
        forward=Source(REPO, VERSION, forward),
        example=example,
    )


CAPTURES = (
    _vllm_family(
        "Llama",
        ("LlamaForCausalLM", "MistralForCausalLM"),
        ("llama", "mistral"),
        "vllm/model_executor/models/llama.py (LlamaModel.forward: _maybe_add_hidden_state(aux, idx + 1, ...))",
        "Llama-3.1-8B",
    ),
    _vllm_family(
        "Llama-4",
        # Llama4ForConditionalGeneration hands the ids and the default to its language_model (mllama4.py:803-813),
        # a Llama4ForCausalLM built from text_config (mllama4.py:779-785): the default is interfaces.py:1751-1775's
        # (2, n//2, n-3) over its decoder's layers, n = text_config.num_hidden_layers
        ("Llama4ForConditionalGeneration", "Llama4ForCausalLM"),
        ("llama4", "llama4_text"),
        "vllm/model_executor/models/llama4.py:384 (Llama4Model keeps LlamaModel.forward, llama.py:438-441: "
        "_maybe_add_hidden_state(aux, idx + 1, ...))",
        "Llama-4-Maverick",
    ),
    _vllm_family(
        "Qwen2/Qwen3",
        ("Qwen2ForCausalLM", "Qwen3ForCausalLM"),
        ("qwen2", "qwen3"),
        "vllm/model_executor/models/qwen2.py (Qwen2Model.forward, which Qwen3Model inherits)",
        "Qwen3-8B",
    ),
    _vllm_family(
        "Qwen3-MoE",
        ("Qwen3MoeForCausalLM",),
        ("qwen3_moe",),
        "vllm/model_executor/models/qwen3_moe.py (Qwen3MoeModel.forward)",
        "Qwen3-235B-A22B",
    ),
    _vllm_family(
        "DeepSeek-V2/V3",
        # KimiK25ForConditionalGeneration hands the ids to its language_model, a DeepseekV3ForCausalLM (kimi_k25.py
        # set_aux_hidden_state_layers, get_eagle3_default_aux_hidden_state_layers)
        ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"),
        ("deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25"),
        "vllm/model_executor/models/deepseek_v2.py (DeepseekV2Model.forward: if idx in aux_hidden_state_layers, "
        "before layer idx; end_layer after the last)",
        "Kimi-K2",
    ),
    _vllm_family(
        "GPT-OSS",
        ("GptOssForCausalLM",),
        ("gpt_oss",),
        "vllm/model_executor/models/gpt_oss.py (GptOssModel.forward: _maybe_add_hidden_state(aux, i + 1, ...))",
        "gpt-oss-120b",
    ),
)

ENGINE = Engine(
    name="vllm",
    label="vLLM",
    version="0.33.0 (installed source)",
    # EAGLEConfig keeps a name that starts or ends with Eagle3 and prepends Eagle3 to any other
    architecture_mapping=((r"^(?!Eagle3)(?!.*Eagle3$)", "Eagle3"),),
    loaders=(LLAMA_LOADER, QWEN3_LOADER, MLA_LOADER),
    unregistered=Event(
        "error",
        "architecture_not_registered",
        "eagle3.vllm.architecture_not_registered",
        REGISTRY,
    ),
    model_type_architectures=(
        (
            ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp"),
            "DeepSeekMTPModel",
        ),
    ),
    aux_ids=AuxIds(
        # The V2 model runner (the default for EAGLE-3 in 0.33.0) reads the top-level ids, then
        # eagle_config.layer_ids; the V1 runner (gpu_model_runner.py) reads eagle_config.eagle_aux_... instead.
        keys=("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids"),
        offset=-1,
        default_outputs=lambda n: (1, n // 2 - 1, n - 4),
        default_event=Event(
            "warning",
            "aux_ids_default",
            "eagle3.vllm.aux_ids_default",
            AUX,
        ),
        source=AUX,
        valid=lambda n: range(0, n + 1),
        classes=CAPTURES,
        off_without_aux=Event(
            "info",
            "aux_capture_off",
            "eagle3.aux_capture_off",
            Source(
                REPO,
                VERSION,
                "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:15 (requires_aux_hidden_states), "
                "vllm/v1/worker/gpu/model_runner.py:412 (the capture set up only when it is true)",
            ),
        ),
    ),
    # SpeculativeConfig._verify_args has no target model_type whitelist in this version; older releases
    # refused targets outside a list (vllm#22152, #31254): a rule for such a release sets target_model_types.
    target_model_types=None,
    refused_targets=VLLM_REFUSED,
    target_class_refused=Event(
        "error",
        "target_class_not_eagle3",
        "eagle3.vllm.target_class_not_eagle3",
        Source(
            REPO,
            VERSION,
            "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (set_eagle3_aux_hidden_state_layers: "
            "supports_eagle3)",
        ),
    ),
    target_refused=Event(
        "error",
        "target_not_supported",
        "eagle3.vllm.target_not_supported",
        SPECULATIVE,
    ),
    config_checks=(
        # The draft's config.json goes through transformers' AutoConfig, which needs model_type (seen by the oracle:
        # SpeculativeConfig raises a ValidationError at the config step without it).
        Case(
            lambda d: d.spec.model_type is None and d.spec.speculators is None,
            Event("error", "config_unrecognized", "eagle3.vllm.config_unrecognized", SPECULATIVE),
        ),
        Case(_compressed_tensors_int_without_activations, CT_ASSERTION),
        Case(
            lambda d: d.spec.speculators is not None and d.spec.norm_before_residual is None,
            Event(
                "info",
                "config_default_differs",
                "eagle3.vllm.config_default_differs",
                SPECULATORS_ALGOS,
            ),
        ),
    ),
    target_checks=(target_hidden_check(LLAMA.inferring(), "eagle3.vllm.target_hidden_mismatch"),),
    speculators=SpeculatorsAdapter(
        architectures=(("llama", "Eagle3LlamaForCausalLM"), ("qwen3", "Eagle3Qwen3ForCausalLM")),
        types=("eagle3", "peagle"),
        # register_speculator in transformers_utils/configs/speculators/algos.py: SUPPORTED_SPECULATORS_TYPES
        registered=("eagle3", "peagle", "dflash", "dflash2", "dspark"),
        other_drafters=(
            ("dflash", "a DFlash drafter (DFlashDraftModel)"),
            ("dflash2", "a DFlash2 drafter (DFlash2DraftModel)"),
            ("dspark", "a DSpark drafter (Qwen3DSparkModel)"),
        ),
        source=SPECULATORS,
        invalid=Event("error", "speculators_config_invalid", "eagle3.vllm.speculators_config_invalid", SPECULATORS),
        # validate_speculators_config runs only when the checkpoint is served as the model
        # (maybe_override_with_speculators); as --speculative-config's model it loads without it.
        validation=Event(
            "warning",
            "speculators_config_invalid",
            "eagle3.vllm.speculators_config_invalid.serve",
            SPECULATORS,
        ),
        # SpeculatorsConfig is a bare PretrainedConfig of transformer_layer_config (base.py): no LlamaConfig
        # defaults, so the keys LlamaDecoderLayer and the drafter read as attributes must be there (seen by the
        # oracle: hidden_act, intermediate_size, rms_norm_eps, vocab_size raise AttributeError at construction;
        # num_key_value_heads is read with a default).
        required=(
            "vocab_size",
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "hidden_act",
            "rms_norm_eps",
        ),
        incomplete=Event(
            "error",
            "speculators_layer_config_incomplete",
            "eagle3.vllm.speculators_layer_config_incomplete",
            Source(REPO, VERSION, "vllm/transformers_utils/configs/speculators/base.py (SpeculatorsConfig)"),
        ),
    ),
)
