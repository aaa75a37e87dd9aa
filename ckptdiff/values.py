"""Value statistics (``--values``): did training change a tensor, and by how much? Needs ``ckptdiff[torch]``.

For every tensor both sides store with the same shape: exactly equal?, max |b−a|, mean |b−a|, cosine
similarity and relative L2 ‖b−a‖/‖a‖, computed in float32 (bf16, f16 and fp8 are widened first).

Memory: tensors are read in chunks of ``CHUNK_ELEMENTS`` into buffers allocated once per thread (a raw and a
float32 chunk per side), so the peak is a few chunks whatever the checkpoint's size. Speed: a chunk whose
bytes are the same on both sides costs a memcmp and one min/max pass; a differing one, three dot products,
an in-place subtraction and abs, a sum and a max, with no temporaries. Large passes run on up to
``MAX_THREADS`` threads of ours with torch single-threaded (see :func:`_pair_stats`). Bytes
come from plain positioned reads at the offsets the headers give (safetensors) or the restricted unpickler
found (torch zip archives, whose storages are stored uncompressed). Not through safetensors' ``safe_open``:
it maps the file, and every mapped page read stays in the process's resident set until the kernel reclaims
it, so a 2 GB file would cost ~2 GB of RSS.

Byte identity without reading: files whose sha256 is known on both sides (the Hub's LFS listing, or the blob
name of a file in the Hugging Face cache) and equal are identical; their tensors are reported equal unread.
A Hub side's other files are downloaded into the HF cache, only under ``--values``, after announcing the total.

torch is imported inside the functions that need it; without it, :func:`require_torch` raises one line.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .checkpoint import Checkpoint, RelativePath, TensorInfo
from .errors import CkptdiffError, SourceError

if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType

    from .profiles import Profile
    from .report import Report

INSTALL_HINT = "pip install 'ckptdiff[torch]'"
#: Elements per chunk: 512 Ki float32 = 2 MiB per side, so a thread's working set stays in cache.
CHUNK_ELEMENTS = 512 * 1024
#: At most this many threads compute a --values pass (each with its own file handles and buffers).
MAX_THREADS = 4
#: A pass reading less than this runs in the calling thread.
THREADS_MIN_BYTES = 32 * 2**20
#: How many rows the "largest changes" finding names.
TOP_CHANGES = 5
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Notify = Callable[[str], None]


def require_torch() -> ModuleType:
    """Import torch, or fail with the one line saying how to get it."""
    try:
        import torch
    except ImportError:
        raise CkptdiffError("--values", "needs torch, which is not installed", INSTALL_HINT) from None
    return torch


# --- statistics ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueStats:
    """How B's values differ from A's for one tensor. ``method`` says how: bytes read, or sha256 of the file."""

    equal: bool
    max_abs: float | None
    mean_abs: float | None
    cosine: float | None  # None when a side is all zeros (undefined) or the file was not read
    rel_l2: float | None  # ‖b−a‖/‖a‖; None when a is all zeros and b is not
    method: Literal["read", "sha256"] = "read"
    note: str | None = None

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
            out["note"] = self.note
        return out


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such values (from NaNs in a tensor) are reported as null."""
    return value if value is not None and math.isfinite(value) else None


IDENTICAL_BY_HASH = ValueStats(True, 0.0, 0.0, None, 0.0, method="sha256")
#: dtypes torch.aminmax refused (fp8 on CPU): their equal chunks are checked in float32.
_NO_AMINMAX: set[Any] = set()


class _Accumulator:
    """One tensor's running sums, folded from per-chunk results in chunk order (so in the same order, and
    to the same bits, however many threads computed the chunks): Python floats across chunks.

    A chunk comes from :func:`_chunk_sums` (float32 arithmetic) or, when its bytes are the same on both
    sides, from :func:`_same_chunk` (one min/max pass). Such a chunk's Σa² is needed only when another chunk
    of the tensor differs; it is then summed afterwards (:meth:`add_squares`) from the chunks in ``unsquared``.
    """

    def __init__(self) -> None:
        self.equal = True
        self.nonzero = False  # an equal chunk taken by _same_chunk held a nonzero value
        self.max_abs = self.sum_abs = 0.0
        self.dot_ab = self.dot_aa = self.dot_bb = self.dot_dd = 0.0
        self.count = self.nonfinite = 0
        self.unsquared: list[tuple[int, int]] = []  # (start, count) of equal chunks not in the dot products

    def fold(self, start: int, result: _ChunkResult) -> None:
        if isinstance(result, _SameChunk):
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

    def add_squares(self, torch: ModuleType, a: Any) -> None:
        """Σa² of an equal chunk :func:`_same_chunk` took, once the tensor turned out to differ elsewhere."""
        square = float(torch.dot(a, a))
        if not math.isfinite(square):  # overflows float32 (_same_chunk saw only finite values)
            wide = a.double()
            square = float(torch.dot(wide, wide))
        self.dot_aa += square
        self.dot_bb += square
        self.dot_ab += square

    def stats(self, note: str | None = None) -> ValueStats:
        if self.nonfinite:
            skipped = f"{self.nonfinite} non-finite element(s) left out of the statistics"
            note = f"{note}; {skipped}" if note else skipped
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


@dataclass(frozen=True)
class _SameChunk:
    """A chunk with the same bytes on both sides, all finite: how many elements, and whether one is nonzero."""

    count: int
    nonzero: bool


@dataclass(frozen=True)
class _Sums:
    """A chunk's float32 sums: Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb² over ``count`` finite elements."""

    equal: bool
    count: int
    nonfinite: int
    sums: tuple[float, float, float, float, float, float]


_ChunkResult = _SameChunk | _Sums


def _same_chunk(torch: ModuleType, native: Any) -> _SameChunk | None:
    """An equal chunk in its stored dtype: min and max in one pass say whether every value is finite and one is
    nonzero (cosine 1, not undefined). None when :func:`_chunk_sums` must take it: non-finite values, or a
    dtype torch has no min/max for (fp8)."""
    if native.dtype in _NO_AMINMAX:
        return None
    try:
        low, high = torch.aminmax(native)
    except (RuntimeError, NotImplementedError):
        _NO_AMINMAX.add(native.dtype)
        return None
    low, high = float(low), float(high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return _SameChunk(native.numel(), low != 0.0 or high != 0.0)


def _chunk_sums(torch: ModuleType, a: Any, b: Any, same: bool) -> _Sums | None:
    """The sums of two float32 chunks, or None if one is not finite (then see :func:`_float64_sums`).

    ``b`` is overwritten. A differing chunk costs three dot products (Σa², Σb², then Σ(b−a)² once b holds
    b − a), an in-place subtraction and abs, a sum and a max: no temporaries. Σab follows from them:
    ‖b−a‖² = ‖a‖² + ‖b‖² − 2ab. That is also the more accurate way where it matters: for a fine-tuned
    tensor (cosine near 1) it came within 1e-9 of a float64 computation where a float32 Σab was 2e-5 off;
    for unrelated tensors (cosine near 0) it is ~1e-5 off, against ~1e-7 (3 M elements, bf16).
    """
    if same:  # b is a: one dot product gives every sum
        square = float(torch.dot(a, a))
        sums = (0.0, 0.0, 0.0, square, square, square)
    else:
        dot_aa, dot_bb = torch.dot(a, a), torch.dot(b, b)
        delta = b.sub_(a)
        dot_dd = torch.dot(delta, delta)
        delta.abs_()
        aa, bb, dd = float(dot_aa), float(dot_bb), float(dot_dd)
        sums = (dd, float(delta.sum()), float(delta.max()), (aa + bb - dd) / 2, aa, bb)
    if not all(math.isfinite(value) for value in sums):
        return None
    return _Sums(same, a.numel(), 0, sums)


def _float64_sums(torch: ModuleType, a: Any, b: Any, same: bool) -> _Sums:
    """A chunk with NaN or infinity in the data, or a square overflowing float32: summed in float64 over the
    elements finite on both sides; the others are counted."""
    finite = torch.isfinite(a) & torch.isfinite(b)
    a, b = a[finite], b[finite]
    kept = a.numel()
    if kept == 0:
        sums = (0.0,) * 6
    elif same:
        square = float(torch.dot(a, a))
        sums = (0.0, 0.0, 0.0, square, square, square)
    else:
        delta = b - a
        dd, ab, aa, bb = (float(torch.dot(x, y)) for x, y in ((delta, delta), (a, b), (a, a), (b, b)))
        delta.abs_()
        sums = (dd, float(delta.sum()), float(delta.max()), ab, aa, bb)
    return _Sums(same, kept, finite.numel() - kept, sums)


# --- where each tensor's bytes are ---------------------------------------------------------------------


def _torch_dtype(torch: ModuleType, dtype: str) -> Any | None:
    name = {
        "BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "U8": "uint8",
        "I16": "int16", "U16": "uint16", "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64",
        "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
        "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu",
    }.get(dtype)  # fmt: skip
    return getattr(torch, name, None) if name else None


class _FileReader:
    """Positioned reads of one file into reusable buffers (the page cache is not the process's memory).

    Each read fills a whole bytearray: one sized for a full chunk, another for the shorter last chunk of a
    tensor. So two reads compare with ``bytearray ==`` (one memcmp) and nothing is allocated per chunk.
    """

    def __init__(self, path: Path, where: str) -> None:
        self.path = path
        self.where = where
        try:
            self.handle = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by _Side.close
        except OSError as err:
            raise SourceError(where, f"cannot read: {err.strerror or err}") from None
        self.full = bytearray()
        self.tail = bytearray()

    def read(self, offset: int, nbytes: int) -> memoryview:
        if nbytes == len(self.full):
            buffer = self.full
        elif nbytes == len(self.tail):
            buffer = self.tail
        elif nbytes > len(self.full):
            buffer = self.full = bytearray(nbytes)
        else:
            buffer = self.tail = bytearray(nbytes)
        view = memoryview(buffer)
        got = 0
        while got < nbytes:
            n = _pread_into(self.handle, view[got:], offset + got)
            if not n:
                raise SourceError(self.where, f"file ends at byte {offset + got}, a tensor needs {offset + nbytes}")
            got += n
        return view


def _pread_into(handle: Any, view: memoryview, offset: int) -> int:
    """One positioned read into ``view``: os.preadv where the OS has it (one system call), else seek + readinto."""
    if hasattr(os, "preadv"):
        return os.preadv(handle.fileno(), [view], offset)
    handle.seek(offset)
    return handle.readinto(view) or 0


class _Side:
    """One checkpoint's files, opened on demand: local paths, or Hub files downloaded into the HF cache."""

    def __init__(self, label: str, checkpoint: Checkpoint, paths: Mapping[RelativePath, Path]) -> None:
        self.label = label
        self.checkpoint = checkpoint
        self.paths = paths
        self.readers: dict[RelativePath, _FileReader] = {}
        self.archives: dict[RelativePath, Any] = {}  # torch_pickle.TorchArchive per .bin/.pt file
        self.loaded: dict[RelativePath, Any] = {}  # torch.load(mmap=True) state dicts, strided tensors only
        self.strided: tuple[TensorInfo, Any] | None = None  # the last strided tensor, flattened
        self.wide: Any = None  # float32 chunk buffer

    def where(self, file: RelativePath) -> str:
        return str(self.paths.get(file, file))

    def reader(self, file: RelativePath) -> _FileReader:
        if file not in self.readers:
            self.readers[file] = _FileReader(self.paths[file], self.where(file))
        return self.readers[file]

    def native(self, torch: ModuleType, info: TensorInfo, start: int, count: int) -> tuple[Any, memoryview | None]:
        """Elements ``start`` to ``start + count`` in their stored dtype, and their raw bytes (None if strided).

        Both are views of reused buffers, valid until this side's next read.
        """
        dtype = _torch_dtype(torch, info.dtype)
        if dtype is None:
            raise _NotComparable(f"dtype {info.dtype} has no torch equivalent")
        if self.strided is None or self.strided[0] is not info:
            strided = self._strided_tensor(torch, info)
            self.strided = (info, strided.reshape(-1)) if strided is not None else None
        if self.strided is not None:
            return self.strided[1][start : start + count], None
        itemsize = dtype.itemsize
        raw = self.reader(info.file).read(info.data_offsets[0] + start * itemsize, count * itemsize)
        return torch.frombuffer(raw, dtype=dtype), raw

    def widen(self, torch: ModuleType, native: Any) -> Any:
        """A float32 chunk: ``native`` itself if it is one, else widened into this side's reused buffer."""
        if native.dtype == torch.float32:
            return native
        if self.wide is None or self.wide.numel() < native.numel():
            self.wide = torch.empty(max(CHUNK_ELEMENTS, native.numel()), dtype=torch.float32)
        return self.wide[: native.numel()].copy_(native)

    def copy(self) -> _Side:
        """The same files with handles and buffers of its own, for another thread."""
        return _Side(self.label, self.checkpoint, self.paths)

    def _strided_tensor(self, torch: ModuleType, info: TensorInfo) -> Any | None:
        """A torch-archive tensor whose bytes are not one contiguous run: loaded through torch.load (mmap)."""
        from .sources import torch_pickle

        if not info.file.endswith(torch_pickle.TORCH_SUFFIXES):
            return None
        if info.file not in self.archives:
            self.archives[info.file] = torch_pickle.read_archive(self.paths[info.file])
        archive = self.archives[info.file]
        if archive.big_endian:
            raise CkptdiffError(self.where(info.file), "is a big-endian torch archive; --values reads little-endian")
        if archive.records[info.name].contiguous:
            return None
        if info.file not in self.loaded:
            try:
                self.loaded[info.file] = torch.load(self.paths[info.file], mmap=True, weights_only=True)
            except Exception as err:
                raise SourceError(self.where(info.file), f"torch.load(weights_only=True) refused it: {err}") from None
        loaded = self.loaded[info.file]
        for key in (None, *torch_pickle.STATE_DICT_KEYS):
            holder = loaded if key is None else loaded.get(key) if isinstance(loaded, dict) else None
            if isinstance(holder, dict) and info.name in holder:
                return holder[info.name]
        raise SourceError(self.where(info.file), f"torch.load found no tensor {info.name!r}")

    def close(self) -> None:
        for reader in self.readers.values():
            reader.handle.close()
        self.readers.clear()
        self.loaded.clear()
        self.strided = None


class _NotComparable(Exception):
    pass


@dataclass(frozen=True)
class _Pair:
    """Two equally shaped tensors to compare; their sides by index in the pass's list of sides."""

    side_a: int
    a: TensorInfo
    side_b: int
    b: TensorInfo


class _Worker:
    """What one thread computes chunks with: the sides (its own copies when threads share the pass) and a
    float32 buffer for b when it is a tensor torch.load gave (not to be overwritten)."""

    def __init__(self, sides: list[_Side]) -> None:
        self.sides = sides
        self.scratch: Any = None

    def chunk(self, torch: ModuleType, pair: _Pair, start: int, count: int) -> _ChunkResult:
        side_a, side_b = self.sides[pair.side_a], self.sides[pair.side_b]
        native_a, raw_a = side_a.native(torch, pair.a, start, count)
        native_b, raw_b = side_b.native(torch, pair.b, start, count)
        same_bytes = None
        if pair.a.dtype == pair.b.dtype and raw_a is not None and raw_b is not None:
            same_bytes = _same_bytes(raw_a, raw_b)
            same = _same_chunk(torch, native_a) if same_bytes else None
            if same is not None:
                return same
        wide_a, wide_b = side_a.widen(torch, native_a), side_b.widen(torch, native_b)
        if wide_b is native_b and raw_b is None:  # float32 from torch.load: copied before b − a overwrites it
            if self.scratch is None or self.scratch.numel() < count:
                self.scratch = torch.empty(max(CHUNK_ELEMENTS, count), dtype=torch.float32)
            wide_b = self.scratch[:count].copy_(wide_b)
        if same_bytes is None:
            same_bytes = bool(torch.equal(wide_a, wide_b))
        sums = _chunk_sums(torch, wide_a, wide_b, same_bytes)
        if sums is not None:
            return sums
        wide_a = side_a.widen(torch, side_a.native(torch, pair.a, start, count)[0]).double()  # b was overwritten
        wide_b = side_b.widen(torch, side_b.native(torch, pair.b, start, count)[0]).double()
        return _float64_sums(torch, wide_a, wide_b, same_bytes)


def _pair_stats(torch: ModuleType, sides: list[_Side], pairs: list[_Pair]) -> list[ValueStats]:
    """Statistics for every pair, streamed chunk by chunk (large passes on several threads).

    torch runs single-threaded meanwhile, and our own threads share a large pass instead: torch's kernels
    split every operation across all cores and wait for the last part, so one core busy with another
    process stalls every operation (measured on a shared 2-core machine: ~8 ms per 16 MiB operation instead
    of ~1 ms, and 15 MiB/s for a pass of small chunks). Our threads work on different chunks and never wait
    for each other.
    """
    results: dict[int, ValueStats] = {}
    comparable = []
    for index, pair in enumerate(pairs):
        unknown = [info.dtype for info in (pair.a, pair.b) if _torch_dtype(torch, info.dtype) is None]
        if unknown:
            reason = f"dtype {unknown[0]} has no torch equivalent"
            results[index] = _bytes_only(sides[pair.side_a], pair.a, sides[pair.side_b], pair.b, reason)
        else:
            comparable.append(index)

    def chunks() -> Iterator[tuple[int, int, int]]:
        for index in comparable:
            numel = pairs[index].a.numel
            for start in range(0, numel, CHUNK_ELEMENTS):
                yield index, start, min(CHUNK_ELEMENTS, numel - start)

    def finish(index: int, total: _Accumulator) -> None:
        pair = pairs[index]
        if not total.equal:
            side = sides[pair.side_a]
            for start, count in total.unsquared:
                total.add_squares(torch, side.widen(torch, side.native(torch, pair.a, start, count)[0]))
        note = None if pair.a.dtype == pair.b.dtype else f"{pair.a.dtype} vs {pair.b.dtype}, compared as float32"
        results[index] = total.stats(note)

    nbytes = sum(pairs[index].a.nbytes + pairs[index].b.nbytes for index in comparable)
    threads = min(MAX_THREADS, _cores()) if nbytes >= THREADS_MIN_BYTES else 1
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if threads > 1:
            in_order = _threaded(torch, sides, pairs, chunks(), threads)
        else:
            worker = _Worker(sides)
            in_order = ((chunk, worker.chunk(torch, pairs[chunk[0]], *chunk[1:])) for chunk in chunks())
        current, total = -1, _Accumulator()
        with contextlib.closing(in_order):  # on an error, the threads stop now, not when the traceback goes
            for (index, start, _), result in in_order:  # one tensor's chunks come one after another
                if index != current:
                    if current >= 0:
                        finish(current, total)
                    current, total = index, _Accumulator()
                total.fold(start, result)
        if current >= 0:
            finish(current, total)
        for index in comparable:  # tensors without elements
            if index not in results:
                finish(index, _Accumulator())
    finally:
        torch.set_num_threads(before)
    return [results[index] for index in range(len(pairs))]


def _threaded(
    torch: ModuleType, sides: list[_Side], pairs: list[_Pair], chunks: Iterator[tuple[int, int, int]], threads: int
) -> Iterator[tuple[tuple[int, int, int], _ChunkResult]]:
    """(chunk, result) in chunk order, computed by ``threads`` threads that each take the next chunk when free.

    Results wait only until the ones before them are out, so memory stays a few results whatever the pass's
    size. The first error stops the other threads after their chunk, and is raised here; so is leaving early
    (Ctrl-C).
    """
    ready = threading.Condition()
    numbered = enumerate(chunks)
    done: dict[int, tuple[tuple[int, int, int], _ChunkResult]] = {}
    errors: list[BaseException] = []
    state = {"running": threads, "stop": False}

    def work() -> None:
        worker = _Worker([side.copy() for side in sides])
        try:
            while True:
                with ready:
                    item = None if state["stop"] or errors else next(numbered, None)
                if item is None:
                    return
                i, chunk = item
                result = worker.chunk(torch, pairs[chunk[0]], *chunk[1:])
                with ready:
                    done[i] = (chunk, result)
                    ready.notify()
        except BaseException as err:  # noqa: BLE001 - handed to the consuming thread, which raises it
            with ready:
                errors.append(err)
        finally:
            for side in worker.sides:
                side.close()
            with ready:
                state["running"] -= 1
                ready.notify()

    pool = [threading.Thread(target=work, name=f"ckptdiff-values-{n}", daemon=True) for n in range(threads)]
    for thread in pool:
        thread.start()
    try:
        i = 0
        while True:
            with ready:
                while i not in done and not errors and state["running"]:
                    ready.wait()
                if errors:
                    raise errors[0]
                if i not in done:
                    return
                item = done.pop(i)
            yield item
            i += 1
    finally:
        with ready:
            state["stop"] = True
        for thread in pool:
            thread.join()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _same_bytes(a: memoryview, b: memoryview) -> bool:
    """memcmp of two chunks (memoryview == compares element by element, ~50× slower)."""
    if a.nbytes != b.nbytes:
        return False
    whole_a, whole_b = a.obj, b.obj
    if isinstance(whole_a, bytearray) and isinstance(whole_b, bytearray) and len(whole_a) == len(whole_b) == a.nbytes:
        return whole_a == whole_b
    return a.tobytes() == b.tobytes()


def _bytes_only(side_a: _Side, a: TensorInfo, side_b: _Side, b: TensorInfo, reason: str) -> ValueStats:
    """Dtypes torch cannot widen (F4, F6): exact equality of the bytes, nothing else."""
    if a.dtype != b.dtype or a.nbytes != b.nbytes:
        return ValueStats(False, None, None, None, None, note=reason)
    step = CHUNK_ELEMENTS
    equal = True
    for start in range(0, a.nbytes, step):
        count = min(step, a.nbytes - start)
        left = side_a.reader(a.file).read(a.data_offsets[0] + start, count)
        if not _same_bytes(left, side_b.reader(b.file).read(b.data_offsets[0] + start, count)):
            equal = False
            break
    return ValueStats(equal, None, None, None, None, note=f"{reason}; bytes compared")


# --- byte identity ---------------------------------------------------------------------------------------


def file_sha256(checkpoint: Checkpoint, file: RelativePath) -> str | None:
    """A file's sha256 if known without reading it: the Hub listing, or its blob name in the HF cache."""
    for info in checkpoint.files:
        if info.path == file and info.sha256:
            return info.sha256.lower()
    if checkpoint.kind == "hub":
        return None
    path = _local_path(checkpoint, file)
    if path is None:
        return None
    try:
        blob = path.resolve()
    except OSError:
        return None
    if blob.parent.name == "blobs" and _SHA256.match(blob.name):
        return blob.name
    return None


def identical_files(a: Checkpoint, b: Checkpoint) -> dict[tuple[RelativePath, RelativePath], str]:
    """Pairs of files (one per side) with the same known sha256, mapped to that hash."""
    hashes_b: dict[str, RelativePath] = {}
    for info in b.files:
        digest = file_sha256(b, info.path)
        if digest:
            hashes_b.setdefault(digest, info.path)
    pairs = {}
    for info in a.files:
        digest = file_sha256(a, info.path)
        if digest and digest in hashes_b:
            pairs[(info.path, hashes_b[digest])] = digest
    return pairs


# --- getting the files -------------------------------------------------------------------------------------


def _local_path(checkpoint: Checkpoint, file: RelativePath) -> Path | None:
    if checkpoint.kind == "hub":
        return None
    location = Path(checkpoint.location)
    if location.is_file():
        return location if location.name == Path(file).name else location.parent / file
    candidate = location / file
    return candidate if candidate.exists() else None


def fetch_files(
    checkpoint: Checkpoint,
    files: Iterable[RelativePath],
    *,
    label: str,
    offline: bool = False,
    progress: bool = False,
    notify: Notify | None = None,
) -> dict[RelativePath, Path]:
    """Local paths of these files; a Hub side's are downloaded into the HF cache, the total announced first."""
    wanted = sorted(set(files))
    paths: dict[RelativePath, Path] = {}
    remote = []
    for file in wanted:
        local = _local_path(checkpoint, file)
        if local is not None:
            paths[file] = local
        elif checkpoint.kind == "local":
            raise SourceError(checkpoint.location, f"file {file} is missing")
        else:
            remote.append(file)
    if not remote:
        return paths
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    repo, revision = checkpoint.location, checkpoint.revision
    where = f"{repo}@{revision[:12]}" if revision else repo
    try:
        plans = [hf_hub_download(repo, f, revision=revision, dry_run=True, local_files_only=offline) for f in remote]
    except LocalEntryNotFoundError:
        raise SourceError(where, "--values needs the weight files, which are not in the cache (--offline)") from None
    except HfHubHTTPError as err:
        raise SourceError(where, f"cannot list weight files for --values: {_short(err)}") from None
    missing = [plan for plan in plans if plan.will_download]
    if missing and notify is not None:
        total = sum(plan.file_size or 0 for plan in missing)
        cached = len(plans) - len(missing)
        also = f" ({cached} already cached)" if cached else ""
        notify(f"--values: downloading {len(missing)} file(s) of {label} ({where}), {_gib(total)}, "
               f"into the Hugging Face cache{also}")  # fmt: skip
    tqdm_class = None if progress else _silent_tqdm()
    for file in remote:
        try:
            paths[file] = Path(
                hf_hub_download(repo, file, revision=revision, local_files_only=offline, tqdm_class=tqdm_class)
            )
        except HfHubHTTPError as err:
            raise SourceError(f"{where}:{file}", f"download failed: {_short(err)}") from None
        except OSError as err:
            raise SourceError(f"{where}:{file}", f"download failed: {err.strerror or err}") from None
    return paths


def _silent_tqdm() -> type:
    from tqdm.auto import tqdm

    class Silent(tqdm):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Silent


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _short(err: Exception) -> str:
    return " ".join(str(err).split())[:200]


# --- the whole --values pass ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ValuesResult:
    stats: dict[str, ValueStats]  # row name → stats
    identical: dict[tuple[RelativePath, RelativePath], str]  # (file in A, file in B) → shared sha256
    embeds: tuple[tuple[str, str, str, ValueStats], ...]  # (side label, its tensor, base tensor, stats)


def compare_values(
    a: Checkpoint,
    b: Checkpoint,
    names: Iterable[str | tuple[str, str, str]],
    *,
    base: Checkpoint | None = None,
    embed_pairs: Iterable[tuple[str, str]] = (),
    offline: bool = False,
    progress: bool = False,
    notify: Notify | None = None,
) -> ValuesResult:
    """Statistics for ``names`` (tensors in both with equal shapes) and, with a base, the embed checks.

    A name is one tensor name, or (key, name in A, name in B) when the sides name it differently; results
    are keyed by it. ``embed_pairs`` are (tensor name in a side, tensor name in the base) pairs.
    """
    torch = require_torch()
    triples = [(n, n, n) if isinstance(n, str) else n for n in names]
    triples = [(k, x, y) for k, x, y in triples if x in a.tensors and y in b.tensors]
    triples = [(k, x, y) for k, x, y in triples if a.tensors[x].shape == b.tensors[y].shape]
    identical = identical_files(a, b)
    same_file = set(identical)
    stats: dict[str, ValueStats] = {}
    to_read = []
    for key, name_a, name_b in triples:
        if (a.tensors[name_a].file, b.tensors[name_b].file) in same_file and name_a == name_b:
            stats[key] = IDENTICAL_BY_HASH
        else:
            to_read.append((key, name_a, name_b))
    embed_jobs: list[tuple[str, str, str]] = []  # (side label, its tensor, base tensor)
    if base is not None:
        for label, side in (("A", a), ("B", b)):
            for own, base_name in embed_pairs:
                mine, theirs = side.tensors.get(own), base.tensors.get(base_name)
                if mine is not None and theirs is not None and mine.shape == theirs.shape:
                    embed_jobs.append((label, own, base_name))
    options: dict[str, Any] = dict(offline=offline, progress=progress, notify=notify)
    files_a = {a.tensors[x].file for _, x, _ in to_read} | {a.tensors[t].file for lb, t, _ in embed_jobs if lb == "A"}
    files_b = {b.tensors[y].file for _, _, y in to_read} | {b.tensors[t].file for lb, t, _ in embed_jobs if lb == "B"}
    side_a = _Side("A", a, fetch_files(a, files_a, label="A", **options))
    side_b = _Side("B", b, fetch_files(b, files_b, label="B", **options))
    sides = [side_a, side_b]
    embeds = []
    try:
        if base is not None and embed_jobs:
            base_files = {base.tensors[base_name].file for _, _, base_name in embed_jobs}
            sides.append(_Side("base", base, fetch_files(base, base_files, label="the base", **options)))
        pairs = [_Pair(0, a.tensors[name_a], 1, b.tensors[name_b]) for _, name_a, name_b in to_read]
        for label, own, base_name in embed_jobs:
            assert base is not None
            index = 0 if label == "A" else 1
            pairs.append(_Pair(2, base.tensors[base_name], index, sides[index].checkpoint.tensors[own]))
        results = _pair_stats(torch, sides, pairs)
        for (key, _, _), result in zip(to_read, results, strict=False):
            stats[key] = result
        for (label, own, base_name), result in zip(embed_jobs, results[len(to_read) :], strict=True):
            embeds.append((label, own, base_name, result))
    finally:
        for side in sides:
            side.close()
    return ValuesResult(stats, identical, tuple(embeds))


def embed_pairs_for(
    profile: Profile | None, base: Checkpoint, a: Checkpoint, b: Checkpoint
) -> tuple[list[tuple[str, str]], list[str]]:
    """Which of a side's tensors must equal which of the base's, under each side's own naming and the base's layout
    (:func:`ckptdiff.profiles.base_layouts.value_pairs`), and why a role a side carries could not be paired."""
    from .profiles.base_layouts import value_pairs

    pairs, unpaired = value_pairs(profile, a, b, base)
    return list(dict.fromkeys((pair.own, pair.base) for pair in pairs)), unpaired


# --- into the report -------------------------------------------------------------------------------------


def attach_values(
    report: Report,
    a: Checkpoint,
    b: Checkpoint,
    *,
    base: Checkpoint | None = None,
    profile: Profile | None = None,
    offline: bool = False,
    progress: bool = False,
    notify: Notify | None = None,
) -> Report:
    """The report with ``values`` on every row both sides store with equal shapes, and findings about them."""
    from .report import Finding

    names = [
        (row.name, row.a.name or row.name, row.b.name or row.name)
        for row in report.tensors
        if row.a is not None and row.b is not None and row.a.shape == row.b.shape
    ]
    pairs, unpaired = embed_pairs_for(profile, base, a, b) if base is not None else ([], [])
    result = compare_values(
        a, b, names, base=base, embed_pairs=pairs, offline=offline, progress=progress, notify=notify
    )
    rows = tuple(
        replace(row, values=result.stats[row.name].to_dict()) if row.name in result.stats else row
        for row in report.tensors
    )
    findings = list(report.findings) + [Finding(*f) for f in value_findings(result)]
    findings += [Finding("info", "base_pair_unavailable", why) for why in unpaired]
    return replace(report, tensors=rows, findings=tuple(findings))


def value_findings(result: ValuesResult) -> list[tuple[str, str, str]]:
    """(severity, code, message) triples: identical files, the largest changes, embed checks against the base."""
    out: list[tuple[str, str, str]] = []
    for (file_a, file_b), digest in sorted(result.identical.items()):
        same = file_a if file_a == file_b else f"{file_a} (A) and {file_b} (B)"
        out.append(("info", "identical_file", f"{same}: same sha256 {digest[:12]}… on both sides; not read"))
    stats = result.stats
    changed = sorted((s.change, name) for name, s in stats.items() if not s.equal)
    changed.reverse()
    equal = sum(1 for s in stats.values() if s.equal)
    summary = f"{len(stats)} tensors compared by value: {equal} equal, {len(changed)} changed"
    if changed:
        top = ", ".join(f"{name} ({_describe(stats[name])})" for _, name in changed[:TOP_CHANGES])
        summary += f"; largest: {top}"
    out.append(("info", "values_changed" if changed else "values_equal", summary))
    for label, own, base_name, embed in result.embeds:
        if embed.equal:
            out.append(("info", "embed_matches_base", f"{label}'s {own} equals the base's {base_name}"))
            continue
        unrelated = embed.cosine is None or abs(embed.cosine) < 0.5
        severity = "error" if unrelated else "warning"
        why = "unrelated values (random or another model's?)" if unrelated else "trained away from the base"
        out.append((severity, "embed_differs_from_base",
                    f"{label}'s {own} differs from the base's {base_name}: {_describe(embed)}; {why}"))  # fmt: skip
    return out


def _describe(stats: ValueStats) -> str:
    parts = []
    if stats.rel_l2 is not None:
        parts.append(f"rel L2 {stats.rel_l2:.3g}")
    if stats.cosine is not None:
        parts.append(f"cos {stats.cosine:.6f}")
    if stats.max_abs is not None:
        parts.append(f"max |Δ| {stats.max_abs:.3g}")
    return ", ".join(parts) or (stats.note or "differs")
