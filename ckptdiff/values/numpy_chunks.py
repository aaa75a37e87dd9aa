"""A chunk pair's sums in numpy: where the C kernel was not built, and the benchmarks' anchor.

Floats of 32 bits or fewer are widened to float32 (:func:`.dtypes.widen`) and summed by :func:`.statistics.chunk_sums`
(float64 where a value is not finite or a square overflows). F64, integers and BOOL are taken in float64, 64-bit
integers as hi + lo (:func:`exact_float64`) so that b − a is never 0 for different values, and values at float64's
extremes are scaled by a power of two first (:data:`HUGE`, :data:`SMALL`), as the C kernel does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .dtypes import ValueType, equal_chunk_facts, widen
from .statistics import ChunkResult, SameChunk, Sums, chunk_sums, float64_sums, square_sum

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: Beyond these magnitudes a float64 chunk is summed scaled (the C kernel's HUGE64 and SMALL64): a square of a
#: value over 2^480 summed over 2^40 elements could overflow, one under 2^-480 loses bits to underflow.
HUGE = 2.0**480
SMALL = 2.0**-480


class NumpyChunks:
    """One thread's numpy buffers; turns two chunks' bytes into a :class:`SameChunk` or :class:`Sums`."""

    def __init__(self) -> None:
        self.wide_a: np.ndarray | None = None  # float32 buffers the chunks are widened into
        self.wide_b: np.ndarray | None = None
        self.delta: np.ndarray | None = None  # b − a

    def compared(self, kind_a: ValueType, raw_a: bytearray, kind_b: ValueType, raw_b: bytearray) -> ChunkResult:
        """Two chunks' bytes: compared first, summed only when they differ or hold non-finite values."""
        import numpy as np

        count = len(raw_a) // kind_a.itemsize
        same = kind_a is kind_b and raw_a == raw_b  # bytearrays of one size: a memcmp
        if same:
            facts = equal_chunk_facts(kind_a, raw_a)
            if facts is not None and facts[0]:
                return SameChunk(count, facts[1])
        with np.errstate(all="ignore"):  # overflow and NaN are expected in data: handled below
            if kind_a.wide or kind_b.wide:
                return wide_sums(kind_a, raw_a, kind_b, raw_b, same)
            a, b = self._widen(kind_a, raw_a, "wide_a"), self._widen(kind_b, raw_b, "wide_b")
            if kind_a is not kind_b:
                same = bool(np.array_equal(a, b))
            if self.delta is None or self.delta.size < count:
                self.delta = np.empty(count, np.float32)
            sums = chunk_sums(a, b, same, self.delta)
            return sums if sums is not None else float64_sums(a, b, same)

    def square_sum(self, kind: ValueType, raw: bytearray) -> Sums:
        """Σa² of one chunk as both sides' sums (an equal chunk's, once its tensor differed elsewhere)."""
        import numpy as np

        count = len(raw) // kind.itemsize
        with np.errstate(all="ignore"):
            if kind.wide:
                return wide_sums(kind, raw, kind, raw, True)
            square = square_sum(self._widen(kind, raw, "wide_a"))
        return Sums(True, count, 0, (0.0, 0.0, 0.0, square, square, square))

    def _widen(self, kind: ValueType, raw: bytearray, buffer: str) -> np.ndarray:
        import numpy as np

        count = len(raw) // kind.itemsize
        out = getattr(self, buffer)
        if out is None or out.size < count:
            out = np.empty(count, np.float32)
            setattr(self, buffer, out)
        return widen(kind, raw, out)


def exact_float64(kind: ValueType, raw: bytearray) -> tuple[np.ndarray, np.ndarray | None]:
    """A chunk's values as float64 hi + lo: lo (None but for 64-bit integers) is the exact rest of a value hi
    rounded, so (b_hi − a_hi) + (b_lo − a_lo) is 0 only for equal values. BOOL: any nonzero byte is 1."""
    import numpy as np

    if kind.name == "BOOL":
        return (np.frombuffer(raw, np.uint8) != 0).astype(np.float64), None
    values = np.frombuffer(raw, kind.numpy)
    hi = values.astype(np.float64)
    if kind.name not in ("I64", "U64"):
        return hi, None
    # hi back as an integer of the same type (exact: hi is an integer), except where it rounded up to 2^63 (I64)
    # or 2^64 (U64), past the type: there the rest is value − 2^63 (the bits less the sign bit) or value − 2^64
    # (the bits read as signed).
    top = 2.0**63 if kind.name == "I64" else 2.0**64
    over = hi >= top
    back = np.where(over, 0, hi).astype(values.dtype)
    rest = (values.view(np.uint64) - back.view(np.uint64)).view(np.int64)
    if kind.name == "I64":
        rest = np.where(over, (values.view(np.uint64) - np.uint64(2**63)).view(np.int64), rest)
    return hi, rest.astype(np.float64)


def wide_sums(kind_a: ValueType, raw_a: bytearray, kind_b: ValueType, raw_b: bytearray, same: bool) -> Sums:
    """Two chunks in float64 (F64, integers, BOOL, or a pair with one of them), over the elements finite on both
    sides (the others counted), scaled by a power of two at float64's extremes."""
    import numpy as np

    a, a_lo = exact_float64(kind_a, raw_a)
    b, b_lo = exact_float64(kind_b, raw_b)
    finite = np.isfinite(a) & np.isfinite(b)
    kept = int(finite.sum())
    if kept < a.size:
        a, b = a[finite], b[finite]
        a_lo = a_lo[finite] if a_lo is not None else None
        b_lo = b_lo[finite] if b_lo is not None else None
    skipped = finite.size - kept
    if kept == 0:
        return Sums(same, 0, skipped, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    # b − a exactly (64-bit integers: hi and lo apart), but where it overflows: there halved, and the scale
    # makes up for it (as the C kernel's difference())
    delta = b - a
    if a_lo is not None or b_lo is not None:
        delta += (b_lo if b_lo is not None else 0.0) - (a_lo if a_lo is not None else 0.0)
    halved = bool(np.isinf(delta).any())
    if halved:
        delta = np.where(np.isinf(delta), b * 0.5 - a * 0.5, delta * 0.5)
    top_a, top_b, top_d = (float(np.abs(x).max()) for x in (a, b, delta))
    scales = (0, 0, 0)
    if halved or any(top > HUGE or 0 < top < SMALL for top in (top_a, top_b, top_d)):  # the C kernel's rule
        scales = (_exponent(top_d) + halved, _exponent(top_a), _exponent(top_b))
        delta = np.ldexp(delta, halved - scales[0])
        a, b = np.ldexp(a, -scales[1]), np.ldexp(b, -scales[2])
    aa = float(np.dot(a, a))
    if same:
        return Sums(True, kept, skipped, (0.0, 0.0, 0.0, aa, aa, aa), scales)
    bb = float(np.dot(b, b))
    dd = float(np.dot(delta, delta))
    ab = (aa + bb - dd) / 2 if scales == (0, 0, 0) and dd < (aa + bb) / 2 else float(np.dot(a, b))
    np.abs(delta, out=delta)
    largest = float(delta.max())
    if (kind_a is not kind_b or kind_a.name == "BOOL") and not skipped and largest == 0.0:  # the same numbers
        return Sums(True, kept, skipped, (0.0, 0.0, 0.0, aa, aa, aa), scales)
    return Sums(False, kept, skipped, (dd, float(delta.sum()), largest, ab, aa, bb), scales)


def _exponent(magnitude: float) -> int:
    return math.frexp(magnitude)[1] if magnitude > 0 else 0
