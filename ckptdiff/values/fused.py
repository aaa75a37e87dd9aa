"""A chunk pair's sums through the fused numba kernels (:mod:`.kernels`)."""

from __future__ import annotations

import numpy as np

from . import kernels
from .dtypes import ValueType
from .statistics import Sums


class FusedChunks:
    """One thread's kernel buffers; turns two chunks' bytes into :class:`Sums` (float64 totals folded in order)."""

    def __init__(self) -> None:
        self.totals = np.zeros((kernels.ROWS, kernels.LANES), np.float64)

    def sums(self, kind_a: ValueType, raw_a: bytearray, kind_b: ValueType, raw_b: bytearray, same: bool) -> Sums:
        count = len(raw_a) // kind_a.itemsize
        totals = self.totals
        skipped = kernels.chunk_totals(
            np.frombuffer(raw_a, np.uint8),
            kind_a.code,
            kind_a.table,
            np.frombuffer(raw_b, np.uint8),
            kind_b.code,
            kind_b.table,
            count,
            kind_a.wide or kind_b.wide,
            totals,
        )
        dd, ab, aa, bb, abs_sum = (float(totals[row].sum()) for row in range(kernels.MAX))
        largest = float(totals[kernels.MAX].max())
        same = same or (kind_a is not kind_b and not skipped and largest == 0.0)  # a dtype change, same numbers
        if same:
            dd = abs_sum = largest = 0.0
            ab = bb = aa
        elif dd < (aa + bb) / 2:  # close chunks: Σab from ‖b−a‖², as the numpy path does (see chunk_sums)
            ab = (aa + bb - dd) / 2
        return Sums(same, count - skipped, skipped, (dd, abs_sum, largest, ab, aa, bb))

    def square_sum(self, kind: ValueType, raw: bytearray) -> float:
        """Σa² of one chunk (an equal chunk's, once its tensor turned out to differ elsewhere)."""
        return self.sums(kind, raw, kind, raw, True).sums[4]
