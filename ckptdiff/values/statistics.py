"""The numbers --values reports for one tensor: per-chunk sums (the fused kernel's or numpy's) folded in float64."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..report import ValueNote

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
    def change(self) -> float:
        """Sort key for "largest change first": relative L2, then max |b−a|; unequal beats equal."""
        if self.equal:
            return -1.0
        for value in (self.rel_l2, self.max_abs):
            if value is not None:
                return value
        return math.inf

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
    """A chunk's sums: Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb² over ``count`` finite elements."""

    equal: bool
    count: int
    nonfinite: int
    sums: tuple[float, float, float, float, float, float]


ChunkResult = SameChunk | Sums


class Accumulator:
    """One tensor's running sums, folded from per-chunk results in chunk order (so in the same order, and
    to the same bits, however many threads computed the chunks): Python floats across chunks.

    A chunk comes from the fused kernel (:mod:`.fused`), from :func:`chunk_sums` (numpy, float32) or, when its
    bytes are the same on both sides, as a :class:`SameChunk` (no arithmetic). Such a chunk's Σa² is needed
    only when another chunk of the tensor differs; it is then summed afterwards (:meth:`add_square_sum`) from the
    chunks in ``unsquared``.
    """

    def __init__(self) -> None:
        self.equal = True
        self.nonzero = False  # an equal chunk taken as a SameChunk held a nonzero value
        self.max_abs = self.sum_abs = 0.0
        self.dot_ab = self.dot_aa = self.dot_bb = self.dot_dd = 0.0
        self.count = self.nonfinite = 0
        self.unsquared: list[tuple[int, int]] = []  # (start, count) of equal chunks not in the dot products

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
        self.dot_dd += dd
        self.sum_abs += abs_sum
        self.max_abs = max(self.max_abs, max_abs)
        self.dot_ab += ab
        self.dot_aa += aa
        self.dot_bb += bb

    def add_square_sum(self, square: float) -> None:
        """Σa² of an equal chunk taken as a SameChunk, once the tensor turned out to differ elsewhere."""
        self.dot_aa += square
        self.dot_bb += square
        self.dot_ab += square

    def stats(self, note: ValueNote | None = None) -> ValueStats:
        if self.nonfinite:
            note = msgspec.structs.replace(note or ValueNote(), nonfinite=self.nonfinite)
        if self.equal:
            cosine = 1.0 if self.dot_aa > 0 or self.nonzero else None
            return ValueStats(True, 0.0, 0.0, cosine, 0.0, note=note)
        norm_a, norm_b = math.sqrt(self.dot_aa), math.sqrt(self.dot_bb)
        cosine = self.dot_ab / (norm_a * norm_b) if norm_a > 0 and norm_b > 0 else None
        if cosine is not None:
            cosine = max(-1.0, min(1.0, cosine))
        rel_l2 = math.sqrt(self.dot_dd) / norm_a if norm_a > 0 else None
        mean_abs = self.sum_abs / self.count if self.count else None
        return ValueStats(False, self.max_abs, mean_abs, cosine, rel_l2, note=note)


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
