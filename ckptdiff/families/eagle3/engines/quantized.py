"""Quantized drafters: the stored shape of a quantized linear weight, and which tensor names are its scales."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from ...rules import Param
from ..spec import Quantization
from .settings import Draft

#: How an engine decides a linear layer is left unquantized: (the quantization_config, the layer's name as the
#: engine's modules are named, e.g. "model.fc", "model.layers.0.self_attn.q_proj") → left alone.
Ignores = Callable[[Quantization, str, Draft], bool]

#: Suffixes of the scale tensors a quantized linear layer stores beside its weight (FP8, ModelOpt NVFP4).
SCALE_SUFFIXES = ("weight_scale_2", "weight_scale", "input_scale", "weight_zero_point")
#: Bytes hold two FP4 values: NVFP4 weights are stored [out, in / 2] (U8).
NVFP4_PACKING = 2


def engine_layer_name(param: Param) -> str:
    """The engine's name of the linear layer a parameter belongs to, per shard: "model.layers.0.self_attn.qkv_proj
    .weight[q]" → "model.layers.0.self_attn.q_proj" (quantization configs name the checkpoint's unfused layers)."""
    parent = re.sub(r"\.weight(\[\w+\])?$", "", param.name).rsplit(".", 1)[0]
    last = (param.module or "").rsplit(".", 1)[-1]
    return f"{parent}.{last}" if "." in param.name.removesuffix(".weight") else last


def covered(param: Param, draft: Draft, ignores: Ignores | None = None) -> bool:
    """Whether the drafter's quantization_config quantizes this parameter's module (``ignores``: the engine's own
    matching of the ignore list against its layer names; None: ckptdiff's generic one on canonical names)."""
    q = draft.spec.quantization
    if q is None or param.module is None:
        return False
    if ignores is not None:
        return not ignores(q, engine_layer_name(param), draft)
    return q.covers(param.module)


def vllm_ignores(q: Quantization, layer: str, draft: Draft) -> bool:
    """vLLM 0.33.0: the drafter's decoder layers are numbered after the target's (llama_eagle3.py: start_layer_id =
    the target's num_hidden_layers), so layer i is "model.layers.{n + i}" to the quantization config (unknown
    without --base: no exact name matches it). The fp8 method matches its ignored_layers exactly against the full
    layer name (quantization/utils/quant_utils.py is_layer_skipped, match_mode "exact": "fc" does not name "model.fc");
    ModelOpt's exclude_modules are mapped like the weights ("midlayer." → "layers.0."), then matched exactly, as
    substrings or as wildcards (modelopt.py is_layer_excluded); compressed-tensors' ignore entries exactly or as
    "re:" regular expressions (compressed_tensors/utils.py should_ignore_layer)."""
    n = draft.target.layers if draft.target is not None else None
    canonical = layer.removeprefix("model.").replace("layers.0.", "midlayer.")
    layer = re.sub(r"^model\.layers\.(\d+)\.", lambda m: f"model.layers.{n + int(m[1]) if n else '?'}.", layer)
    if q.method == "fp8":
        return layer in q.ignore
    if q.method == "modelopt":
        patterns = [p.replace("midlayer.", "layers.0.") for p in q.ignore]
        return any(p == layer or p in layer or fnmatch.fnmatchcase(layer, p) for p in patterns)
    if q.method == "compressed-tensors":
        return any(
            re.match(p.removeprefix("re:"), layer) is not None if p.startswith("re:") else p == layer for p in q.ignore
        )
    return not q.covers(canonical)


def quantized_shape(
    param: Param, shape: tuple[int, ...] | None, draft: Draft, ignores: Ignores | None = None
) -> tuple[int, ...] | None:
    """The shape the engine builds for a linear weight under the drafter's quantization (packed for NVFP4)."""
    q = draft.spec.quantization
    if shape is None or q is None or not covered(param, draft, ignores) or len(shape) != 2:
        return shape
    if q.weight_format == "nvfp4":
        return (shape[0], shape[1] // NVFP4_PACKING)
    return shape


def scale_of(name: str) -> tuple[str, str] | None:
    """``x.weight_scale`` → ("x.weight", "weight_scale"): the weight a scale tensor belongs to, or None."""
    for suffix in SCALE_SUFFIXES:
        if name.endswith("." + suffix):
            return name[: -len(suffix)] + "weight", suffix
    return None
