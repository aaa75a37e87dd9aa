"""The one dtype registry: safetensors dtype names, their bits, which are floats, and the torch names for each."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

#: A dtype spelled as in the safetensors spec (``BF16``, ``F8_E4M3``, ``BOOL``).
DType = str


class DTypeInfo(msgspec.Struct, frozen=True):
    """One safetensors dtype: bits per element (sub-byte ones are packed), whether it holds floating-point
    numbers, and how torch names it (``torch.<name>`` dtypes first, then typed-storage classes)."""

    name: DType
    bits: int
    is_float: bool
    torch_names: tuple[str, ...] = ()
    torch_storage: str | None = None


#: Every dtype of the safetensors spec, in the spec's order (error messages list them in this order).
DTYPES: Mapping[DType, DTypeInfo] = {
    info.name: info
    for info in (
        DTypeInfo("F4", 4, True),
        DTypeInfo("F6_E2M3", 6, True),
        DTypeInfo("F6_E3M2", 6, True),
        DTypeInfo("BOOL", 8, False, ("bool",), "BoolStorage"),
        DTypeInfo("U8", 8, False, ("uint8",), "ByteStorage"),
        DTypeInfo("I8", 8, False, ("int8",), "CharStorage"),
        DTypeInfo("F8_E5M2", 8, True, ("float8_e5m2",)),
        DTypeInfo("F8_E4M3", 8, True, ("float8_e4m3fn",)),
        DTypeInfo("F8_E8M0", 8, True, ("float8_e8m0fnu",)),
        DTypeInfo("F8_E4M3FNUZ", 8, True, ("float8_e4m3fnuz",)),
        DTypeInfo("F8_E5M2FNUZ", 8, True, ("float8_e5m2fnuz",)),
        DTypeInfo("I16", 16, False, ("int16", "short"), "ShortStorage"),
        DTypeInfo("U16", 16, False, ("uint16",)),
        DTypeInfo("F16", 16, True, ("float16", "half"), "HalfStorage"),
        DTypeInfo("BF16", 16, True, ("bfloat16",), "BFloat16Storage"),
        DTypeInfo("I32", 32, False, ("int32", "int"), "IntStorage"),
        DTypeInfo("U32", 32, False, ("uint32",)),
        DTypeInfo("F32", 32, True, ("float32", "float"), "FloatStorage"),
        DTypeInfo("C64", 64, False, ("complex64",), "ComplexFloatStorage"),
        DTypeInfo("F64", 64, True, ("float64", "double"), "DoubleStorage"),
        DTypeInfo("I64", 64, False, ("int64", "long"), "LongStorage"),
        DTypeInfo("U64", 64, False, ("uint64",)),
    )
}

#: Bits per element for every dtype of the spec.
DTYPE_BITS: Mapping[DType, int] = {name: info.bits for name, info in DTYPES.items()}
#: The real floating-point dtypes (not complex, not integer or bool).
FLOAT_DTYPES: frozenset[DType] = frozenset(name for name, info in DTYPES.items() if info.is_float)
#: ``torch.<dtype>`` names (``bfloat16``, ``half``...) → safetensors dtype names.
TORCH_DTYPES: Mapping[str, DType] = {alias: info.name for info in DTYPES.values() for alias in info.torch_names}
#: torch's typed storage classes (``FloatStorage``...) → safetensors dtype names.
STORAGE_DTYPES: Mapping[str, DType] = {info.torch_storage: info.name for info in DTYPES.values() if info.torch_storage}
#: torch dtypes a checkpoint may name that have no safetensors dtype: named in a refusal, never guessed.
TORCH_WITHOUT_SAFETENSORS_DTYPE = frozenset(
    {"complex128", "cdouble", "complex32", "chalf", "float4_e2m1fn_x2", "qint8", "quint8", "qint32"}
)


def from_torch_name(name: str) -> DType | None:
    """The safetensors dtype for a torch dtype name as configs write it (``bfloat16``, ``torch.float16``)."""
    return TORCH_DTYPES.get(name.removeprefix("torch."))
