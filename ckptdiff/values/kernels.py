"""The fused --values kernel (numba): one pass over two chunks' raw bits gives every sum, with no widened copy.

Each chunk is taken in blocks of :data:`BLOCK` elements. A block of each side is decoded from its stored bits
into a small buffer that stays in the CPU's L1 cache (bf16 by a shift, f16 and fp8 by a table, integers by a
cast), the six per-element terms are written side by side, and each is summed by pairwise halving down to
:data:`LANES` lanes; the lanes are then added into float64 totals. Every loop is element-wise, so LLVM
vectorises it with ``fastmath`` off, and the order of every addition is fixed: the same bits on any number of
threads. A block whose sums are not all finite (NaN or infinity in the data, or a square overflowing float32)
is summed again element by element in float64 over the elements finite on both sides, the others counted;
so is a block of subnormal values, whose squares float32 would round to zero.

Compiled on first use and cached on disk (numba's cache, next to this file or in ``NUMBA_CACHE_DIR``); where no
cache folder is writable the kernels compile in every process instead.
"""

from __future__ import annotations

import warnings

import numpy as np
from numba import njit

#: Elements per block: two decoded blocks and the six term rows fit in L1 (512 × 4 B × 8 rows = 16 KiB).
BLOCK = 512
#: The pairwise halving stops at this many lanes, which are then added into float64.
LANES = 16
#: A block whose Σa², Σb² or Σ(b−a)² is below this is summed again in float64: a product under the type's
#: smallest normal number (2^-126 in float32) loses bits, and BLOCK of them lose at most BLOCK × 2^-149.
TINY32 = 2.0**-100
TINY64 = 2.0**-960

# How a side's stored bits become a number (ckptdiff.values.dtypes.ValueType.code).
F32, BF16, TABLE16, TABLE8, F64 = 0, 1, 2, 3, 4
I8, U8, I16, U16, I32, U32, I64, U64 = 5, 6, 7, 8, 9, 10, 11, 12

# The rows of a chunk's totals: Σ(b−a)², Σab, Σa², Σb², Σ|b−a| (summed) and max |b−a|.
DD, AB, AA, BB, ABS, MAX = 0, 1, 2, 3, 4, 5
ROWS = 6


def _jit(function):  # type: ignore[no-untyped-def]
    """``njit(nogil=True, cache=True)``, or without the cache when numba finds no folder it can write to."""
    try:
        return njit(nogil=True, cache=True, fastmath=False)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(nogil=True, cache=True, fastmath=False)(function)


@njit(nogil=True, inline="always")
def _decode32(raw, code, table, start, count, out):  # type: ignore[no-untyped-def]
    """Elements ``start`` to ``start + count`` of ``raw`` (a chunk's bytes) as float32, into ``out``."""
    if code == BF16:
        bits = raw.view(np.uint16)[start : start + count]
        wide = out.view(np.uint32)
        for i in range(count):
            wide[i] = np.uint32(bits[i]) << np.uint32(16)
    elif code == F32:
        values = raw.view(np.float32)[start : start + count]
        for i in range(count):
            out[i] = values[i]
    elif code == TABLE16:
        bits16 = raw.view(np.uint16)[start : start + count]
        for i in range(count):
            out[i] = table[bits16[i]]
    else:  # TABLE8
        bits8 = raw[start : start + count]
        for i in range(count):
            out[i] = table[bits8[i]]


@_jit
def _decode64(raw, code, table, start, count, out):  # type: ignore[no-untyped-def]
    """Elements ``start`` to ``start + count`` of ``raw`` as float64 (a side stores F64 or integers)."""
    if code == F64:
        f64 = raw.view(np.float64)[start : start + count]
        for i in range(count):
            out[i] = f64[i]
    elif code == F32:
        f32 = raw.view(np.float32)[start : start + count]
        for i in range(count):
            out[i] = f32[i]
    elif code == BF16:
        bits = raw.view(np.uint16)[start : start + count]
        wide = np.empty(count, np.uint32)
        for i in range(count):
            wide[i] = np.uint32(bits[i]) << np.uint32(16)
        as_float = wide.view(np.float32)
        for i in range(count):
            out[i] = as_float[i]
    elif code == TABLE16:
        bits16 = raw.view(np.uint16)[start : start + count]
        for i in range(count):
            out[i] = table[bits16[i]]
    elif code == TABLE8:
        bits8 = raw[start : start + count]
        for i in range(count):
            out[i] = table[bits8[i]]
    elif code == I8:
        i8 = raw.view(np.int8)[start : start + count]
        for i in range(count):
            out[i] = i8[i]
    elif code == U8:
        u8 = raw[start : start + count]
        for i in range(count):
            out[i] = u8[i]
    elif code == I16:
        i16 = raw.view(np.int16)[start : start + count]
        for i in range(count):
            out[i] = i16[i]
    elif code == U16:
        u16 = raw.view(np.uint16)[start : start + count]
        for i in range(count):
            out[i] = u16[i]
    elif code == I32:
        i32 = raw.view(np.int32)[start : start + count]
        for i in range(count):
            out[i] = i32[i]
    elif code == U32:
        u32 = raw.view(np.uint32)[start : start + count]
        for i in range(count):
            out[i] = u32[i]
    elif code == I64:
        i64 = raw.view(np.int64)[start : start + count]
        for i in range(count):
            out[i] = i64[i]
    else:  # U64
        u64 = raw.view(np.uint64)[start : start + count]
        for i in range(count):
            out[i] = u64[i]


@njit(nogil=True, inline="always")  # inlined into each kernel: its loops see the buffers allocated there
def _block(a, b, terms, totals, tiny):  # type: ignore[no-untyped-def]
    """Add one decoded block (zero-padded to BLOCK) into ``totals``; False, adding nothing, when its sums are not
    all finite or are so small (below ``tiny``) that squares of subnormal values may have been rounded to 0."""
    dd = terms[DD]
    ab = terms[AB]
    aa = terms[AA]
    bb = terms[BB]
    ad = terms[ABS]
    mx = terms[MAX]
    for i in range(BLOCK):
        x = a[i]
        y = b[i]
        d = y - x
        e = abs(d)
        dd[i] = d * d
        ab[i] = x * y
        aa[i] = x * x
        bb[i] = y * y
        ad[i] = e
        mx[i] = e
    half = BLOCK // 2
    while half >= LANES:
        for i in range(half):
            dd[i] += dd[i + half]
            ab[i] += ab[i + half]
            aa[i] += aa[i + half]
            bb[i] += bb[i + half]
            ad[i] += ad[i + half]
            mx[i] = mx[i + half] if mx[i + half] > mx[i] else mx[i]
        half //= 2
    check = tiny * 0
    sum_dd = sum_aa = sum_bb = sum_ad = tiny * 0
    for j in range(LANES):
        sum_dd += dd[j]
        sum_aa += aa[j]
        sum_bb += bb[j]
        sum_ad += ad[j]
        check += ab[j] + mx[j]
    check += sum_dd + sum_aa + sum_bb + sum_ad
    if not (check - check == 0):  # NaN or ±inf in a sum
        return False
    if sum_dd < tiny and sum_ad > 0:  # values differ, and Σ(b−a)² is tiny: squares may have been lost
        return False
    if sum_aa < tiny or sum_bb < tiny:  # Σa² or Σb² tiny: fine only if the block is all zeros
        for i in range(BLOCK):
            if a[i] != 0 or b[i] != 0:
                return False
    for row in range(MAX):
        lanes = terms[row]
        total = totals[row]
        for j in range(LANES):
            total[j] += lanes[j]
    top = totals[MAX]
    for j in range(LANES):
        top[j] = mx[j] if mx[j] > top[j] else top[j]
    return True


@_jit
def _block_in_float64(a, b, count, totals):  # type: ignore[no-untyped-def]
    """A block with NaN, infinity or an overflowing square: float64, element by element, over the elements finite
    on both sides (into lane 0); returns how many were left out."""
    skipped = 0
    for i in range(count):
        x = np.float64(a[i])
        y = np.float64(b[i])
        if not (x - x == 0 and y - y == 0):
            skipped += 1
            continue
        d = y - x
        e = abs(d)
        totals[DD, 0] += d * d
        totals[AB, 0] += x * y
        totals[AA, 0] += x * x
        totals[BB, 0] += y * y
        totals[ABS, 0] += e
        if e > totals[MAX, 0]:
            totals[MAX, 0] = e
    return skipped


@_jit
def chunk_totals32(raw_a, code_a, table_a, raw_b, code_b, table_b, count, totals):  # type: ignore[no-untyped-def]
    """Every sum of two chunks of ``count`` elements, computed in float32 blocks, into ``totals`` (ROWS × LANES
    float64, zeroed by the caller); returns how many elements were left out as not finite."""
    # Allocated here, not passed in: LLVM vectorises the block loops over arrays it saw allocated (measured ~1.7×).
    a = np.zeros(BLOCK, np.float32)
    b = np.zeros(BLOCK, np.float32)
    terms = np.zeros((ROWS, BLOCK), np.float32)
    tiny = np.float32(TINY32)
    skipped = 0
    for start in range(0, count, BLOCK):
        size = min(BLOCK, count - start)
        _decode32(raw_a, code_a, table_a, start, size, a)
        _decode32(raw_b, code_b, table_b, start, size, b)
        for i in range(size, BLOCK):
            a[i] = 0
            b[i] = 0
        if not _block(a, b, terms, totals, tiny):
            skipped += _block_in_float64(a, b, size, totals)
    return skipped


@_jit
def chunk_totals64(raw_a, code_a, table_a, raw_b, code_b, table_b, count, totals):  # type: ignore[no-untyped-def]
    """:func:`chunk_totals32` in float64 blocks: for F64 and integer tensors, which float32 would round."""
    a = np.zeros(BLOCK, np.float64)
    b = np.zeros(BLOCK, np.float64)
    terms = np.zeros((ROWS, BLOCK), np.float64)
    tiny = TINY64
    skipped = 0
    for start in range(0, count, BLOCK):
        size = min(BLOCK, count - start)
        _decode64(raw_a, code_a, table_a, start, size, a)
        _decode64(raw_b, code_b, table_b, start, size, b)
        for i in range(size, BLOCK):
            a[i] = 0
            b[i] = 0
        if not _block(a, b, terms, totals, tiny):
            skipped += _block_in_float64(a, b, size, totals)
    return skipped


def chunk_totals(
    raw_a: np.ndarray,
    code_a: int,
    table_a: np.ndarray,
    raw_b: np.ndarray,
    code_b: int,
    table_b: np.ndarray,
    count: int,
    wide: bool,
    totals: np.ndarray,
) -> int:
    """Into ``totals`` (ROWS × LANES float64, zeroed here): every sum of two chunks' bytes (uint8 arrays);
    returns how many elements were left out as not finite."""
    totals.fill(0.0)
    kernel = chunk_totals64 if wide else chunk_totals32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's notes about its cache are not the user's business
        skipped = kernel(raw_a, code_a, table_a, raw_b, code_b, table_b, count, totals)
    return int(skipped)
