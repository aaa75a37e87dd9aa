"""vLLM's MTP drafters, as data: DeepSeekMTP (deepseek_mtp.py) for DeepSeek-V3/V3.2 and GLM-MoE-DSA targets,
Glm4MoeMTP (glm4_moe_mtp.py), Qwen3NextMTP (qwen3_next_mtp.py); MiMoMTP (mimo_mtp.py), Glm4MoeLiteMTP
(glm4_moe_lite_mtp.py), ErnieMTP (ernie_mtp.py) and Qwen3_5(Moe)MTP (qwen3_5_mtp.py) built, their loaders not
modelled; the model-type mapping in config/speculative.py (the rest of its targets in :mod:`.vllm_types`)."""

from __future__ import annotations

import re

from ...rules import Event, Source
from ..spec import MtpSpec
from .model import Fused, MtpClass, MtpEngine, dsa, unmodelled
from .prefix import PrefixLoad, vllm_moe_layer
from .prefix_quant import PrefixQuant
from .vllm_types import chosen_first, override_classes

REPO = "vllm-project/vllm"
VERSION = "v0.33.0"
DEEPSEEK = Source(REPO, VERSION, "vllm/model_executor/models/deepseek_mtp.py (DeepSeekMTP.load_weights)")
#: deepseek_v32 / glm_moe_dsa → DeepseekV32MTPModel (use_v32_mtp), on CUDA vllm/models/deepseek_v32/nvidia/mtp.py.
DEEPSEEK_V32 = Source(
    REPO,
    VERSION,
    "vllm/config/speculative.py:733,755-763 (DeepseekV32MTPModel), vllm/models/deepseek_v32/nvidia/mtp.py:365 "
    "(DeepseekV32MTP.load_weights), vllm/models/deepseek_v32/attention.py:180-199 (the MTP layer's indexer)",
)
DEEPSEEK_DSA = Source(
    REPO,
    VERSION,
    "vllm/model_executor/models/deepseek_mtp.py:91 (is_v32: index_topk), deepseek_v2.py:1138-1168 (the indexer)",
)
GLM = Source(REPO, VERSION, "vllm/model_executor/models/glm4_moe_mtp.py")
QWEN3_NEXT = Source(REPO, VERSION, "vllm/model_executor/models/qwen3_next_mtp.py")
#: Qwen3NextMTP.load_weights: names neither under mtp. nor holding embed_tokens/lm_head are skipped, mtp. → model.
#: MiMoForCausalLM → MiMoMTPModel (num_hidden_layers 0: model.mtp_layers.{i} at i), loaded by MiMoMTP.load_weights.
MIMO = Source(
    REPO, VERSION, "vllm/config/speculative.py:795-805 (MiMoForCausalLM), vllm/model_executor/models/mimo_mtp.py"
)
#: Glm4MoeLiteForCausalLM (GLM-4.7-Flash) → Glm4MoeLiteMTPModel, loaded by Glm4MoeLiteMTP.load_weights.
GLM_LITE = Source(
    REPO,
    VERSION,
    "vllm/config/speculative.py:858-867 (Glm4MoeLiteForCausalLM), vllm/model_executor/models/glm4_moe_lite_mtp.py",
)
#: qwen3_5 / qwen3_5_moe (and their _text configs) → Qwen3_5MTP / Qwen3_5MoeMTP, mtp.* read as model.*.
QWEN3_5 = Source(
    REPO, VERSION, "vllm/config/speculative.py:987-1007 (qwen3_5*), vllm/model_executor/models/qwen3_5_mtp.py"
)
#: ernie4_5_moe → ErnieMTPModel, model.mtp_*.{i} read as model.layers.{N+i}.*.
ERNIE = Source(
    REPO, VERSION, "vllm/config/speculative.py:880-886 (ernie4_5_moe), vllm/model_executor/models/ernie_mtp.py"
)
#: Other targets vLLM builds an MTP drafter for (speculative.py's hf_config_override), whose loaders are not modelled.
LONGCAT = Source(REPO, VERSION, "vllm/config/speculative.py:1032-1037, vllm/model_executor/models/longcat_flash_mtp.py")
STEP3P5 = Source(REPO, VERSION, "vllm/config/speculative.py:1039-1051, vllm/model_executor/models/step3p5_mtp.py")
MIMO_V2 = Source(REPO, VERSION, "vllm/config/speculative.py:796-846, vllm/model_executor/models/mimo_v2_mtp.py")
QN_LOAD = Source(REPO, VERSION, "vllm/model_executor/models/qwen3_next_mtp.py:230-245 (Qwen3NextMTP.load_weights)")
QN_MOE = Source(REPO, VERSION, "vllm/model_executor/models/qwen3_next.py:131-245 (Qwen3NextSparseMoeBlock, FusedMoE)")
AUTO_LOADER = Source(REPO, VERSION, "vllm/model_executor/models/utils.py:443 (AutoWeightsLoader)")
QKV_LOADER = Source(REPO, VERSION, "vllm/model_executor/layers/linear.py:1311-1320 (QKVParallelLinear.weight_loader)")
SPECULATIVE = Source(REPO, VERSION, "vllm/config/speculative.py (SpeculativeConfig.hf_config_override)")
SPEC_LAYER = Source(REPO, VERSION, "vllm/model_executor/models/utils.py (get_spec_layer_idx_from_weight_name)")
TRACK = Source(REPO, VERSION, "vllm/model_executor/model_loader/default_loader.py (track_weights_loading)")
EAGLE_UTILS = Source(REPO, VERSION, "vllm/v1/worker/gpu/spec_decode/eagle/utils.py (load_eagle_model)")
LOADER_UTILS = Source(REPO, VERSION, "vllm/model_executor/model_loader/weight_utils.py (default_weight_loader)")
#: Fp8Config: ignored_layers, else modules_to_not_convert, matched exactly against each module's prefix; fused
#: modules by their shards (or their own name), the routed experts by any entry naming experts that contains it.
QN_FP8_SKIP = Source(
    REPO,
    VERSION,
    "vllm/model_executor/layers/quantization/fp8.py:158-205 (Fp8Config.from_config, get_quant_method), "
    "utils/quant_utils.py:619-693 (is_layer_skipped, exact)",
)
#: The MTP block's modules are named under mtp. (maybe_prefix(prefix, "mtp")), mtp.fc quantized with the rest
#: (only modelopt_fp4 keeps it plain); the router (GateLinear) and shared_expert_gate never take the quant config.
QN_PREFIXES = Source(REPO, VERSION, "vllm/model_executor/models/qwen3_next_mtp.py:70-96,194-196, qwen3_next.py:190-202")
#: A quantized linear's parameters: weight (FP8), weight_scale_inv (blocks) or weight_scale (per tensor),
#: input_scale (static activations); weight loaders copy a wider tensor into the FP8 weight as it is.
QN_FP8_WEIGHTS = Source(REPO, VERSION, "vllm/model_executor/layers/quantization/fp8.py:282-345 (create_weights)")
#: The strict "weights were not initialized" check runs for unquantized models only.
STRICT_OFF = Source(REPO, VERSION, "vllm/model_executor/model_loader/default_loader.py:510-523")
#: A routed expert's width must be whole blocks (validate_fp8_block_shape_moe); a fused layer with a shard that is
#: not is let through (linear.py: allow_fp8_block_shape_mismatch skips validate_fp8_block_shape).
QN_BLOCK_SHAPE = Source(
    REPO,
    VERSION,
    "vllm/model_executor/layers/quantization/utils/fp8_utils.py:1296-1373, layers/linear.py:562-581",
)
QN_QUANT = PrefixQuant(
    source=QN_FP8_SKIP,
    ignore_keys=("ignored_layers", "modules_to_not_convert"),
    normalise=list,
    module=lambda module: f"mtp.{module}",
    matches=lambda entry, name: entry == name,
    never_why="",
    scale_missing=Event("warning", "scale_missing", "mtp.vllm.scale_missing", STRICT_OFF),
    weight_cast=Event("warning", "weight_cast_to_fp8", "mtp.vllm.weight_cast_to_fp8", QN_FP8_WEIGHTS),
    weight_unscaled=Event("warning", "fp8_weight_unscaled", "mtp.weight_unscaled", QN_PREFIXES),
    scale_unexpected=Event("error", "unknown_name", "mtp.vllm.scale_unexpected", AUTO_LOADER),
    mixed_shards=Event("error", "quantization_config_invalid", "mtp.mixed_shards", QN_FP8_SKIP),
    built=Event("info", "mtp_quantized_block", "mtp.vllm.quantized_block", QN_FP8_SKIP),
    param_missing=Event("warning", "random_init", "mtp.vllm.random_init", STRICT_OFF),
    block_missing=Event("warning", "mtp_layer_missing", "mtp.vllm.mtp_block_missing_quantized", STRICT_OFF),
    checks_fused_shards=False,
    misaligned=Event("error", "quantization_config_invalid", "mtp.block_misaligned", QN_BLOCK_SHAPE),
    fused_name_skips=True,
)


def _layers(spec: MtpSpec, target: MtpSpec | None = None) -> tuple[int, ...]:
    """get_spec_layer_idx_from_weight_name: layers num_hidden_layers .. + num_nextn_predict_layers - 1, where a
    standalone export served beside its target (``speculative_config.model``) takes both from the target's config,
    not its own (observed: an export storing its layer at 0 is asked for layer num_hidden_layers of the target)."""
    if target is not None and target.hidden_layers is not None:
        count = target.nextn if target.nextn is not None else spec.nextn
        return tuple(range(target.hidden_layers, target.hidden_layers + (count or 0)))
    return spec.announced


def _moe_layer(spec: MtpSpec, index: int) -> bool:
    """DeepseekV2DecoderLayer's choice, for the MTP layer's own index: experts from first_k_dense_replace on, every
    moe_layer_freq-th layer."""
    text = spec.text
    first = text.get("first_k_dense_replace", 0)
    freq = text.get("moe_layer_freq", 1)
    first = first if isinstance(first, int) else 0
    freq = freq if isinstance(freq, int) and freq > 0 else 1
    return spec.moe and index >= first and index % freq == 0


def _strict(param: str) -> bool:
    """The parameters the strict check of an unquantized load names: those of modules without a quantization method
    (the norms, eh_proj's plain nn.Linear); a linear, embedding or MoE layer's are exempt module-wide."""
    return param.endswith(("norm.weight", "eh_proj.weight"))


def _spec_param(layer: int, rest: str) -> str:
    # _rewrite_spec_layer_name: the shared embed_tokens moves to the top level, the spec weights stay
    return "model.embed_tokens.weight" if rest.startswith("embed_tokens.") else f"model.layers.{layer}.{rest}"


ENGINE = MtpEngine(
    name="vllm",
    label="vLLM",
    classes=(
        *chosen_first(),
        # with index_topk (DSA) the same class builds the lightning indexer in each MTP layer (deepseek_mtp.py:91,
        # deepseek_v2.py:1138-1168): its loading of it is not modelled
        unmodelled("vllm", "DeepSeekMTPModel", DEEPSEEK_DSA, model_types=("deepseek_v3", "deepseek_mtp"), when=dsa),
        MtpClass("DeepSeekMTPModel", DEEPSEEK, model_types=("deepseek_v3", "deepseek_mtp")),
        # DeepSeek-V3.2 and GLM-5 (DSA): their own class on a GPU, whose MTP layers always build the lightning indexer
        # (wq_b, wk + weights_proj fused into wk_weights_proj, k_norm with a bias); not modelled, so their indexer
        # tensors are not called unknown names
        unmodelled("vllm", "DeepseekV32MTPModel", DEEPSEEK_V32, model_types=("deepseek_v32", "glm_moe_dsa")),
        MtpClass(
            "Glm4MoeMTPModel",
            GLM,
            architectures=("Glm4MoeForCausalLM",),
            loads_top_head=True,
            needs_moe=Event("error", "mtp_layer_not_moe", "mtp.vllm.mtp_layer_not_moe", GLM),
        ),
        MtpClass(
            "Qwen3NextMTP",
            QWEN3_NEXT,
            model_types=("qwen3_next", "qwen3_next_mtp"),
            layout="mtp",
            prefix=PrefixLoad(
                source=QN_LOAD,
                reads=lambda name: name.startswith("mtp.") or "embed_tokens" in name or "lm_head" in name,
                top_level=lambda name: name if name in ("model.embed_tokens.weight", "lm_head.weight") else None,
                rename=lambda rest: f"model.{rest}",
                # num_nextn_predict_layers full-attention layers, 1 when absent (qwen3_next_mtp.py:62-96)
                layers_built=lambda spec: spec.nextn if spec.nextn is not None else 1,
                moe_layer=vllm_moe_layer,
                experts="experts.routed_experts",
                taken=("model.embed_tokens.weight", "lm_head.weight"),
                # the RMSNorms have no quantization method: the strict check names them; fc, qkv/o_proj, the
                # router, the shared expert and its gate, the experts are exempt (their modules have one)
                strict=lambda param: re.search(r"norm(_\w+)?\.weight$", param) is not None,
                param_missing=Event("error", "missing_weight", "mtp.vllm.missing_weight", TRACK),
                param_missing_exempt=Event("warning", "random_init", "mtp.vllm.random_init_exempt", TRACK),
                block_missing=Event("error", "mtp_layer_missing", "mtp.vllm.mtp_block_missing", TRACK),
                extra_expert=Event("warning", "extra_expert", "mtp.vllm.extra_expert", QN_MOE),
                unknown=Event("error", "unknown_name", "mtp.vllm.mtp_unknown_name", AUTO_LOADER),
                shape_error=Event("error", "shape_mismatch", "mtp.vllm.shape_mismatch", LOADER_UTILS),
                shard_short=Event("error", "shape_mismatch", "mtp.shard_short", QKV_LOADER),
                shard_long=Event("warning", "shard_truncated", "mtp.shard_long", QKV_LOADER),
                expert_short=Event("warning", "expert_short", "mtp.vllm.expert_short", QN_MOE),
                expert_short_fate="partial",
                outside=Event("info", "outside_mtp_layers", "mtp.vllm.outside_mtp_block", QN_LOAD),
                quant=QN_QUANT,
            ),
        ),
        unmodelled(
            "vllm",
            "MiMoMTPModel",
            MIMO,
            architectures=("MiMoForCausalLM",),
            layout="mimo",
        ),
        unmodelled(
            "vllm",
            "Glm4MoeLiteMTPModel",
            GLM_LITE,
            architectures=("Glm4MoeLiteForCausalLM",),
        ),
        unmodelled(
            "vllm",
            "ErnieMTPModel",
            ERNIE,
            model_types=("ernie4_5_moe", "ernie_mtp"),
            layout="ernie",
        ),
        *(
            unmodelled(
                "vllm",
                name,
                source,
                model_types=types,
                architectures=archs,
                layout="other",
            )  # fmt: skip
            for name, source, types, archs in (
                ("LongCatFlashMTPModel", LONGCAT, ("longcat_flash",), ()),
                (
                    "Step3p5MTP",
                    STEP3P5,
                    ("step3p5", "step3p7"),
                    ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration"),
                ),
                ("MiMoV2MTPModel", MIMO_V2, (), ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM")),
            )
        ),
        unmodelled(
            "vllm",
            "Qwen3_5MTP",
            QWEN3_5,
            model_types=("qwen3_5", "qwen3_5_text"),
            layout="mtp",
        ),
        unmodelled(
            "vllm",
            "Qwen3_5MoeMTP",
            QWEN3_5,
            model_types=("qwen3_5_moe", "qwen3_5_moe_text"),
            layout="mtp",
        ),
        *override_classes(),
    ),
    registry=SPECULATIVE,
    no_class=Event("error", "mtp_not_supported", "mtp.vllm.mtp_not_supported", SPECULATIVE),
    nextn_absent=Event("error", "mtp_layers_not_announced", "mtp.vllm.mtp_layers_not_announced", SPECULATIVE),
    nextn_allowed=None,
    nextn_refused=None,
    layer_ids=_layers,
    prefixes=("model.layers.{layer}.", "model.language_model.layers.{layer}."),
    from_target=(),
    from_target_event=Event("info", "from_target", "mtp.vllm.from_target", EAGLE_UTILS),
    taken=("model.embed_tokens.weight", "model.layers.{layer}.shared_head.head.weight"),
    loads_top_embedding=True,
    spec_param=_spec_param,
    block_param=lambda layer, rest: f"model.layers.{layer}.mtp_block.{rest}",
    fused=(
        Fused("q_a_proj", "fused_qkv_a_proj", "0"),
        Fused("kv_a_proj_with_mqa", "fused_qkv_a_proj", "1"),
        Fused("gate_proj", "gate_up_proj", "0"),
        Fused("up_proj", "gate_up_proj", "1"),
        Fused("q_proj", "qkv_proj", "q"),
        Fused("k_proj", "qkv_proj", "k"),
        Fused("v_proj", "qkv_proj", "v"),
    ),
    joined=(),
    experts="mlp.experts.routed_experts",
    moe_layer=_moe_layer,
    extra_expert=Event("error", "unknown_name", "mtp.vllm.unknown_name", DEEPSEEK),
    stacked_unknown=Event("error", "unknown_name", "mtp.vllm.unknown_name", DEEPSEEK),
    strict=_strict,
    param_missing_exempt=Event("warning", "random_init", "mtp.vllm.random_init_exempt", TRACK),
    unread_layer=Event("warning", "mtp_layer_unread", "mtp.vllm.mtp_layer_unread", SPEC_LAYER),
    layer_missing=Event("error", "mtp_layer_missing", "mtp.vllm.mtp_layer_missing", DEEPSEEK),
    param_missing=Event("error", "missing_weight", "mtp.vllm.missing_weight", TRACK),
    outside=Event("info", "outside_mtp_layers", "mtp.vllm.outside_mtp_layers", SPEC_LAYER),
    unknown=Event("error", "unknown_name", "mtp.vllm.unknown_name", DEEPSEEK),
    shape_error=Event("error", "shape_mismatch", "mtp.vllm.shape_mismatch", LOADER_UTILS),
    by_own_name=True,
)
#: A quantized target (a quantization_config) turns off the strict check: a parameter no tensor fills keeps its
#: initial values, silently.
QUANTIZED_PARAM_MISSING = Event("warning", "random_init", "mtp.vllm.random_init", TRACK)
