"""Value statistics (``--values``): did training change a tensor, and by how much? Needs ``ckptdiff[torch]``.

For every tensor both sides store with the same shape: exactly equal?, max |b−a|, mean |b−a|, cosine
similarity and relative L2 ‖b−a‖/‖a‖, computed in float32 (bf16, f16 and fp8 are widened first).

Memory: one tensor at a time, read in chunks of ``CHUNK_ELEMENTS`` into buffers allocated once (a raw and a
float32 chunk per side, and one for b − a), so the peak is a few chunks whatever the checkpoint's size. Bytes
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

import math
import re
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
#: Elements per chunk: 4 Mi float32 = 16 MiB per side and temporary.
CHUNK_ELEMENTS = 4 * 1024 * 1024
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


class _Accumulator:
    """Running sums over chunks: float32 per chunk, summed across chunks in Python floats.

    A chunk whose sums are not finite (NaN or infinity in the data, or a square overflowing float32) is
    summed again in float64 over the elements finite on both sides; the skipped ones are counted in the note.
    """

    def __init__(self, scratch: Any) -> None:
        self.scratch = scratch  # a reused float32 buffer for b − a
        self.equal = True
        self.max_abs = self.sum_abs = 0.0
        self.dot_ab = self.dot_aa = self.dot_bb = self.dot_dd = 0.0
        self.count = self.nonfinite = 0

    def add(self, torch: ModuleType, a: Any, b: Any, same_bytes: bool | None) -> None:
        """``a`` and ``b`` are float32 chunks; ``same_bytes`` is the raw comparison when the dtypes agree."""
        n = a.numel()
        if n == 0:
            return
        if same_bytes is None:
            same_bytes = bool(torch.equal(a, b))
        self.equal = self.equal and same_bytes
        sums = self._sums(torch, a, b, same_bytes, self.scratch)
        if not all(math.isfinite(value) for value in sums):
            a64, b64 = a.double(), b.double()
            finite = torch.isfinite(a64) & torch.isfinite(b64)
            kept = int(finite.sum())
            self.nonfinite += n - kept
            n = kept
            sums = self._sums(torch, a64[finite], b64[finite], same_bytes, None)
        dd, abs_sum, max_abs, ab, aa, bb = sums
        self.count += n
        self.dot_dd += dd
        self.sum_abs += abs_sum
        self.max_abs = max(self.max_abs, max_abs)
        self.dot_ab += ab
        self.dot_aa += aa
        self.dot_bb += bb

    @staticmethod
    def _sums(torch: ModuleType, a: Any, b: Any, same: bool, scratch: Any) -> tuple[float, ...]:
        """Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb² of one chunk."""
        if a.numel() == 0:
            return (0.0,) * 6
        if same:  # b is a: one dot product gives every sum
            square = float(torch.dot(a, a))
            return 0.0, 0.0, 0.0, square, square, square
        delta = torch.sub(b, a, out=scratch[: a.numel()]) if scratch is not None else b - a
        dd = float(torch.dot(delta, delta))
        delta.abs_()
        return (
            dd,
            float(delta.sum()),
            float(delta.max()),
            float(torch.dot(a, b)),
            float(torch.dot(a, a)),
            float(torch.dot(b, b)),
        )

    def stats(self, note: str | None = None) -> ValueStats:
        if self.nonfinite:
            skipped = f"{self.nonfinite} non-finite element(s) left out of the statistics"
            note = f"{note}; {skipped}" if note else skipped
        if self.equal:
            cosine = 1.0 if self.dot_aa > 0 else None
            return ValueStats(True, 0.0, 0.0, cosine, 0.0, note=note)
        norm_a, norm_b = math.sqrt(self.dot_aa), math.sqrt(self.dot_bb)
        cosine = self.dot_ab / (norm_a * norm_b) if norm_a > 0 and norm_b > 0 else None
        if cosine is not None:
            cosine = max(-1.0, min(1.0, cosine))
        rel_l2 = math.sqrt(self.dot_dd) / norm_a if norm_a > 0 else None
        mean_abs = self.sum_abs / self.count if self.count else None
        return ValueStats(False, self.max_abs, mean_abs, cosine, rel_l2, note=note)


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
    """Positioned reads of one file into a reusable buffer (the page cache is not the process's memory)."""

    def __init__(self, path: Path, where: str) -> None:
        self.path = path
        self.where = where
        try:
            self.handle = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by _Readers.close
        except OSError as err:
            raise SourceError(where, f"cannot read: {err.strerror or err}") from None
        self.buffer = bytearray()

    def read(self, offset: int, nbytes: int) -> memoryview:
        if len(self.buffer) < nbytes:
            self.buffer = bytearray(nbytes)
        view = memoryview(self.buffer)[:nbytes]
        self.handle.seek(offset)
        got = 0
        while got < nbytes:
            n = self.handle.readinto(view[got:])
            if not n:
                raise SourceError(self.where, f"file ends at byte {offset + got}, a tensor needs {offset + nbytes}")
            got += n
        return view


class _Side:
    """One checkpoint's files, opened on demand: local paths, or Hub files downloaded into the HF cache."""

    def __init__(self, label: str, checkpoint: Checkpoint, paths: Mapping[RelativePath, Path]) -> None:
        self.label = label
        self.checkpoint = checkpoint
        self.paths = paths
        self.readers: dict[RelativePath, _FileReader] = {}
        self.archives: dict[RelativePath, Any] = {}  # torch_pickle.TorchArchive per .bin/.pt file
        self.loaded: dict[RelativePath, Any] = {}  # torch.load(mmap=True) state dicts, strided tensors only
        self.wide: Any = None  # float32 chunk buffer
        self.delta: Any = None  # float32 scratch buffer

    def where(self, file: RelativePath) -> str:
        return str(self.paths.get(file, file))

    def reader(self, file: RelativePath) -> _FileReader:
        if file not in self.readers:
            self.readers[file] = _FileReader(self.paths[file], self.where(file))
        return self.readers[file]

    def chunks(self, torch: ModuleType, info: TensorInfo) -> Iterator[tuple[Any, memoryview | None]]:
        """(float32 chunk, its raw bytes or None) covering the tensor in CHUNK_ELEMENTS steps.

        Both are views of reused buffers, valid until the next step.
        """
        dtype = _torch_dtype(torch, info.dtype)
        if dtype is None:
            raise _NotComparable(f"dtype {info.dtype} has no torch equivalent")
        itemsize = dtype.itemsize
        strided = self._strided_tensor(torch, info)
        if strided is not None:
            flat = strided.reshape(-1)
            for start in range(0, info.numel, CHUNK_ELEMENTS):
                yield flat[start : start + CHUNK_ELEMENTS].to(torch.float32), None
            return
        reader = self.reader(info.file)
        begin = info.data_offsets[0]
        wide = self.buffer(torch)
        for start in range(0, info.numel, CHUNK_ELEMENTS):
            count = min(CHUNK_ELEMENTS, info.numel - start)
            raw = reader.read(begin + start * itemsize, count * itemsize)
            chunk = wide[:count]
            chunk.copy_(torch.frombuffer(raw, dtype=dtype))  # widened into the reused buffer: no allocation
            yield chunk, raw

    def scratch(self, torch: ModuleType) -> Any:
        """A second reusable float32 chunk, for b − a."""
        if self.delta is None or self.delta.numel() < CHUNK_ELEMENTS:
            self.delta = torch.empty(CHUNK_ELEMENTS, dtype=torch.float32)
        return self.delta

    def buffer(self, torch: ModuleType) -> Any:
        """This side's reusable float32 chunk (allocated once: fresh chunks each step fragment the heap)."""
        if self.wide is None or self.wide.numel() < CHUNK_ELEMENTS:
            self.wide = torch.empty(CHUNK_ELEMENTS, dtype=torch.float32)
        return self.wide

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


class _NotComparable(Exception):
    pass


def tensor_stats(torch: ModuleType, side_a: _Side, a: TensorInfo, side_b: _Side, b: TensorInfo) -> ValueStats:
    """Stream two equally shaped tensors chunk by chunk and accumulate their statistics."""
    same_dtype = a.dtype == b.dtype
    try:
        chunks = zip(side_a.chunks(torch, a), side_b.chunks(torch, b))
        total = _Accumulator(side_b.scratch(torch))
        for (chunk_a, raw_a), (chunk_b, raw_b) in chunks:
            same_bytes = None
            if same_dtype and raw_a is not None and raw_b is not None:
                same_bytes = _same_bytes(raw_a, raw_b)
            total.add(torch, chunk_a, chunk_b, same_bytes)
    except _NotComparable as reason:
        return _bytes_only(side_a, a, side_b, b, str(reason))
    note = None if same_dtype else f"{a.dtype} vs {b.dtype}, compared as float32"
    return total.stats(note)


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
        left = bytes(side_a.reader(a.file).read(a.data_offsets[0] + start, count))
        if left != side_b.reader(b.file).read(b.data_offsets[0] + start, count):
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
        for key, name_a, name_b in to_read:
            stats[key] = tensor_stats(torch, side_a, a.tensors[name_a], side_b, b.tensors[name_b])
        for label, own, base_name in embed_jobs:
            assert base is not None
            side = side_a if label == "A" else side_b
            result = tensor_stats(torch, sides[2], base.tensors[base_name], side, side.checkpoint.tensors[own])
            embeds.append((label, own, base_name, result))
    finally:
        for side in sides:
            side.close()
    return ValuesResult(stats, identical, tuple(embeds))


def embed_pairs_for(profile: Profile | None, base: Checkpoint) -> list[tuple[str, str]]:
    """Which of a side's tensors must equal which of the base's: the profile's injected weights, else embeds."""
    if profile is not None and profile.injected:
        return [(weight.name, weight.base_name) for weight in profile.injected if "embed" in weight.name]
    base_embeds = [name for name in base.tensors if name.endswith("embed_tokens.weight")]
    if len(base_embeds) != 1:
        return []
    return [("embed_tokens.weight", base_embeds[0]), ("model.embed_tokens.weight", base_embeds[0])]


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
    pairs = embed_pairs_for(profile, base) if base is not None else []
    result = compare_values(
        a, b, names, base=base, embed_pairs=pairs, offline=offline, progress=progress, notify=notify
    )
    rows = tuple(
        replace(row, values=result.stats[row.name].to_dict()) if row.name in result.stats else row
        for row in report.tensors
    )
    findings = list(report.findings) + [Finding(*f) for f in value_findings(result)]
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
