"""The MTP family's mutations (mutate.py runs them with the others): one plausible mistake each in the MTP load
rules (ckptdiff/families/mtp/), named by the rule it changes."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any


def _engine_module(name: str) -> Any:
    return importlib.import_module(f"ckptdiff.families.mtp.engines.{name}")


def _change(name: str, **fields: Any) -> None:
    module = _engine_module(name)
    module.ENGINE = dataclasses.replace(module.ENGINE, **fields)


def _severity(name: str, field: str, severity: str) -> None:
    engine = _engine_module(name).ENGINE
    _change(name, **{field: dataclasses.replace(getattr(engine, field), severity=severity)})


def _vllm_reads_first_layer_only() -> None:
    original = _engine_module("vllm").ENGINE.layer_ids
    _change("vllm", layer_ids=lambda spec, target: original(spec, target)[:1])


def _sglang_accepts_any_count() -> None:
    _change("sglang", nextn_allowed=None)


def _sglang_standalone_index_dropped() -> None:
    _change("sglang", layer_ids=lambda spec, target: (spec.hidden_layers,) if spec.hidden_layers is not None else ())


def _vllm_export_index_own() -> None:
    _change("vllm", layer_ids=lambda spec, target: spec.announced)


def _vllm_keeps_own_embedding() -> None:
    engine = _engine_module("vllm").ENGINE
    _change("vllm", taken=tuple(t for t in engine.taken if "embed_tokens" not in t))


def _sglang_loads_embed_and_head() -> None:
    _change("sglang", from_target=(), taken=())


def _vllm_top_embedding_skipped() -> None:
    _change("vllm", loads_top_embedding=False)


def _vllm_layer_missing_warns() -> None:
    _severity("vllm", "layer_missing", "warning")


def _sglang_layer_missing_raises() -> None:
    _severity("sglang", "layer_missing", "error")


def _vllm_no_module_exemption() -> None:
    _change("vllm", strict=lambda param: True)


def _deepseek(engine: Any) -> int:
    """Where the engine's (modelled) DeepSeek class is among its classes: the first modelled one."""
    return next(i for i, c in enumerate(engine.classes) if c.not_modelled is None)


def _with_deepseek(engine: Any, **fields: Any) -> tuple[Any, ...]:
    at = _deepseek(engine)
    classes = list(engine.classes)
    classes[at] = dataclasses.replace(classes[at], **fields)
    return tuple(classes)


def _vllm_kimi_k2_class() -> None:
    engine = _engine_module("vllm").ENGINE
    first = engine.classes[_deepseek(engine)]
    _change("vllm", classes=_with_deepseek(engine, model_types=(*first.model_types, "kimi_k2")))


def _sglang_qkv_a_written_apart() -> None:
    _change("sglang", joined=())


def _vllm_moe_always() -> None:
    _change("vllm", moe_layer=lambda spec, index: spec.moe)


def _sglang_moe_by_index() -> None:
    _change("sglang", moe_layer=_engine_module("vllm").ENGINE.moe_layer)


def _sglang_extra_expert_raises() -> None:
    _severity("sglang", "extra_expert", "error")


def _vllm_extra_expert_skipped() -> None:
    _severity("vllm", "extra_expert", "warning")


def _sglang_stacked_unknown_skipped() -> None:
    _severity("sglang", "stacked_unknown", "warning")


def _prefix(name: str, **fields: Any) -> None:
    """Change the Qwen3-Next class's ``mtp.*`` rules (its PrefixLoad) in engine ``name``."""
    engine = _engine_module(name).ENGINE
    classes = tuple(
        dataclasses.replace(c, prefix=dataclasses.replace(c.prefix, **fields)) if c.prefix is not None else c
        for c in engine.classes
    )
    _change(name, classes=classes)


def _prefix_severity(name: str, field: str, severity: str) -> None:
    load = next(c.prefix for c in _engine_module(name).ENGINE.classes if c.prefix is not None)
    _prefix(name, **{field: dataclasses.replace(getattr(load, field), severity=severity)})


def _vllm_qn_one_layer() -> None:
    _prefix("vllm", layers_built=lambda spec: 1)


def _sglang_qn_nextn_layers() -> None:
    _prefix("sglang", layers_built=lambda spec: spec.nextn if spec.nextn is not None else 1)


def _vllm_qn_strict_everything() -> None:
    _prefix("vllm", strict=lambda param: True)


def _vllm_qn_strict_nothing() -> None:
    _prefix("vllm", strict=lambda param: False)


def _vllm_qn_skips_embed_head() -> None:
    _prefix("vllm", reads=lambda name: name.startswith("mtp."))


def _sglang_qn_extra_expert_skipped() -> None:
    _prefix_severity("sglang", "extra_expert", "warning")


def _vllm_qn_extra_expert_raises() -> None:
    _prefix_severity("vllm", "extra_expert", "error")


def _sglang_qn_keeps_self_attn() -> None:
    _prefix("sglang", rename=lambda rest: rest if rest.startswith(("fc.", "pre_fc_norm_")) else f"model.{rest}")


def _qn_ungated_q() -> None:
    prefix = importlib.import_module("ckptdiff.families.mtp.engines.prefix")
    original = prefix.expected

    def ungated(spec: Any, layers: int, moe: Any) -> Any:
        shapes = original(spec, layers, moe)
        for name, shape in shapes.items():
            if name.endswith("q_proj.weight") and shape is not None:
                shapes[name] = (shape[0] // 2, *shape[1:])
        return shapes

    prefix.expected = ungated


def _qn_stacking_forgotten() -> None:
    prefix = importlib.import_module("ckptdiff.families.mtp.engines.prefix")
    prefix.STACKED = tuple(s for s in prefix.STACKED if "self_attn" not in s[0])


def _sglang_qn_short_expert_partial() -> None:
    _prefix("sglang", expert_short_fate="partial")


def _sglang_qn_block_missing_raises() -> None:
    _prefix_severity("sglang", "block_missing", "error")


def _nextn_no_transformers_default() -> None:
    detect = importlib.import_module("ckptdiff.families.mtp.detect")
    detect.NEXTN_DEFAULTS.clear()


def _sglang_fp8(**fields: Any) -> None:
    """SGLang's DeepSeek NextN class with its FP8 rules changed (``fp8=None``: not modelled)."""
    engine = _engine_module("sglang").ENGINE
    first = engine.classes[_deepseek(engine)]
    fp8 = None if fields.get("fp8", True) is None else dataclasses.replace(first.fp8, **fields)
    _change("sglang", classes=_with_deepseek(engine, fp8=fp8))


def _sglang_fp8_not_modelled() -> None:
    _sglang_fp8(fp8=None)


def _sglang_fp8_no_scale_params() -> None:
    _sglang_fp8(scales=lambda quant: ())


def _sglang_fp8_no_dtype_check() -> None:
    _sglang_fp8(checked=())


def _sglang_fp8_scale_missing_raises() -> None:
    engine = _engine_module("sglang").ENGINE
    first = engine.classes[_deepseek(engine)]
    assert first.fp8 is not None
    _sglang_fp8(scale_missing=dataclasses.replace(first.fp8.scale_missing, severity="error"))


def _sglang_fp8_scales_written_apart() -> None:
    engine = _engine_module("sglang").ENGINE
    _change("sglang", joined=tuple(j for j in engine.joined if not j.endswith("weight_scale_inv")))


def _sglang_fp8_checks_fp8_params_only() -> None:
    _sglang_fp8(refuses=lambda tensor, parameter: parameter.startswith("F8_") and not tensor.startswith("F8_"))


def _mtp_detected_before_eagle3() -> None:
    families = importlib.import_module("ckptdiff.families")
    order = {"mtp": 0, "eagle3": 1}
    families.FAMILIES = tuple(sorted(families.FAMILIES, key=lambda f: order.get(f.name, 2)))


def _quant(name: str, **fields: Any) -> None:
    """A change to the engine's FP8 rules for Qwen3-Next's mtp.* block (PrefixQuant)."""
    load = next(c.prefix for c in _engine_module(name).ENGINE.classes if c.prefix is not None)
    assert load.quant is not None
    _prefix(name, quant=dataclasses.replace(load.quant, **fields))


def _sglang_qn_asks_checkpoint_names() -> None:
    _quant("sglang", module=lambda module: None if module == "fc" else f"mtp.{module}")


def _sglang_qn_fc_quantized() -> None:
    _quant("sglang", module=lambda module: f"model.{module}")


def _vllm_qn_strict_when_quantized() -> None:
    _quant("vllm", param_missing=None, block_missing=None)


def _vllm_qn_mixed_shards_allowed() -> None:
    load = next(c.prefix for c in _engine_module("vllm").ENGINE.classes if c.prefix is not None)
    assert load.quant is not None
    _quant("vllm", mixed_shards=dataclasses.replace(load.quant.mixed_shards, severity="warning"))


def _sglang_qn_cast_refused() -> None:
    load = next(c.prefix for c in _engine_module("sglang").ENGINE.classes if c.prefix is not None)
    assert load.quant is not None
    _quant("sglang", weight_cast=dataclasses.replace(load.quant.weight_cast, severity="error"))


def _qn_scale_shapes_unchecked() -> None:
    quant = importlib.import_module("ckptdiff.families.mtp.engines.prefix_quant")
    original = quant.plan

    def plan(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if out is not None:
            out.scales = dict.fromkeys(out.scales)
        return out

    quant.plan = plan


def _sglang_qn_fused_blocks_unchecked() -> None:
    _quant("sglang", checks_fused_shards=False)


def _qn_expert_width_unchecked() -> None:
    quant = importlib.import_module("ckptdiff.families.mtp.engines.prefix_quant")
    original = quant._check_blocks

    def check(out: Any, module: str, dims: Any, block: int) -> None:
        if not module.endswith(".experts"):
            original(out, module, dims, block)

    quant._check_blocks = check


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "mtp.vllm.layer_ids.every_nextn_layer": ("vLLM reads only layer N, not N..N+n-1", _vllm_reads_first_layer_only),
    "mtp.sglang.nextn_allowed.one": ("SGLang accepts num_nextn_predict_layers != 1", _sglang_accepts_any_count),
    "mtp.sglang.layer_ids.zero_when_one_layer": (
        "SGLang's 'read layer 0 when num_hidden_layers is 1' rule dropped",
        _sglang_standalone_index_dropped,
    ),
    "mtp.vllm.layer_ids.from_target": (
        "vLLM takes a standalone export's MTP layer index from the export's config, not the target's",
        _vllm_export_index_own,
    ),
    "mtp.vllm.taken.embedding": ("vLLM keeps its own embedding instead of the target's", _vllm_keeps_own_embedding),
    "mtp.sglang.from_target.embed_and_head": (
        "SGLang stops taking embed_tokens and the head from the target",
        _sglang_loads_embed_and_head,
    ),
    "mtp.vllm.top_embedding.loaded": (
        "vLLM no longer loads the target's top-level embed_tokens into the drafter",
        _vllm_top_embedding_skipped,
    ),
    "mtp.vllm.layer_missing.raises": ("vLLM's missing-layer event becomes a warning", _vllm_layer_missing_warns),
    "mtp.sglang.layer_missing.silent": ("SGLang's missing-layer event becomes an error", _sglang_layer_missing_raises),
    "mtp.vllm.strict.module_exemption": (
        "vLLM's strict check no longer exempts linear/embedding/MoE parameters",
        _vllm_no_module_exemption,
    ),
    "mtp.vllm.classes.no_kimi_k2": ("vLLM gets an MTP class for model_type kimi_k2", _vllm_kimi_k2_class),
    "mtp.sglang.joined.qkv_a": (
        "SGLang writes q_a_proj and kv_a_proj_with_mqa apart (not only together)",
        _sglang_qkv_a_written_apart,
    ),
    "mtp.vllm.moe_layer.by_index": ("vLLM builds every MTP layer's MLP with experts", _vllm_moe_always),
    "mtp.sglang.moe_layer.always": ("SGLang follows first_k_dense_replace for its NextN MLP", _sglang_moe_by_index),
    "mtp.sglang.extra_expert.skipped": (
        "SGLang raises on an expert past n_routed_experts",
        _sglang_extra_expert_raises,
    ),
    "mtp.vllm.extra_expert.raises": ("vLLM skips an expert past n_routed_experts", _vllm_extra_expert_skipped),
    "mtp.sglang.stacked_unknown.raises": (
        "SGLang skips a stacked piece whose fused parameter it lacks",
        _sglang_stacked_unknown_skipped,
    ),
    "mtp.nextn.transformers_default": (
        "no num_nextn_predict_layers means no MTP layer (transformers' default of 1 ignored)",
        _nextn_no_transformers_default,
    ),
    "families.order.eagle3_first": ("MTP is detected before EAGLE-3", _mtp_detected_before_eagle3),
    # ---- SGLang's block-FP8 NextN layer (sglang.py FP8)
    "mtp.sglang.fp8.modelled": (
        "SGLang's FP8 NextN build not modelled: scales taken as they come, no dtype check, eh_proj's scale loaded",
        _sglang_fp8_not_modelled,
    ),
    "mtp.sglang.fp8.scales_built": (
        "SGLang's FP8 linears and experts get no weight_scale_inv parameter",
        _sglang_fp8_no_scale_params,
    ),
    "mtp.sglang.fp8.dtype_refused": (
        "SGLang's q_b_proj/kv_b_proj loaders cast a BF16 tensor into their FP8 weight (no copy_with_check)",
        _sglang_fp8_no_dtype_check,
    ),
    "mtp.sglang.fp8.joined_scales": (
        "SGLang writes q_a_proj's and kv_a_proj_with_mqa's scales apart (only their weights are joined)",
        _sglang_fp8_scales_written_apart,
    ),
    "mtp.sglang.fp8.dtype_rank": (
        "SGLang's dtype check refuses only a non-FP8 tensor into an FP8 weight (an F64 scale into F32 accepted)",
        _sglang_fp8_checks_fp8_params_only,
    ),
    "mtp.sglang.fp8.scale_missing_silent": (
        "SGLang raises on an FP8 scale no tensor fills",
        _sglang_fp8_scale_missing_raises,
    ),
    # ---- Qwen3-Next's mtp.* block (PrefixLoad)
    "mtp.vllm.qwen3_next.layers_built.nextn": (
        "vLLM builds one Qwen3-Next MTP layer whatever num_nextn_predict_layers says",
        _vllm_qn_one_layer,
    ),
    "mtp.sglang.qwen3_next.layers_built.one": (
        "SGLang builds num_nextn_predict_layers Qwen3-Next MTP layers",
        _sglang_qn_nextn_layers,
    ),
    "mtp.vllm.qwen3_next.strict.norms_only": (
        "vLLM's strict check names every Qwen3-Next MTP parameter no tensor fills",
        _vllm_qn_strict_everything,
    ),
    "mtp.vllm.qwen3_next.strict.norms": ("vLLM's strict check names no RMSNorm", _vllm_qn_strict_nothing),
    "mtp.vllm.qwen3_next.reads.embed_head": (
        "vLLM's Qwen3NextMTP skips the target's embed_tokens and lm_head",
        _vllm_qn_skips_embed_head,
    ),
    "mtp.sglang.qwen3_next.extra_expert.raises": (
        "SGLang skips an expert past num_experts",
        _sglang_qn_extra_expert_skipped,
    ),
    "mtp.vllm.qwen3_next.extra_expert.skipped": (
        "vLLM raises on an expert past num_experts",
        _vllm_qn_extra_expert_raises,
    ),
    "mtp.sglang.qwen3_next.rename.self_attn": (
        "SGLang keeps .self_attn in the Qwen3-Next MTP layer's names",
        _sglang_qn_keeps_self_attn,
    ),
    "mtp.qwen3_next.shapes.gated_q": (
        "q_proj expected without the output gate's half (attn_output_gate ignored)",
        _qn_ungated_q,
    ),
    "mtp.qwen3_next.stacked.qkv": ("q/k/v not stacked into qkv_proj", _qn_stacking_forgotten),
    "mtp.sglang.qwen3_next.expert_short.altered": (
        "SGLang leaves a narrower expert's slot partly written (as vLLM)",
        _sglang_qn_short_expert_partial,
    ),
    "mtp.sglang.qwen3_next.block_missing.silent": (
        "SGLang raises when the mtp.* block is missing",
        _sglang_qn_block_missing_raises,
    ),
    # ---- a quantized (FP8) Qwen3-Next mtp.* block (PrefixQuant)
    "mtp.sglang.qwen3_next.quant.module.model_prefix": (
        "SGLang asks its FP8 config about the checkpoint's mtp.* names (not its model.layers.0.* modules)",
        _sglang_qn_asks_checkpoint_names,
    ),
    "mtp.sglang.qwen3_next.quant.fc.plain_linear": (
        "SGLang builds mtp.fc FP8-quantized like the rest (not a plain nn.Linear)",
        _sglang_qn_fc_quantized,
    ),
    "mtp.vllm.qwen3_next.quant.strict_off": (
        "vLLM's strict check stays on for a quantized target's MTP block",
        _vllm_qn_strict_when_quantized,
    ),
    "mtp.vllm.qwen3_next.quant.mixed_shards.refused": (
        "vLLM builds a fused linear whose shards the ignore list splits",
        _vllm_qn_mixed_shards_allowed,
    ),
    "mtp.sglang.qwen3_next.quant.weight_cast.silent": (
        "SGLang refuses a BF16 weight into the MTP block's FP8 parameters (as a plain column-parallel loader does)",
        _sglang_qn_cast_refused,
    ),
    "mtp.qwen3_next.quant.scale_shapes": ("the block scales' shapes are not checked", _qn_scale_shapes_unchecked),
    "mtp.sglang.qwen3_next.quant.fused_block_shape": (
        "SGLang lets a fused FP8 layer whose shards are not whole blocks through (as vLLM)",
        _sglang_qn_fused_blocks_unchecked,
    ),
    "mtp.qwen3_next.quant.expert_width_blocks": (
        "a routed expert width that is not whole blocks is built",
        _qn_expert_width_unchecked,
    ),
}
