"""SGLang's MTP (NextN) drafters, as data: DeepseekV3ForCausalLMNextN (deepseek_nextn.py, loading through
deepseek_common/deepseek_weight_loader.py), Glm4MoeForCausalLMNextN, Qwen3NextForCausalLMMTP; MiMoMTP,
Glm4MoeLiteForCausalLMNextN, GlmMoeDsaForCausalLMNextN, Ernie4_5_MoeForCausalLMMTP and Qwen3_5ForCausalLMMTP built,
their loaders not modelled; the draft architecture chosen in configs/model_config.py."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...rules import Event, Source
from ..spec import MtpSpec
from .model import Fp8Load, Fused, MtpClass, MtpEngine, dsa, unmodelled
from .prefix import PrefixLoad
from .prefix_quant import PrefixQuant
from .sglang_types import override_classes

REPO = "sgl-project/sglang"
VERSION = "v0.5.23"
NEXTN = Source(REPO, VERSION, "python/sglang/srt/models/deepseek_nextn.py")
LOADER = Source(
    REPO, VERSION, "python/sglang/srt/models/deepseek_common/deepseek_weight_loader.py (_initialize_nextn_conf)"
)
GLM = Source(REPO, VERSION, "python/sglang/srt/models/glm4_moe_nextn.py")
QWEN3_NEXT = Source(REPO, VERSION, "python/sglang/srt/models/qwen3_next_mtp.py")
#: Qwen3NextForCausalLM.load_weights(is_mtp=True): names without "mtp" skipped; mtp.fc / pre_fc_norm_* to the top,
#: the rest mtp → model, ".self_attn" dropped, q/k/v and gate/up stacked, experts by FusedMoE's mapping, anything
#: else params_dict[name] (KeyError when absent); nothing checks that every parameter was written.
#: MiMoForCausalLM → MiMoMTP for the draft (model_config.py:1092-1093), loaded by MiMoMTP.load_weights.
MIMO = Source(
    REPO, VERSION, "python/sglang/srt/configs/model_config.py:1092-1093, python/sglang/srt/models/mimo_mtp.py"
)
#: Glm4MoeLiteForCausalLM (GLM-4.7-Flash) → Glm4MoeLiteForCausalLMNextN for the draft (model_config.py:1065-1069).
GLM_LITE = Source(
    REPO,
    VERSION,
    "python/sglang/srt/configs/model_config.py:1065-1069, python/sglang/srt/models/glm4_moe_lite_nextn.py",
)
#: Qwen3.5's architectures (dense, MoE; multimodal or text-only) → Qwen3_5ForCausalLMMTP for the draft.
QWEN3_5 = Source(
    REPO, VERSION, "python/sglang/srt/configs/model_config.py:1159-1181, python/sglang/srt/models/qwen3_5_mtp.py"
)
#: GlmMoeDsaForCausalLM (GLM-5) → GlmMoeDsaForCausalLMNextN for the draft (model_config.py:1038-1039), a
#: DeepseekV3ForCausalLMNextN with its own layer-index and exclude-list handling (glm4_moe.py:1288).
GLM_DSA = Source(
    REPO, VERSION, "python/sglang/srt/configs/model_config.py:1038-1039, python/sglang/srt/models/glm4_moe.py:1288"
)
#: Ernie4_5_MoeForCausalLM → Ernie4_5_MoeForCausalLMMTP for the draft (model_config.py:1128-1132).
ERNIE = Source(
    REPO, VERSION, "python/sglang/srt/configs/model_config.py:1128-1132, python/sglang/srt/models/ernie4_eagle.py"
)
#: Other targets SGLang builds an MTP (NextN) drafter for (model_config.py), whose loaders are not modelled.
LONGCAT = Source(REPO, VERSION, "python/sglang/srt/configs/model_config.py:1085-1090 (LongcatFlashForCausalLMNextN)")
MIMO_V2 = Source(
    REPO, VERSION, "python/sglang/srt/configs/model_config.py:1094-1096, python/sglang/srt/models/mimo_v2_nextn.py"
)
STEP3P5 = Source(
    REPO, VERSION, "python/sglang/srt/configs/model_config.py:1097-1098, python/sglang/srt/models/step3p5_mtp.py"
)
QN_LOAD = Source(REPO, VERSION, "python/sglang/srt/models/qwen3_next.py:1138-1277 (Qwen3NextForCausalLM.load_weights)")
#: Every Qwen3-Next decoder layer's MLP is a MoE; on CUDA its shared expert may be fused into expert slot
#: num_experts (qwen2_moe.py:283-289); modelled as built here, unfused: a missing shared expert stays random either
#: way.
QN_MOE = Source(REPO, VERSION, "python/sglang/srt/models/qwen3_next.py:543-559, qwen2_moe.py:283-289")
QKV_LOADER = Source(REPO, VERSION, "python/sglang/srt/layers/linear.py:1329-1358 (QKVParallelLinear.weight_loader)")


def _sglang_name(rest: str) -> str:
    """mtp.fc / mtp.pre_fc_norm_* lose their prefix; the rest go under model. without ".self_attn"."""
    if rest in ("fc.weight", "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight"):
        return rest
    return ("model." + rest.replace("mtp", "model")).replace(".self_attn", "")


MODEL_CONFIG = Source(REPO, VERSION, "python/sglang/srt/configs/model_config.py (draft architecture override)")
LOADER_UTILS = Source(REPO, VERSION, "python/sglang/srt/model_loader/weight_utils.py (default_weight_loader)")


#: Fp8Config.from_config: a quant_method with "fp8" in it is an FP8-serialized checkpoint; with weight_block_size
#: (DeepSeek-V3's layout) Fp8LinearMethod builds each linear's weight in float8_e4m3fn with a float32
#: weight_scale_inv that starts at torch.finfo(float32).min, and Fp8MoEMethod the experts' w13/w2_weight_scale_inv
#: (starting at 1). Per-tensor FP8 (no weight_block_size) is not modelled: its scales are taken as they come.
FP8_SCALES = Source(
    REPO,
    VERSION,
    "python/sglang/srt/layers/quantization/fp8.py:346-365 (Fp8Config.from_config), 654-689 (create_fp8_weight_), "
    "1720-1746 (Fp8MoEMethod.create_weights)",
)
#: DeepseekModelNextN builds eh_proj as a plain nn.Linear (not quantized, whatever the config); the loader renames
#: the spec weights to model.* and skips a name that is no parameter ("not found in params_dict"); eh_proj.weight
#: goes through default_weight_loader, a plain copy_ (an FP8 tensor is cast to BF16, unscaled).
EH_PROJ = Source(
    REPO,
    VERSION,
    "python/sglang/srt/models/deepseek_nextn.py:101-104; deepseek_common/deepseek_weight_loader.py:331-335, 525-533; "
    "model_loader/weight_utils.py:1574-1586",
)
#: q_b_proj, q_proj and kv_b_proj are ColumnParallelLinear (deepseek_v2.py:2078-2093, 2145-2152): their FP8
#: parameters load through load_column_parallel_weight → copy_with_check, which refuses a wider float type
#: (or a non-float one); the raise surfaces once every tensor was handed over (the loads run in a thread pool,
#: deepseek_weight_loader.py:546-548). The other linears' loaders copy without that check.
DOWNCAST = Source(
    REPO,
    VERSION,
    "python/sglang/srt/layers/parameter.py:33-79 (copy_with_check), 175; layers/linear.py:584-610 "
    "(ColumnParallelLinear.weight_loader_v2); models/deepseek_v2.py:2078-2093, 2145-2152",
)
#: parameter.py _dtype_rank: the float types by width; a load from a higher rank into a lower one raises.
_FLOAT_RANK = {"F8_E4M3": 0, "F8_E5M2": 0, "F8_E8M0": 0, "F16": 1, "BF16": 1, "F32": 2, "F64": 3}


def _refuses(tensor: str, parameter: str) -> bool:
    """copy_with_check: same dtype copies; a type it does not rank raises; a wider type into a narrower one raises
    (unless SGLANG_QUANT_ALLOW_DOWNCASTING is set)."""
    if tensor == parameter:
        return False
    got, want = _FLOAT_RANK.get(tensor), _FLOAT_RANK.get(parameter)
    return got is None or want is None or got > want


def _block_fp8(quant: Mapping[str, Any]) -> bool:
    """Block FP8 as Fp8Config reads it (MXFP8, whose scales are uint8 in [1, 32] blocks, is not modelled)."""
    method = quant.get("quant_method")
    return (
        isinstance(method, str)
        and "fp8" in method
        and "mxfp8" not in method
        and quant.get("weight_block_size") is not None
    )


#: The NextN decoder's linears (MLA projections, shared and routed experts, a dense MLP), built with the
#: quantization config; the router (mlp.gate) and the norms are not linears.
_QUANTIZED = re.compile(r"(^|\.)\w+_proj(_with_mqa)?\.weight$")

FP8 = Fp8Load(
    source=FP8_SCALES,
    applies=_block_fp8,
    scales=lambda quant: ("weight_scale_inv",),
    quantized=lambda rest: _QUANTIZED.search(rest) is not None,
    weight_dtype="F8_E4M3",
    scale_dtype="F32",
    plain=("eh_proj",),
    plain_unscaled=Event("warning", "fp8_weight_unscaled", "mtp.sglang.fp8_weight_unscaled", EH_PROJ),
    checked=("self_attn.q_b_proj.", "self_attn.q_proj.", "self_attn.kv_b_proj."),
    refuses=_refuses,
    dtype_refused=Event("error", "dtype_refused", "mtp.sglang.dtype_refused", DOWNCAST),
    scale_missing=Event("warning", "random_init", "mtp.sglang.fp8_scale_missing", FP8_SCALES),
)


#: Fp8Config: ignored_layers or modules_to_not_convert, each entry kept with and without a leading "model.",
#: matched on module-path boundaries; fused modules by their shards only (Qwen3NextForCausalLMMTP never sets the
#: packed mapping: the fallback's qkv/gate_up shards), the routed experts also by any entry naming experts that
#: contains the module's name.
QN_FP8_SKIP = Source(
    REPO,
    VERSION,
    "python/sglang/srt/layers/quantization/fp8.py:346-414 (Fp8Config.from_config, get_quant_method), "
    "utils.py:48-125 (_module_path_match, is_layer_skipped)",
)
#: mtp.fc is a plain nn.Linear; the MTP layer is built as model.layers.0 (Qwen3NextModel(prefix="model")), so
#: the config is asked about model.layers.0.*, not the checkpoint's mtp.layers.0.*.
QN_PREFIXES = Source(REPO, VERSION, "python/sglang/srt/models/qwen3_next_mtp.py:60-74")
#: Only a plain column-parallel weight's loader refuses a wider tensor (copy_with_check); the block's qkv, gate_up,
#: row-parallel and expert loaders copy a BF16 tensor into the FP8 weight as it is.
QN_PARAMS = Source(REPO, VERSION, "python/sglang/srt/layers/parameter.py:51-79,145-175,215-338")
#: A name no parameter takes: params_dict[name] (KeyError), or a name ending in _scale asserted to hold 1.0.
QN_SCALE_LOAD = Source(REPO, VERSION, "python/sglang/srt/models/qwen3_next.py:1259-1275 (load_weights)")


def _sglang_ignored(entries: list[str]) -> list[str]:
    """Fp8Config.from_config keeps each entry both without and with a leading ``model.``."""
    out: list[str] = []
    for entry in entries:
        base = entry.removeprefix("model.")
        out += [base, f"model.{base}"]
    return out


def _path_match(entry: str, name: str) -> bool:
    """_module_path_match: the entry is the module, one of its parents, or a dotted run inside its path."""
    entry, name = entry.rstrip("."), name.rstrip(".")
    return entry == name or name.startswith(entry + ".") or f".{entry}." in f".{name}."


#: A fused layer's shards (every one) and a routed expert's width must be whole blocks.
QN_BLOCK_SHAPE = Source(
    REPO, VERSION, "python/sglang/srt/layers/quantization/fp8.py:570-611,1586-1601 (validate_block_quant_shapes)"
)
QN_QUANT = PrefixQuant(
    source=QN_FP8_SKIP,
    ignore_keys=("ignored_layers", "modules_to_not_convert"),
    normalise=_sglang_ignored,
    module=lambda module: None if module == "fc" else f"model.{module}",
    matches=_path_match,
    never_why="SGLang builds {module} as a plain nn.Linear, whatever the config",
    scale_missing=Event("warning", "scale_missing", "mtp.sglang.scale_missing", QN_LOAD),
    weight_cast=Event("warning", "weight_cast_to_fp8", "mtp.sglang.weight_cast_to_fp8", QN_PARAMS),
    weight_unscaled=Event("warning", "fp8_weight_unscaled", "mtp.weight_unscaled", QN_PREFIXES),
    scale_unexpected=Event("error", "unknown_name", "mtp.sglang.scale_unexpected", QN_SCALE_LOAD),
    mixed_shards=Event("error", "quantization_config_invalid", "mtp.mixed_shards", QN_FP8_SKIP),
    built=Event("info", "mtp_quantized_block", "mtp.sglang.quantized_block", QN_FP8_SKIP),
    checks_fused_shards=True,
    misaligned=Event("error", "quantization_config_invalid", "mtp.block_misaligned", QN_BLOCK_SHAPE),
    fused_name_skips=False,
)


def _layers(spec: MtpSpec, target: MtpSpec | None = None) -> tuple[int, ...]:
    """nextn_layer_id: 0 when num_hidden_layers is 1 (a standalone NextN export), else num_hidden_layers, both
    from the draft's own config (``speculative_draft_model_path``), whatever the target's."""
    n = spec.hidden_layers
    if n is None:
        return ()
    return (0,) if n == 1 else (n,)


ENGINE = MtpEngine(
    name="sglang",
    label="SGLang",
    classes=(
        # with index_topk (DSA: is_deepseek_dsa, model_config.py:191) its MTP layer builds the lightning indexer
        # (deepseek_v2.py:2052-2143): its loading of it is not modelled
        unmodelled(
            "sglang",
            "DeepseekV3ForCausalLMNextN",
            Source(REPO, VERSION, "python/sglang/srt/configs/model_config.py:191, models/deepseek_v2.py:2052-2143"),
            architectures=("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN"),
            when=dsa,
        ),
        MtpClass(
            "DeepseekV3ForCausalLMNextN",
            NEXTN,
            architectures=("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN"),
            fp8=FP8,
        ),
        MtpClass(
            "Glm4MoeForCausalLMNextN",
            GLM,
            architectures=("Glm4MoeForCausalLM", "Glm4MoeForCausalLMNextN"),
            skips_stacked_unknown=True,
        ),
        MtpClass(
            "Qwen3NextForCausalLMMTP",
            QWEN3_NEXT,
            architectures=("Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP"),
            layout="mtp",
            prefix=PrefixLoad(
                source=QN_LOAD,
                reads=lambda name: "mtp" in name,
                top_level=lambda name: None,
                rename=_sglang_name,
                # one decoder layer (num_hidden_layers = 1) whatever num_nextn_predict_layers says
                # (qwen3_next_mtp.py:66-74)
                layers_built=lambda spec: 1,
                moe_layer=lambda spec, index: True,
                experts="experts",
                taken=("model.embed_tokens.weight", "lm_head.weight"),
                strict=lambda param: False,
                param_missing=Event("warning", "random_init", "mtp.sglang.random_init", QN_LOAD),
                param_missing_exempt=Event("warning", "random_init", "mtp.sglang.random_init", QN_LOAD),
                block_missing=Event("warning", "mtp_layer_missing", "mtp.sglang.mtp_block_missing", QN_LOAD),
                extra_expert=Event("error", "unknown_name", "mtp.sglang.mtp_extra_expert", QN_LOAD),
                unknown=Event("error", "unknown_name", "mtp.sglang.mtp_unknown_name", QN_LOAD),
                shape_error=Event("error", "shape_mismatch", "mtp.sglang.shape_mismatch", LOADER_UTILS),
                shard_short=Event("error", "shape_mismatch", "mtp.shard_short", QKV_LOADER),
                shard_long=Event("warning", "shard_truncated", "mtp.shard_long", QKV_LOADER),
                expert_short=Event("warning", "expert_short", "mtp.sglang.expert_short", QN_MOE),
                expert_short_fate="altered",
                outside=Event("info", "outside_mtp_layers", "mtp.sglang.outside_mtp_block", QN_LOAD),
                quant=QN_QUANT,
            ),
        ),
        unmodelled(
            "sglang",
            "MiMoMTP",
            MIMO,
            architectures=("MiMoForCausalLM",),
            layout="mimo",
        ),
        unmodelled(
            "sglang",
            "Glm4MoeLiteForCausalLMNextN",
            GLM_LITE,
            architectures=("Glm4MoeLiteForCausalLM",),
        ),
        unmodelled(
            "sglang",
            "Ernie4_5_MoeForCausalLMMTP",
            ERNIE,
            architectures=("Ernie4_5_MoeForCausalLM",),
            layout="ernie",
        ),
        *(
            unmodelled(
                "sglang",
                name,
                source,
                architectures=archs,
                layout="other",
            )  # fmt: skip
            for name, source, archs in (
                ("LongcatFlashForCausalLMNextN", LONGCAT, ("LongcatFlashForCausalLM",)),
                ("MiMoV2MTP", MIMO_V2, ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")),
                ("Step3p5MTP", STEP3P5, ("Step3p5ForCausalLM",)),
            )
        ),
        unmodelled(
            "sglang",
            "GlmMoeDsaForCausalLMNextN",
            GLM_DSA,
            architectures=("GlmMoeDsaForCausalLM",),
        ),
        unmodelled(
            "sglang",
            "Qwen3_5ForCausalLMMTP",
            QWEN3_5,
            architectures=(
                "Qwen3_5ForConditionalGeneration",
                "Qwen3_5MoeForConditionalGeneration",
                "Qwen3_5ForCausalLM",
                "Qwen3_5MoeForCausalLM",
            ),
            layout="mtp",
        ),
        *override_classes(),
    ),
    registry=MODEL_CONFIG,
    no_class=Event("error", "mtp_not_supported", "mtp.sglang.mtp_not_supported", MODEL_CONFIG),
    nextn_absent=Event("error", "mtp_layers_key_absent", "mtp.sglang.mtp_layers_not_announced", LOADER),
    nextn_allowed=(1,),
    nextn_refused=Event("error", "mtp_layer_count_unsupported", "mtp.sglang.mtp_layer_count_unsupported", LOADER),
    layer_ids=_layers,
    # `name.startswith(nextn_layer_prefix)`, the prefix without its trailing dot
    prefixes=("model.layers.{layer}.",),
    from_target=("shared_head.head", "embed_tokens"),
    from_target_event=Event("info", "from_target", "mtp.sglang.from_target", LOADER),
    taken=("model.embed_tokens.weight", "lm_head.weight"),
    loads_top_embedding=False,
    spec_param=lambda layer, rest: f"model.{rest}",
    block_param=lambda layer, rest: f"model.decoder.{rest}",
    fused=(
        Fused("q_a_proj", "fused_qkv_a_proj_with_mqa", "0"),
        Fused("kv_a_proj_with_mqa", "fused_qkv_a_proj_with_mqa", "1"),
        Fused("gate_proj", "gate_up_proj", "0"),
        Fused("up_proj", "gate_up_proj", "1"),
        Fused("q_proj", "qkv_proj", "q"),
        Fused("k_proj", "qkv_proj", "k"),
        Fused("v_proj", "qkv_proj", "v"),
    ),
    # q_a_proj and kv_a_proj_with_mqa are cached until both are there, then concatenated (one write)
    # (their FP8 scales too: the cache keys on "q_a_proj" / "kv_a_proj_with_mqa" in the name,
    # deepseek_weight_loader.py:438-513)
    joined=(
        "model.decoder.self_attn.fused_qkv_a_proj_with_mqa.weight",
        "model.decoder.self_attn.fused_qkv_a_proj_with_mqa.weight_scale_inv",
    ),
    experts="mlp.experts",
    moe_layer=lambda spec, index: spec.moe,  # the NextN decoder is built as a MoE layer whatever its index
    extra_expert=Event("warning", "extra_expert", "mtp.sglang.extra_expert", LOADER),
    stacked_unknown=Event("error", "unknown_name", "mtp.sglang.stacked_unknown", LOADER),
    strict=lambda param: False,
    param_missing_exempt=Event("warning", "random_init", "mtp.sglang.random_init", LOADER),
    unread_layer=Event("warning", "mtp_layer_unread", "mtp.sglang.mtp_layer_unread", LOADER),
    layer_missing=Event("warning", "mtp_layer_missing", "mtp.sglang.mtp_layer_missing", LOADER),
    param_missing=Event("warning", "random_init", "mtp.sglang.random_init", LOADER),
    outside=Event("info", "outside_mtp_layers", "mtp.sglang.outside_mtp_layers", LOADER),
    unknown=Event("warning", "skipped_unknown_name", "mtp.sglang.skipped_unknown_name", LOADER),
    shape_error=Event("error", "shape_mismatch", "mtp.sglang.shape_mismatch", LOADER_UTILS),
    by_own_name=True,
)
