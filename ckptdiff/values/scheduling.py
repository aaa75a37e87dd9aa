"""The --values pass: every tensor pair cut into chunks, computed on a few threads, folded back in chunk order."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ..checkpoint import TensorInfo
from .dtypes import VALUE_TYPES, equal_chunk_facts
from .readers import Side
from .statistics import Accumulator, ChunkResult, SameChunk, ValueStats, chunk_sums, float64_sums

#: Elements per chunk: 256 Ki (1 MiB per side in float32), so a thread's working set stays in the CPU's cache;
#: 128–512 Ki measured the same, smaller ones pay numpy's per-call overhead, larger ones spill the cache.
CHUNK_ELEMENTS = 256 * 1024
#: At most this many threads compute a pass (each with its own file handles and buffers).
MAX_THREADS = 4
#: A pass reading less than this runs in the calling thread.
THREADS_MIN_BYTES = 32 * 2**20

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class Pair:
    """Two equally shaped tensors to compare; their sides by index in the pass's list of sides."""

    side_a: int
    a: TensorInfo
    side_b: int
    b: TensorInfo


class Worker:
    """What one thread computes chunks with: the sides (its own copies when threads share the pass) and a buffer."""

    def __init__(self, sides: list[Side]) -> None:
        self.sides = sides
        self.delta = np.empty(0, np.float32)  # b − a of a chunk

    def chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        with np.errstate(all="ignore"):  # overflow and NaN are expected in data: float64_sums handles them
            return self._chunk(pair, start, count)

    def _chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        raw_a = side_a.read(pair.a, kind_a, start, count)
        raw_b = side_b.read(pair.b, kind_b, start, count)
        same = kind_a is kind_b and raw_a == raw_b  # bytearrays of one size: a memcmp
        if same:
            facts = equal_chunk_facts(kind_a, raw_a, side_a.scratch_for(len(raw_a)))
            if facts is not None and facts[0]:
                return SameChunk(count, facts[1])
        a, b = side_a.widen(kind_a, raw_a), side_b.widen(kind_b, raw_b)
        if kind_a is not kind_b:
            same = bool(np.array_equal(a, b))
        if self.delta.size < count:
            self.delta = np.empty(count, np.float32)
        sums = chunk_sums(a, b, same, self.delta)
        return sums if sums is not None else float64_sums(a, b, same)


def pair_stats(sides: list[Side], pairs: list[Pair]) -> list[ValueStats]:
    """Statistics for every pair, streamed chunk by chunk (large passes on several threads).

    numpy releases the GIL inside every large operation and the reads, so threads working on different chunks
    overlap; each thread has its own sides (file handles and buffers).
    """
    results: dict[int, ValueStats] = {}
    comparable = []
    for index, pair in enumerate(pairs):
        unknown = [info.dtype for info in (pair.a, pair.b) if info.dtype not in VALUE_TYPES]
        if unknown:
            reason = f"dtype {unknown[0]} is not widened to float32"
            results[index] = _bytes_only(sides[pair.side_a], pair.a, sides[pair.side_b], pair.b, reason)
        else:
            comparable.append(index)

    chunk_elements = CHUNK_ELEMENTS
    chunks = (
        (index, start, min(chunk_elements, pairs[index].a.numel - start))
        for index in comparable
        for start in range(0, pairs[index].a.numel, chunk_elements)
    )
    nbytes = sum(pairs[index].a.nbytes + pairs[index].b.nbytes for index in comparable)
    threads = min(MAX_THREADS, _cores()) if nbytes >= THREADS_MIN_BYTES else 1
    own = threading.local()
    workers: list[Worker] = []

    def compute(chunk: tuple[int, int, int]) -> tuple[int, int, ChunkResult]:
        worker = getattr(own, "worker", None)
        if worker is None:
            worker = own.worker = Worker([side.copy() for side in sides])
            workers.append(worker)
        index, start, count = chunk
        return index, start, worker.chunk(pairs[index], start, count)

    def finish(index: int, total: Accumulator) -> None:
        pair = pairs[index]
        if not total.equal:
            side, kind = sides[pair.side_a], VALUE_TYPES[pair.a.dtype]
            for start, count in total.unsquared:
                total.add_squares(side.widen(kind, side.read(pair.a, kind, start, count)))
        note = None if pair.a.dtype == pair.b.dtype else f"{pair.a.dtype} vs {pair.b.dtype}, compared as float32"
        results[index] = total.stats(note)

    in_order = ordered_map(compute, chunks, threads)
    try:
        current, total = -1, Accumulator()
        for index, start, result in in_order:
            if index != current:  # one tensor's chunks come one after another
                if current >= 0:
                    finish(current, total)
                current, total = index, Accumulator()
            total.fold(start, result)
        if current >= 0:
            finish(current, total)
        for index in comparable:  # tensors without elements
            if index not in results:
                finish(index, Accumulator())
    finally:
        in_order.close()  # on an error here, the threads stop now (before their files are closed)
        for worker in workers:
            for side in worker.sides:
                side.close()
    return [results[index] for index in range(len(pairs))]


def ordered_map(function: Callable[[Item], Result], items: Iterable[Item], threads: int) -> Iterator[Result]:
    """``map(function, items)`` on ``threads`` threads, in order, with at most a few results per thread waiting.

    Leaving early (an error, Ctrl-C) cancels what has not started and waits for what has.
    """
    if threads <= 1:
        yield from map(function, items)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="ckptdiff-values") as pool:
        pending: deque[Future[Result]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(function, item))
                if len(pending) > 4 * threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _bytes_only(side_a: Side, a: TensorInfo, side_b: Side, b: TensorInfo, reason: str) -> ValueStats:
    """Dtypes not widened to float32 (F4, F6, complex): exact equality of the bytes, nothing else."""
    if a.dtype != b.dtype or a.nbytes != b.nbytes:
        return ValueStats(False, None, None, None, None, note=reason)
    step = CHUNK_ELEMENTS
    for start in range(0, a.nbytes, step):
        count = min(step, a.nbytes - start)
        if side_a.read_bytes(a, start, count) != side_b.read_bytes(b, start, count):
            return ValueStats(False, None, None, None, None, note=f"{reason}; bytes compared")
    return ValueStats(True, None, None, None, None, note=f"{reason}; bytes compared")
