"""Quantized drafters: the stored shape of a quantized linear weight, and which tensor names are its scales."""

from __future__ import annotations

from ...rules import Param
from .settings import Draft

#: Suffixes of the scale tensors a quantized linear layer stores beside its weight (FP8, ModelOpt NVFP4).
SCALE_SUFFIXES = ("weight_scale_2", "weight_scale", "input_scale")
#: Bytes hold two FP4 values: NVFP4 weights are stored [out, in / 2] (U8).
NVFP4_PACKING = 2


def covered(param: Param, draft: Draft) -> bool:
    """Whether the drafter's quantization_config quantizes this parameter's module."""
    q = draft.spec.quantization
    return q is not None and param.module is not None and q.covers(param.module)


def quantized_shape(param: Param, shape: tuple[int, ...] | None, draft: Draft) -> tuple[int, ...] | None:
    """The shape the engine builds for a linear weight under the drafter's quantization (packed for NVFP4)."""
    q = draft.spec.quantization
    if shape is None or q is None or not covered(param, draft) or len(shape) != 2:
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
