"""How each safetensors dtype's stored bytes become float32 (numpy), and what equal bytes alone tell."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from ..dtypes import DTYPE_BITS

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: How a chunk becomes float32: used as it is, bits shifted into the top half, a table lookup, or numpy's cast.
Widening = Literal["view", "shift", "table", "cast"]


@dataclass(frozen=True)
class ValueType:
    """A dtype --values can widen to float32.

    ``stored`` is the numpy type of one element (ml_dtypes names the bfloat16 and fp8 ones). For sign-magnitude
    floats, ``magnitude_mask`` keeps every bit but the sign and a magnitude at or above ``finite_below`` is an
    infinity or a NaN: so the largest masked element of a chunk tells whether all are finite and one is nonzero,
    without widening. Integers: the mask is every bit and ``finite_below`` None. None mask: no such rule.
    """

    name: str
    stored: str
    widening: Widening
    magnitude_mask: int | None
    finite_below: int | None = None
    itemsize: int = field(init=False)
    #: How the C kernel decodes it (``_fused.c``'s codes), and in which precision it sums.
    code: int = field(init=False)
    wide: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "itemsize", DTYPE_BITS[self.name] // 8)
        object.__setattr__(self, "code", _KERNEL_CODES[self.name])
        object.__setattr__(self, "wide", self.name == "F64" or self.widening == "cast")

    @property
    def table(self) -> np.ndarray:
        """The float32 value of every bit pattern (1- and 2-byte floats but bf16), else a placeholder."""
        if self.widening == "table":
            return _table(self.stored)
        import numpy as np

        return np.zeros(1, np.float32)

    @property
    def numpy(self) -> np.dtype[Any]:
        return _numpy_dtype(self.stored)

    @property
    def bits(self) -> np.dtype[Any]:
        """The unsigned integer type of the same size: the stored bits as a number."""
        import numpy as np

        return np.dtype(f"<u{self.itemsize}")


# How the C kernel (_fused.c's enum) decodes each dtype.
_KERNEL_CODES = {
    "F32": 0,
    "BF16": 1,
    "F16": 2,
    **dict.fromkeys(("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0"), 3),
    "F64": 4,
    **{"I8": 5, "U8": 6, "I16": 7, "U16": 8, "I32": 9, "U32": 10, "I64": 11, "U64": 12, "BOOL": 13},
}


def _integer(name: str, stored: str) -> ValueType:
    return ValueType(name, stored, "cast", 2 ** DTYPE_BITS[name] - 1)


VALUE_TYPES: dict[str, ValueType] = {
    kind.name: kind
    for kind in (
        ValueType("F64", "<f8", "cast", 0x7FFF_FFFF_FFFF_FFFF, 0x7FF0_0000_0000_0000),
        ValueType("F32", "<f4", "view", 0x7FFF_FFFF, 0x7F80_0000),
        ValueType("BF16", "bfloat16", "shift", 0x7FFF, 0x7F80),
        ValueType("F16", "<f2", "table", 0x7FFF, 0x7C00),  # numpy's own float16 cast is ~2x slower here
        ValueType("F8_E4M3", "float8_e4m3fn", "table", 0x7F, 0x7F),  # no infinities; 0x7F is NaN
        ValueType("F8_E5M2", "float8_e5m2", "table", 0x7F, 0x7C),
        ValueType("F8_E4M3FNUZ", "float8_e4m3fnuz", "table", None),  # NaN is 0x80, the bits of -0
        ValueType("F8_E5M2FNUZ", "float8_e5m2fnuz", "table", None),
        ValueType("F8_E8M0", "float8_e8m0fnu", "table", None),  # exponents only: no sign, no zero
        _integer("I64", "<i8"),
        _integer("U64", "<u8"),
        _integer("I32", "<i4"),
        _integer("U32", "<u4"),
        _integer("I16", "<i2"),
        _integer("U16", "<u2"),
        _integer("I8", "i1"),
        _integer("U8", "u1"),
        _integer("BOOL", "?"),
    )
}


@cache
def _numpy_dtype(stored: str) -> np.dtype[Any]:
    import numpy as np

    if stored.startswith(("bfloat", "float")):
        import ml_dtypes  # ~0.5 s to import: only for the fp8 tables

        scalar_type: type[np.generic] = getattr(ml_dtypes, stored)
        return np.dtype(scalar_type)
    return np.dtype(stored)


@cache
def _table(stored: str) -> np.ndarray:
    """Every value of a 1- or 2-byte float type as float32, indexed by its bits: widening is one gather."""
    import numpy as np

    dtype = _numpy_dtype(stored)
    return np.arange(2 ** (8 * dtype.itemsize), dtype=f"<u{dtype.itemsize}").view(dtype).astype(np.float32)


def widen(kind: ValueType, raw: bytearray, out: np.ndarray) -> np.ndarray:
    """The chunk ``raw`` as float32: a view of ``raw`` itself for F32, else written into ``out``."""
    import numpy as np

    if kind.widening == "view":
        return np.frombuffer(raw, kind.numpy)
    out = out[: len(raw) // kind.itemsize]
    if kind.widening == "shift":
        np.left_shift(np.frombuffer(raw, kind.bits), 16, out=out.view(np.uint32), dtype=np.uint32)
    elif kind.widening == "table":
        np.take(_table(kind.stored), np.frombuffer(raw, kind.bits), out=out)
    else:
        np.copyto(out, np.frombuffer(raw, kind.numpy), casting="unsafe")
    return out


def equal_chunk_facts(kind: ValueType, raw: bytearray) -> tuple[bool, bool] | None:
    """(every element finite, one is nonzero) from the bits of a chunk both sides hold byte for byte; None when
    the dtype has no rule for it.

    Floats take two read-only maxima instead of masking a copy (the mask and its max cost twice as much): read
    as signed integers, the largest is the largest magnitude among elements whose sign bit is clear (the others
    are negative); read as unsigned, the largest less the sign bit is the largest among those whose sign is set.
    """
    if kind.magnitude_mask is None:
        return None
    import numpy as np

    bits = np.frombuffer(raw, kind.bits)
    if bits.size == 0:
        return True, False
    if kind.finite_below is None:  # integers: every bit is magnitude
        return True, int(bits.max()) != 0
    sign = kind.magnitude_mask + 1
    largest_clear = int(bits.view(f"<i{kind.itemsize}").max())  # < 0: no element has its sign bit clear
    largest_set = int(bits.max()) - sign  # < 0: no element has its sign bit set
    largest = max(largest_clear, largest_set)
    return largest < kind.finite_below, largest > 0
