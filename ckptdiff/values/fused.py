"""A chunk pair's sums through the fused one-pass C kernel (``_fused.c``), built at install where a compiler is."""

from __future__ import annotations

import importlib
from typing import Any

from .dtypes import ValueType
from .statistics import SameChunk, Sums

#: (elements left out as not finite, (Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb²), the scales (Sums.scales))
Totals = tuple[int, tuple[float, float, float, float, float, float], tuple[int, int, int]]


def c_kernel() -> Any | None:
    """The compiled kernel module, or None where the extension was not built (no C compiler at install)."""
    try:
        return importlib.import_module("ckptdiff.values._fused")
    except ImportError:
        return None


def finish(kind_a: ValueType, kind_b: ValueType, count: int, totals: Totals, same: bool) -> Sums:
    """A chunk's :class:`Sums` from a kernel's totals; ``same``: its bytes are equal on both sides."""
    skipped, (dd, abs_sum, largest, ab, aa, bb), scales = totals
    same = same or (kind_a is not kind_b and not skipped and largest == 0.0)  # a dtype change, same numbers
    same = same or (kind_a.name == "BOOL" and not skipped and largest == 0.0)  # other bytes, the same truths
    if same:
        dd = abs_sum = largest = 0.0
        ab = bb = aa
    elif scales == (0, 0, 0) and dd < (aa + bb) / 2:  # close chunks: Σab from ‖b−a‖², as numpy does (chunk_sums)
        ab = (aa + bb - dd) / 2
    return Sums(same, count - skipped, skipped, (dd, abs_sum, largest, ab, aa, bb), scales)


def _table(kind: ValueType) -> Any:
    """The decoding table the C kernel needs (f16 and fp8), else None: bf16, f32 and integers need no numpy."""
    return kind.table if kind.widening == "table" else None


def _rules(kind_a: ValueType, kind_b: ValueType) -> tuple[bool, bool, int, int]:
    """The C kernel's (wide, compare, mask, limit): float64 blocks?, compare the bytes first (one dtype)?, and the
    rule saying from the bits whether every element is finite (mask 0: no rule; limit 0: integers, always)."""
    compare = kind_a is kind_b
    mask = (kind_a.magnitude_mask or 0) if compare else 0
    return kind_a.wide or kind_b.wide, compare, mask, kind_a.finite_below or 0


def _compared(kind_a: ValueType, kind_b: ValueType, count: int, result: tuple[Any, ...]) -> SameChunk | Sums:
    state, nonzero, skipped, dd, abs_sum, largest, ab, aa, bb, *scales = result
    if state == 0:  # equal bytes, every element finite: no sums
        return SameChunk(count, bool(nonzero))
    return finish(kind_a, kind_b, count, (skipped, (dd, abs_sum, largest, ab, aa, bb), _three(scales)), state == 1)


def _three(scales: list[int]) -> tuple[int, int, int]:
    scale_d, scale_a, scale_b = scales
    return scale_d, scale_a, scale_b


class FileEnded(Exception):
    """:meth:`FusedChunks.read` met the end of side ``side``'s file (0: a, 1: b) at byte ``reached``."""

    def __init__(self, side: int, reached: int) -> None:
        super().__init__(side, reached)
        self.side, self.reached = side, reached


class FusedChunks:
    """The C kernel: turns two chunks' bytes into :class:`Sums`, or reads them itself (:meth:`read`)."""

    def __init__(self) -> None:
        module = c_kernel()
        if module is None:
            raise ImportError("the C kernel (ckptdiff.values._fused) was not built")
        self.module = module
        #: POSIX: the kernel reads the files itself (pread); elsewhere the caller reads.
        self.reads = hasattr(module, "read_chunk")

    def chunk_totals(self, kind_a: ValueType, raw_a: bytearray, kind_b: ValueType, raw_b: bytearray) -> Totals:
        count = len(raw_a) // kind_a.itemsize
        wide = kind_a.wide or kind_b.wide
        skipped, dd, abs_sum, largest, ab, aa, bb, *scales = self.module.chunk_totals(
            raw_a, kind_a.code, _table(kind_a), raw_b, kind_b.code, _table(kind_b), count, wide
        )
        return skipped, (dd, abs_sum, largest, ab, aa, bb), _three(scales)

    def sums(self, kind_a: ValueType, raw_a: bytearray, kind_b: ValueType, raw_b: bytearray, same: bool) -> Sums:
        count = len(raw_a) // kind_a.itemsize
        return finish(kind_a, kind_b, count, self.chunk_totals(kind_a, raw_a, kind_b, raw_b), same)

    def compared(self, kind_a: ValueType, raw_a: bytearray, kind_b: ValueType, raw_b: bytearray) -> SameChunk | Sums:
        """Two chunks' bytes: compared first, summed only when they differ or hold non-finite values."""
        count = len(raw_a) // kind_a.itemsize
        result = self.module.compared_chunk(
            raw_a, kind_a.code, _table(kind_a), raw_b, kind_b.code, _table(kind_b), count, *_rules(kind_a, kind_b)
        )
        return _compared(kind_a, kind_b, count, result)

    def read(
        self,
        kind_a: ValueType,
        place_a: tuple[int, int, bytearray],
        kind_b: ValueType,
        place_b: tuple[int, int, bytearray],
        count: int,
    ) -> SameChunk | Sums:
        """:meth:`compared` on two chunks the kernel reads from their files, each given as (file descriptor,
        offset, reused buffer of at least the chunk's bytes): positioned reads, compared piece by piece as they
        arrive. Raises :class:`FileEnded` where a file ends before its chunk, OSError (filename "a" or "b") where
        a read fails."""
        fd_a, offset_a, buffer_a = place_a
        fd_b, offset_b, buffer_b = place_b
        try:
            result = self.module.read_chunk(
                fd_a,
                offset_a,
                buffer_a,
                kind_a.code,
                _table(kind_a),
                fd_b,
                offset_b,
                buffer_b,
                kind_b.code,
                _table(kind_b),
                count,
                *_rules(kind_a, kind_b),
            )
        except EOFError as ended:
            side, reached = (int(part) for part in str(ended).split())
            raise FileEnded(side, reached) from None
        return _compared(kind_a, kind_b, count, result)

    def square_sum(self, kind: ValueType, raw: bytearray) -> Sums:
        """Σa² of one chunk as both sides' sums (an equal chunk's, once its tensor turned out to differ elsewhere)."""
        return self.sums(kind, raw, kind, raw, True)
