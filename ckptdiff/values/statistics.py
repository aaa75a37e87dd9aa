"""The numbers --values reports for one tensor: per-chunk sums (the fused kernel's or numpy's) folded in float64."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..report import ValueNote, value_change_order

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


@dataclass(frozen=True)
class ValueStats:
    """How B's values differ from A's for one tensor. ``method`` says how: bytes read, or sha256 of the file."""

    equal: bool
    max_abs: float | None
    mean_abs: float | None
    cosine: float | None  # None when a side is all zeros (undefined) or the file was not read
    rel_l2: float | None  # ‖b−a‖/‖a‖; None when a is all zeros and b is not
    method: Literal["read", "sha256"] = "read"
    note: ValueNote | None = None

    @property
    def change_order(self) -> tuple[int, float, float]:
        """Where this change ranks, largest first (:func:`ckptdiff.report.value_change_order`)."""
        return value_change_order(self.equal, self.rel_l2, self.max_abs)

    @property
    def measured(self) -> bool:
        """Whether the values were compared as numbers (else as bytes, or not at all: no max |Δ|)."""
        return self.max_abs is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "equal": self.equal,
            "max_abs": _finite(self.max_abs),
            "mean_abs": _finite(self.mean_abs),
            "cosine": _finite(self.cosine),
            "rel_l2": _finite(self.rel_l2),
            "method": self.method,
        }
        if self.note:
            out["note"] = msgspec.to_builtins(self.note)
        return out


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such values (from NaNs in a tensor) are reported as null."""
    return value if value is not None and math.isfinite(value) else None


IDENTICAL_BY_HASH = ValueStats(True, 0.0, 0.0, None, 0.0, method="sha256")


@dataclass(frozen=True)
class SameChunk:
    """A chunk with the same bytes on both sides, all finite: how many elements, and whether one is nonzero."""

    count: int
    nonzero: bool


@dataclass(frozen=True)
class Sums:
    """A chunk's sums: Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb² over ``count`` finite elements.

    ``scales`` (d, a, b), all 0 but at float64's extremes (squares that would overflow or underflow): the first
    three sums are of b − a times 2^-d, Σa² of a times 2^-a, Σb² of b times 2^-b, Σab of both so scaled."""

    equal: bool
    count: int
    nonfinite: int
    sums: tuple[float, float, float, float, float, float]
    scales: tuple[int, int, int] = (0, 0, 0)


def _scaled(value: float, exponent: int) -> float:
    """``value`` × 2^``exponent``; ±infinity where that is beyond float64."""
    try:
        return math.ldexp(value, exponent)
    except OverflowError:
        return math.copysign(math.inf, value)


ChunkResult = SameChunk | Sums


class Accumulator:
    """One tensor's running sums, folded from per-chunk results in chunk order (so in the same order, and
    to the same bits, however many threads computed the chunks): Python floats across chunks.

    A chunk comes from the C kernel (:mod:`.fused`) or numpy (:mod:`.numpy_chunks`) or, when its bytes are the
    same on both sides, as a :class:`SameChunk` (no arithmetic). Such a chunk's Σa² is needed only when another
    chunk of the tensor differs; it is then summed afterwards (:meth:`add_square_sum`) from the chunks in
    ``unsquared``. Each group of sums (those of b − a, Σa², Σb², Σab) is kept at one scale, a chunk's at another
    rescaled to the larger of the two (see :class:`Sums`).
    """

    def __init__(self) -> None:
        self.equal = True
        self.nonzero = False  # an equal chunk taken as a SameChunk held a nonzero value
        self.count = self.nonfinite = 0
        self.unsquared: list[tuple[int, int]] = []  # (start, count) of equal chunks not in the dot products
        # (Σ(b−a)², Σ|b−a|, max|b−a|) times 2^-scale_d; Σa², Σb², Σab likewise at their own scales
        self.dd: tuple[float, ...] = (0.0, 0.0, 0.0)
        self.scale_d = 0
        self.aa, self.scale_a = 0.0, 0
        self.bb, self.scale_b = 0.0, 0
        self.ab, self.scale_ab = 0.0, 0

    def fold(self, start: int, result: ChunkResult) -> None:
        if isinstance(result, SameChunk):
            self.count += result.count
            self.nonzero = self.nonzero or result.nonzero
            self.unsquared.append((start, result.count))
            return
        self.equal = self.equal and result.equal
        self.count += result.count
        self.nonfinite += result.nonfinite
        dd, abs_sum, max_abs, ab, aa, bb = result.sums
        scale_d, scale_a, scale_b = result.scales
        (self.dd, self.scale_d), (mine, theirs) = _common((self.dd, self.scale_d), ((dd, abs_sum, max_abs), scale_d))
        self.dd = (mine[0] + theirs[0], mine[1] + theirs[1], max(mine[2], theirs[2]))
        self._add_squares(aa, scale_a, bb, scale_b, ab)

    def add_square_sum(self, square: Sums) -> None:
        """Σa² of an equal chunk taken as a SameChunk (its :class:`Sums` as both sides), once the tensor turned
        out to differ elsewhere."""
        aa, scale = square.sums[4], square.scales[1]
        self._add_squares(aa, scale, aa, scale, aa)

    def _add_squares(self, aa: float, scale_a: int, bb: float, scale_b: int, ab: float) -> None:
        (_, self.scale_a), (mine, theirs) = _common(((self.aa,), self.scale_a), ((aa,), scale_a), squares=True)
        self.aa = mine[0] + theirs[0]
        (_, self.scale_b), (mine, theirs) = _common(((self.bb,), self.scale_b), ((bb,), scale_b), squares=True)
        self.bb = mine[0] + theirs[0]
        (_, self.scale_ab), (mine, theirs) = _common(((self.ab,), self.scale_ab), ((ab,), scale_a + scale_b))
        self.ab = mine[0] + theirs[0]

    def stats(self, note: ValueNote | None = None) -> ValueStats:
        if self.nonfinite:
            note = msgspec.structs.replace(note or ValueNote(), nonfinite=self.nonfinite)
        if self.equal:
            cosine = 1.0 if self.aa > 0 or self.nonzero else None
            return ValueStats(True, 0.0, 0.0, cosine, 0.0, note=note)
        dd, sum_abs, max_abs = self.dd
        norm_a, norm_b = math.sqrt(self.aa), math.sqrt(self.bb)
        cosine = None
        if norm_a > 0 and norm_b > 0:
            ratio = self.ab / (norm_a * norm_b)
            cosine = max(-1.0, min(1.0, _scaled(ratio, self.scale_ab - self.scale_a - self.scale_b)))
        rel_l2 = _scaled(math.sqrt(dd) / norm_a, self.scale_d - self.scale_a) if norm_a > 0 else None
        mean_abs = _scaled(sum_abs / self.count, self.scale_d) if self.count else None
        return ValueStats(False, _scaled(max_abs, self.scale_d), mean_abs, cosine, rel_l2, note=note)


def _common(
    held: tuple[tuple[float, ...], int], new: tuple[tuple[float, ...], int], squares: bool = False
) -> tuple[tuple[tuple[float, ...], int], tuple[tuple[float, ...], tuple[float, ...]]]:
    """Two groups of sums at their scales brought to a common one, the larger (the smaller's terms then lose only
    what is below float64's resolution of the larger); a group all 0 has no scale to keep. Returns (the held
    group rescaled, the common scale) and (held, new) at that scale. ``squares``: a single sum of squares (its
    value moves by twice the scale); else the group is (Σ(b−a)², Σ|b−a|, max|b−a|) or a single Σab."""
    (held_values, held_scale), (new_values, new_scale) = held, new
    if not any(new_values):
        return (held_values, held_scale), (held_values, tuple(0.0 for _ in new_values))
    if not any(held_values) or new_scale > held_scale:
        common = new_scale
    else:
        common = held_scale
    moved_held = _shifted(held_values, held_scale - common, squares)
    return (moved_held, common), (moved_held, _shifted(new_values, new_scale - common, squares))


def _shifted(values: tuple[float, ...], shift: int, squares: bool) -> tuple[float, ...]:
    """Sums of values taken times 2^``shift``: (Σ(b−a)², Σ|b−a|, max|b−a|), a single Σx² (``squares``) or Σab."""
    if shift == 0:
        return values
    if len(values) == 3:  # Σ(b−a)², Σ|b−a|, max|b−a|
        return (math.ldexp(values[0], 2 * shift), math.ldexp(values[1], shift), math.ldexp(values[2], shift))
    return (math.ldexp(values[0], 2 * shift if squares else shift),)


def square_sum(a: np.ndarray) -> float:
    """Σa² of a float32 chunk holding only finite values, in float64 where float32 overflows."""
    import numpy as np

    with np.errstate(over="ignore"):
        square = float(np.dot(a, a))
    if not math.isfinite(square):
        wide = a.astype(np.float64)
        square = float(np.dot(wide, wide))
    return square


def chunk_sums(a: np.ndarray, b: np.ndarray, same: bool, scratch: np.ndarray) -> Sums | None:
    """The sums of two float32 chunks, or None if one is not finite (then see :func:`float64_sums`).

    b − a goes into ``scratch`` (at least a chunk long), so nothing is allocated and a and b stay as they are.
    Σab is taken from ‖b−a‖² = ‖a‖² + ‖b‖² − 2ab where the chunks are close (cosine above ~0.5): for a fine-tuned
    tensor that came within 1e-9 of a float64 computation where the direct float32 Σab was 2e-5 off. For
    unrelated values the direct dot product is the accurate one (~1e-7).
    """
    import numpy as np

    if same:  # b is a: one dot product gives every sum
        square = float(np.dot(a, a))
        sums = (0.0, 0.0, 0.0, square, square, square)
    else:
        aa, bb = float(np.dot(a, a)), float(np.dot(b, b))
        delta = np.subtract(b, a, out=scratch[: a.size])
        dd = float(np.dot(delta, delta))
        ab = (aa + bb - dd) / 2 if dd < (aa + bb) / 2 else float(np.dot(a, b))
        np.abs(delta, out=delta)
        abs_sum = float(np.dot(delta, _ones(delta.size)))  # BLAS: ~2x faster than numpy's pairwise sum here
        sums = (dd, abs_sum, float(delta.max()), ab, aa, bb)
    if not all(math.isfinite(value) for value in sums):
        return None
    return Sums(same, a.size, 0, sums)


_ONES: np.ndarray | None = None


def _ones(count: int) -> np.ndarray:
    import numpy as np

    global _ONES
    if _ONES is None or _ONES.size < count:
        _ONES = np.ones(count, np.float32)
    return _ONES[:count]


def float64_sums(a: np.ndarray, b: np.ndarray, same: bool) -> Sums:
    """A chunk with NaN or infinity in the data, or a square overflowing float32: summed in float64 over the
    elements finite on both sides; the others are counted."""
    import numpy as np

    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite].astype(np.float64), b[finite].astype(np.float64)
    kept = a.size
    if kept == 0:
        sums: tuple[float, ...] = (0.0,) * 6
    elif same:
        square = float(np.dot(a, a))
        sums = (0.0, 0.0, 0.0, square, square, square)
    else:
        delta = b - a
        dd, ab, aa, bb = (float(np.dot(x, y)) for x, y in ((delta, delta), (a, b), (a, a), (b, b)))
        np.abs(delta, out=delta)
        sums = (dd, float(delta.sum()), float(delta.max()), ab, aa, bb)
    return Sums(same, kept, finite.size - kept, sums)  # type: ignore[arg-type]
