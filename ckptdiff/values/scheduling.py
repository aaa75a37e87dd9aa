"""The --values pass: every tensor pair cut into chunks, computed on a few threads, folded back in chunk order."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib.util import find_spec
from typing import TYPE_CHECKING, TypeVar

from ..checkpoint import TensorInfo
from ..report import ValueNote
from .dtypes import VALUE_TYPES, ValueType, equal_chunk_facts
from .fused import FusedChunks, c_kernel
from .readers import Side
from .statistics import (
    Accumulator,
    ChunkResult,
    SameChunk,
    ValueStats,
    chunk_sums,
    float64_sums,
    square_sum,
)

#: Elements per chunk: 1 Mi (2 MiB a side in bf16). The fused kernel works on blocks inside a chunk, so a chunk
#: only has to amortise a read's system call and a thread hand-off; the numpy path keeps 256 Ki, below which
#: it paid numpy's per-call overhead and above which its float32 copies spilled the CPU's cache.
CHUNK_ELEMENTS = 1024 * 1024
NUMPY_CHUNK_ELEMENTS = 256 * 1024
#: The fused path compares a chunk's bytes in pieces of this size, which stay in the CPU's cache between the
#: read, the memcmp and the finite/nonzero check.
EQUAL_PIECE_BYTES = 512 * 1024
#: The C kernel maps chunks of at least this many bytes (side A) itself; smaller ones (small tensors) are read
#: into reused buffers: two positioned reads cost less than mapping and unmapping two ranges there (measured per
#: bf16 chunk pair: 4 KiB 7 µs read against 21 mapped, 64 KiB 40 against 46; 256 KiB 139 against 117).
MAP_MIN_BYTES = 256 * 1024
#: At most this many threads compute a pass (each with its own file handles and buffers).
MAX_THREADS = 4
#: A pass reading less than this runs in the calling thread.
THREADS_MIN_BYTES = 32 * 2**20
#: The tasks running now are read this many times, this far apart (seconds), and averaged before a pass chooses
#: its threads: on two shared CPUs that /proc/stat showed 92 % busy, single readings gave 0 other tasks in 29 %
#: of samples (two threads: over-subscribed), 1 in 44 %, 2 or more in 27 %.
RUNNING_SAMPLES = 4
RUNNING_SAMPLE_SECONDS = 0.002
#: Which code computes the sums: "c" (the fused kernel compiled at install, ``_fused.c``), "numba" (the same
#: pass where the extension was not built) or "numpy" (array operations: the anchor, the fallback where neither
#: is there, and small passes without the C kernel). The environment variable chooses one explicitly.
KERNEL_VARIABLE = "CKPTDIFF_VALUES_KERNEL"
#: Without the C kernel, a pass comparing fewer bytes (both sides) uses numpy: importing numba and loading its
#: compiled kernels costs ~0.5 s of CPU (1–2 s on a loaded machine), more than the fused pass saves on less data.
NUMBA_MIN_BYTES = 2**30

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

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


def choose_kernel(nbytes: int | None = None, notify: Callable[[str], None] | None = None) -> str:
    """The C kernel ("c") where it was built; else numba's ("numba") for a pass of ``nbytes`` ≥ NUMBA_MIN_BYTES
    (any, if None) when numba is installed, else "numpy" (with a one-line note when numba is missing). The
    environment variable overrides ("c" where it was not built: as if unset)."""
    wanted = os.environ.get(KERNEL_VARIABLE, "").strip().lower()
    if wanted in ("", "c") and c_kernel() is not None:
        return "c"
    if wanted == "numpy" or (wanted != "numba" and nbytes is not None and nbytes < NUMBA_MIN_BYTES):
        return "numpy"
    if find_spec("numba") is None:  # imported later, only by a chunk that differs: byte copies never load it
        if notify is not None:
            notify("--values: numba is not installed; using the slower numpy statistics")
        return "numpy"
    return "numba"


class Worker:
    """What one thread computes chunks with: the sides (its own copies when threads share the pass) and buffers."""

    def __init__(self, sides: list[Side], kernel: str) -> None:
        self.sides = sides
        self.delta: np.ndarray | None = None  # b − a of a chunk (numpy path)
        self.kernel = kernel
        self.fused: FusedChunks | None = None  # made on the first chunk that differs (numba loads ~0.5 s)
        self.maps = kernel == "c" and hasattr(c_kernel(), "mapped_chunk")  # POSIX: the C kernel reads the files
        self.pieces: dict[int, tuple[bytearray, bytearray]] = {}  # size → reused buffers of both sides

    def chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        if self.kernel == "c":
            return self._c_chunk(pair, start, count)
        if self.kernel == "numba":
            return self._fused_chunk(pair, start, count)
        import numpy as np

        with np.errstate(all="ignore"):  # overflow and NaN are expected in data: float64_sums handles them
            return self._numpy_chunk(pair, start, count)

    def square_sum(self, pair: Pair, start: int, count: int) -> float:
        """Σa² of side A's chunk (an equal chunk taken as a SameChunk, once its tensor differed elsewhere)."""
        side, kind = self.sides[pair.side_a], VALUE_TYPES[pair.a.dtype]
        raw = side.read(pair.a, kind, start, count)
        if self.kernel != "numpy":
            return self._fused().square_sum(kind, raw)
        return square_sum(side.widen(kind, raw))

    def _fused(self) -> FusedChunks:
        if self.fused is None:
            self.fused = FusedChunks(self.kernel)
        return self.fused

    def _c_chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        """A chunk pair through the C kernel: mapped by it where both tensors are plain and the chunk is large,
        else read into the sides' buffers; compared byte for byte first either way."""
        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        if self.maps and count * kind_a.itemsize >= MAP_MIN_BYTES:
            if side_a.is_plain(pair.a) and side_b.is_plain(pair.b):
                try:
                    return self._mapped_chunk(pair, start, count)
                except OSError:  # a file that cannot be memory-mapped: positioned reads from now on
                    self.maps = False
        raw_a = side_a.read(pair.a, kind_a, start, count)
        raw_b = side_b.read(pair.b, kind_b, start, count)
        return self._fused().compared(kind_a, raw_a, kind_b, raw_b)

    def _mapped_chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        """A chunk pair of two plain tensors, read by the C kernel itself (a memory map of just that range)."""
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        fd_a, offset_a = self._place(pair.side_a, pair.a, kind_a, start, count)
        fd_b, offset_b = self._place(pair.side_b, pair.b, kind_b, start, count)
        return self._fused().mapped(kind_a, fd_a, offset_a, kind_b, fd_b, offset_b, count)

    def _place(self, index: int, info: TensorInfo, kind: ValueType, start: int, count: int) -> tuple[int, int]:
        return self.sides[index].place(info, start * kind.itemsize, count * kind.itemsize)

    def _fused_chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        if kind_a is kind_b and side_a.is_plain(pair.a) and side_b.is_plain(pair.b):
            outcome = self._equal_in_pieces(pair, start, count)
            if isinstance(outcome, SameChunk):
                return outcome
            raw_a, raw_b, same = outcome
        else:
            outcome = self._read_both(pair, start, count)
            if isinstance(outcome, SameChunk):
                return outcome
            raw_a, raw_b, same = outcome
        return self._fused().sums(kind_a, raw_a, kind_b, raw_b, same)

    def _read_both(self, pair: Pair, start: int, count: int) -> SameChunk | tuple[bytearray, bytearray, bool]:
        """Both sides' chunks, read whole: a SameChunk when their bytes are equal and every element finite, else
        the two chunks (in the readers' buffers) and whether their bytes are equal."""
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        raw_a = self.sides[pair.side_a].read(pair.a, kind_a, start, count)
        raw_b = self.sides[pair.side_b].read(pair.b, kind_b, start, count)
        same = kind_a is kind_b and raw_a == raw_b  # bytearrays of one size: a memcmp
        if same:
            facts = equal_chunk_facts(kind_a, raw_a)
            if facts is not None and facts[0]:
                return SameChunk(count, facts[1])
        return raw_a, raw_b, same

    def _equal_in_pieces(self, pair: Pair, start: int, count: int) -> SameChunk | tuple[bytearray, bytearray, bool]:
        """A chunk of two plain tensors of one dtype, read and compared in pieces that stay in the CPU's cache
        (a whole chunk pair spills it: measured ~1.6× the CPU time on byte copies): a SameChunk when every piece
        is equal and finite, else both sides' whole chunks (in the readers' buffers) for the kernel."""
        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        kind = VALUE_TYPES[pair.a.dtype]
        begin, nbytes = start * kind.itemsize, count * kind.itemsize
        nonzero = False
        for low in range(0, nbytes, EQUAL_PIECE_BYTES):
            size = min(EQUAL_PIECE_BYTES, nbytes - low)
            piece_a, piece_b = self._pieces(size)
            side_a.fill(pair.a, begin + low, memoryview(piece_a))
            side_b.fill(pair.b, begin + low, memoryview(piece_b))
            same = piece_a == piece_b  # a memcmp
            facts = equal_chunk_facts(kind, piece_a) if same else None
            if facts is None or not facts[0]:  # differs, or the kernel must count non-finite elements
                raw_a, raw_b = side_a.buffer(pair.a, nbytes), side_b.buffer(pair.b, nbytes)
                for side, info, raw, piece in ((side_a, pair.a, raw_a, piece_a), (side_b, pair.b, raw_b, piece_b)):
                    view = memoryview(raw)
                    view[low : low + size] = piece
                    side.fill(info, begin, view[:low])
                    side.fill(info, begin + low + size, view[low + size :])
                return raw_a, raw_b, same and raw_a == raw_b
            nonzero = nonzero or facts[1]
        return SameChunk(count, nonzero)

    def _pieces(self, size: int) -> tuple[bytearray, bytearray]:
        if size not in self.pieces:
            if len(self.pieces) > 4:  # a tensor's last piece is shorter: keep the full size and a few others
                self.pieces = {n: pair for n, pair in self.pieces.items() if n == EQUAL_PIECE_BYTES}
            self.pieces[size] = (bytearray(size), bytearray(size))
        return self.pieces[size]

    def _numpy_chunk(self, pair: Pair, start: int, count: int) -> ChunkResult:
        import numpy as np

        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        kind_a, kind_b = VALUE_TYPES[pair.a.dtype], VALUE_TYPES[pair.b.dtype]
        outcome = self._read_both(pair, start, count)
        if isinstance(outcome, SameChunk):
            return outcome
        raw_a, raw_b, same = outcome
        a, b = side_a.widen(kind_a, raw_a), side_b.widen(kind_b, raw_b)
        if kind_a is not kind_b:
            same = bool(np.array_equal(a, b))
        if self.delta is None or self.delta.size < count:
            self.delta = np.empty(count, np.float32)
        sums = chunk_sums(a, b, same, self.delta)
        return sums if sums is not None else float64_sums(a, b, same)


def pair_stats(
    sides: list[Side],
    pairs: list[Pair],
    *,
    threads: int | None = None,
    kernel: str | None = None,
    progress: ProgressHook | None = None,
) -> list[ValueStats]:
    """Statistics for every pair, streamed chunk by chunk (large passes on several threads).

    The reads and the kernels (numba's ``nogil``, or numpy's large operations) release the GIL, so threads
    working on different chunks overlap; each thread has its own sides (file handles and buffers). ``threads``
    None: as many as the cores free now (:func:`free_cores`). ``progress`` is called after every chunk.
    """
    kernel = kernel or choose_kernel(sum(pair.nbytes for pair in pairs))
    if kernel == "c" and c_kernel() is None:  # a worker where the extension was not built
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
        threads = min(MAX_THREADS, free_cores()) if nbytes >= THREADS_MIN_BYTES else 1
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


def free_cores() -> int:
    """The CPUs this process may run on, less the busy ones (:func:`cores_free_of` this machine's readings now)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system
        load = 0.0
    return cores_free_of(load, tasks_running_on_average())


def cores_free_of(load: float, running: float | None) -> int:
    """The CPUs this process may run on, less the busy ones: the smaller of the last minute's load average
    (``load``) and the tasks running besides this one, averaged over a few samples (``running``; None where it
    cannot be read). On a shared machine a second thread only contends (measured: one thread beat two at a load
    average of 2); the minute's average alone would also count this process's own work of a moment ago (runs
    that follow each other), and one sample of the tasks running is a coin toss (:data:`RUNNING_SAMPLES`)."""
    busy = load if running is None else min(load, running)
    return max(1, min(cores(), round(cores() - busy)))


def tasks_running_on_average(samples: int = RUNNING_SAMPLES, pause: float = RUNNING_SAMPLE_SECONDS) -> float | None:
    """The tasks running besides this one (:func:`tasks_running_now`), averaged over ``samples`` readings
    ``pause`` seconds apart; None where that cannot be read."""
    counts = []
    for sample in range(samples):
        if sample:
            time.sleep(pause)
        count = tasks_running_now()
        if count is None:
            return None
        counts.append(count)
    return sum(counts) / len(counts)


def tasks_running_now(loadavg: str | None = None) -> int | None:
    """Tasks runnable on the machine now, less this one: the fourth field of /proc/loadavg ("running/total",
    which counts the reader), or of ``loadavg``; None where there is no such file (not Linux)."""
    if loadavg is None:
        try:
            with open("/proc/loadavg") as handle:
                loadavg = handle.read()
        except OSError:
            return None
    try:
        running = int(loadavg.split()[3].split("/")[0])
    except (IndexError, ValueError):
        return None
    return max(0, running - 1)


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
