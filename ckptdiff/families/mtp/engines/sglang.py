"""SGLang's MTP (NextN) drafters, as data: DeepseekV3ForCausalLMNextN (deepseek_nextn.py, loading through
deepseek_common/deepseek_weight_loader.py), Glm4MoeForCausalLMNextN, Qwen3NextForCausalLMMTP; the draft
architecture chosen in configs/model_config.py."""

from __future__ import annotations

from ...rules import Event, Source
from ..spec import MtpSpec
from .model import Fused, MtpClass, MtpEngine
from .prefix import PrefixLoad
from .prefix_quant import PrefixQuant

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
        MtpClass(
            "DeepseekV3ForCausalLMNextN",
            NEXTN,
            architectures=("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN"),
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
    joined=("model.decoder.self_attn.fused_qkv_a_proj_with_mqa.weight",),
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
)
