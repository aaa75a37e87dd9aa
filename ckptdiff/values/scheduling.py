"""The --values pass: every tensor pair cut into chunks, computed on a few threads, folded back in chunk order."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ..checkpoint import TensorInfo
from ..errors import SourceError
from ..report import ValueNote
from .dtypes import VALUE_TYPES
from .fused import FileEnded, FusedChunks, c_kernel
from .numpy_chunks import NumpyChunks
from .readers import Side
from .statistics import Accumulator, ChunkResult, Sums, ValueStats

#: Elements per chunk: 1 Mi (2 MiB a side in bf16). The fused kernel works on blocks inside a chunk, so a chunk
#: only has to amortise a read's system calls and a thread hand-off; the numpy path keeps 256 Ki, below which
#: it paid numpy's per-call overhead and above which its float32 copies spilled the CPU's cache.
CHUNK_ELEMENTS = 1024 * 1024
NUMPY_CHUNK_ELEMENTS = 256 * 1024
#: At most this many threads compute a pass (each with its own file handles and buffers), and no more than
#: the cores this process may run on.
MAX_THREADS = 4
#: A pass reading less than this runs in the calling thread.
THREADS_MIN_BYTES = 32 * 2**20
#: Which code computes the sums: "c" (the fused kernel compiled at install, ``_fused.c``) or "numpy" (array
#: operations: the anchor of the benchmarks, and the fallback where the extension was not built). The
#: environment variable chooses numpy explicitly (the benchmarks' anchor); "c" where it was not built is as if
#: unset.
KERNEL_VARIABLE = "CKPTDIFF_VALUES_KERNEL"

if TYPE_CHECKING:  # pragma: no cover
    pass

Item = TypeVar("Item")
Result = TypeVar("Result")
#: Called as the pass goes: (bytes compared so far, bytes to compare in all), both sides counted.
ProgressHook = Callable[[int, int], None]


@dataclass(frozen=True)
class Pair:
    """Two equally shaped tensors to compare; their sides by index in the pass's list of sides."""

    side_a: int
    a: TensorInfo
    side_b: int
    b: TensorInfo

    @property
    def nbytes(self) -> int:
        return self.a.nbytes + self.b.nbytes


def choose_kernel(notify: Callable[[str], None] | None = None) -> str:
    """The C kernel ("c") where it was built, else "numpy" (with a one-line note); the environment variable
    :data:`KERNEL_VARIABLE` set to "numpy" chooses numpy."""
    wanted = os.environ.get(KERNEL_VARIABLE, "").strip().lower()
    if wanted == "numpy":
        return "numpy"
    if c_kernel() is not None:
        return "c"
    if notify is not None:
        notify("--values: the C kernel was not built at install; using the slower numpy statistics")
    return "numpy"


class Worker:
    """What one thread computes chunks with: the sides (its own copies when threads share the pass) and the
    kernel's buffers (the C kernel's, or numpy's)."""

    def __init__(self, sides: list[Side], kernel: str) -> None:
        self.sides = sides
        self.kernel = kernel
        self.fused: FusedChunks | None = FusedChunks() if kernel == "c" else None
        self.numpy: NumpyChunks | None = None if kernel == "c" else NumpyChunks()

    def chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        if self.fused is not None:
            return self._c_chunk(self.fused, pair, start, count)
        assert self.numpy is not None
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        raw_a = self.sides[pair.side_a].read(pair.a, kind_a, start, count)
        raw_b = self.sides[pair.side_b].read(pair.b, kind_b, start, count)
        return self.numpy.compared(kind_a, raw_a, kind_b, raw_b)

    def square_sum(self, pair: Pair, start: int, count: int) -> Sums:
        """Σa² of side A's chunk (an equal chunk taken as a SameChunk, once its tensor differed elsewhere)."""
        side, kind = self.sides[pair.side_a], VALUE_TYPES[pair.a.dtype]
        raw = side.read(pair.a, kind, start, count)
        chunks = self.fused if self.fused is not None else self.numpy
        assert chunks is not None
        return chunks.square_sum(kind, raw)

    def _c_chunk(self, fused: FusedChunks, pair: Pair, start: int, count: int) -> ChunkResult:
        """A chunk pair through the C kernel, compared byte for byte first: read by the kernel itself (pread into
        the sides' reused buffers) where both tensors are plain runs of their files, else read here."""
        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        if fused.reads and side_a.is_plain(pair.a) and side_b.is_plain(pair.b):
            place_a = side_a.place(pair.a, start * kind_a.itemsize, count * kind_a.itemsize)
            place_b = side_b.place(pair.b, start * kind_b.itemsize, count * kind_b.itemsize)
            try:
                return fused.read(kind_a, place_a, kind_b, place_b, count)
            except FileEnded as ended:
                side, info, place = (side_a, pair.a, place_a) if ended.side == 0 else (side_b, pair.b, place_b)
                needs = place[1] + len(place[2])
                where = side.where(info.file)
                raise SourceError(where, f"file ends at byte {ended.reached}, a tensor needs {needs}") from None
            except OSError as err:
                side, info = (side_a, pair.a) if err.filename == "a" else (side_b, pair.b)
                raise SourceError(side.where(info.file), f"cannot read: {err.strerror or err}") from None
        raw_a = side_a.read(pair.a, kind_a, start, count)
        raw_b = side_b.read(pair.b, kind_b, start, count)
        return fused.compared(kind_a, raw_a, kind_b, raw_b)


def pair_stats(
    sides: list[Side],
    pairs: list[Pair],
    *,
    threads: int | None = None,
    kernel: str | None = None,
    progress: ProgressHook | None = None,
) -> list[ValueStats]:
    """Statistics for every pair, streamed chunk by chunk (large passes on several threads).

    The reads and the kernels (the C kernel, or numpy's large operations) release the GIL, so threads working
    on different chunks overlap; each thread has its own sides (file handles and buffers). ``threads`` None: one
    per core this process may run on (:func:`cores`, at most :data:`MAX_THREADS`) for a large pass, else one.
    ``progress`` is called after every chunk.
    """
    if kernel is None or (kernel == "c" and c_kernel() is None):  # a worker where the extension was not built
        kernel = choose_kernel()
    results: dict[int, ValueStats] = {}
    comparable = []
    for index, pair in enumerate(pairs):
        unknown = [info.dtype for info in (pair.a, pair.b) if info.dtype not in VALUE_TYPES]
        if unknown:
            results[index] = _bytes_only(sides[pair.side_a], pair.a, sides[pair.side_b], pair.b, unknown[0])
        else:
            comparable.append(index)

    chunk_elements = NUMPY_CHUNK_ELEMENTS if kernel == "numpy" else CHUNK_ELEMENTS
    chunks = (
        (index, start, min(chunk_elements, pairs[index].a.numel - start))
        for index in comparable
        for start in range(0, pairs[index].a.numel, chunk_elements)
    )
    nbytes = sum(pairs[index].nbytes for index in comparable)
    if threads is None:
        threads = min(MAX_THREADS, cores()) if nbytes >= THREADS_MIN_BYTES else 1
    own = threading.local()
    workers: list[Worker] = []
    main = Worker(sides, kernel)

    def compute(chunk: tuple[int, int, int]) -> tuple[int, int, ChunkResult]:
        worker = getattr(own, "worker", None)
        if worker is None:
            worker = own.worker = Worker([side.copy() for side in sides], kernel) if threads > 1 else main
            workers.append(worker)
        index, start, count = chunk
        return index, start, worker.chunk(pairs[index], start, count)

    def finish(index: int, total: Accumulator) -> None:
        pair = pairs[index]
        if not total.equal:
            for start, count in total.unsquared:
                total.add_square_sum(main.square_sum(pair, start, count))
        note = None if pair.a.dtype == pair.b.dtype else ValueNote(widened=(pair.a.dtype, pair.b.dtype))
        results[index] = total.stats(note)

    done = 0
    if progress is not None:
        progress(done, nbytes)
    in_order = ordered_map(compute, chunks, threads)
    try:
        current, total = -1, Accumulator()
        for index, start, result in in_order:
            if index != current:  # one tensor's chunks come one after another
                if current >= 0:
                    finish(current, total)
                current, total = index, Accumulator()
            total.fold(start, result)
            if progress is not None:
                pair = pairs[index]
                count = min(chunk_elements, pair.a.numel - start)
                done += count * pair.nbytes // pair.a.numel
                progress(done, nbytes)
        if current >= 0:
            finish(current, total)
        for index in comparable:  # tensors without elements
            if index not in results:
                finish(index, Accumulator())
    finally:
        in_order.close()  # on an error here, the threads stop now (before their files are closed)
        for worker in workers:
            if worker is not main:
                for side in worker.sides:
                    side.close()
    if progress is not None and done != nbytes:
        progress(nbytes, nbytes)
    return [results[index] for index in range(len(pairs))]


def ordered_map(
    function: Callable[[Item], Result], items: Iterable[Item], threads: int
) -> Generator[Result, None, None]:
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


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _bytes_only(side_a: Side, a: TensorInfo, side_b: Side, b: TensorInfo, dtype: str) -> ValueStats:
    """Dtypes not widened to float32 (F4, F6, complex; ``dtype``: the first of the pair's): exact equality of the
    bytes, nothing else."""
    if a.dtype != b.dtype or a.nbytes != b.nbytes:
        return ValueStats(False, None, None, None, None, note=ValueNote(not_widened=dtype))
    note = ValueNote(not_widened=dtype, bytes_compared=True)
    step = CHUNK_ELEMENTS
    for start in range(0, a.nbytes, step):
        count = min(step, a.nbytes - start)
        if side_a.read_bytes(a, start, count) != side_b.read_bytes(b, start, count):
            return ValueStats(False, None, None, None, None, note=note)
    return ValueStats(True, None, None, None, None, note=note)
