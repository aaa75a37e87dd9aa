"""Where --values gets each file's bytes: through the checkpoint's Source (local, Hub, object store); known sha256s."""

from __future__ import annotations

import atexit
import hashlib
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from ..checkpoint import Checkpoint, RelativePath, TensorInfo
from ..errors import SourceError, disk_write_error, printable_name
from ..progress import Progress
from ..sources.file_copy import SCRATCH_HINT

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Notify = Callable[[str], None]

#: Where a file's sha256 came from: the Hub's LFS metadata of the revision read (the listing call, or the copy of
#: it ckptdiff keeps per commit). The only source trusted: a file name (an HF cache blob's) is never taken as one.
HUB_LFS = "hub_lfs"


def file_sha256(checkpoint: Checkpoint, file: RelativePath) -> str | None:
    """A file's sha256 if a source computed it (:data:`HUB_LFS`: the Hub's LFS metadata for the checkpoint's
    revision), else None: local files, object stores and the names of files in the HF cache say nothing."""
    if checkpoint.kind != "hub":
        return None
    for info in checkpoint.files:
        if info.path == file and info.sha256 and _SHA256.match(info.sha256.lower()):
            return info.sha256.lower()
    return None


def identical_files(a: Checkpoint, b: Checkpoint) -> dict[tuple[RelativePath, RelativePath], str]:
    """Pairs of files (one per side) with the same sha256 from :func:`file_sha256`, mapped to that hash."""
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


def local_path(checkpoint: Checkpoint, file: RelativePath) -> Path | None:
    """The file on this machine (a local checkpoint's, or a Hub file already in the HF cache), without a download."""
    from ..sources import source_of

    return source_of(checkpoint).local_path(file)


def fetch_files(
    checkpoint: Checkpoint,
    files: Iterable[RelativePath],
    *,
    label: str,
    offline: bool = False,
    progress: Progress | None = None,
    notify: Notify | None = None,
) -> dict[RelativePath, Path]:
    """Local paths of these files, through the checkpoint's Source: files on disk as they are, the others
    downloaded (a Hub side's into the HF cache, an object store's into a temporary folder), the total announced."""

    from ..sources import SourceOptions, source_of
    from ..sources import fetch_files as fetch

    wanted = sorted(set(files))
    source = source_of(checkpoint, SourceOptions(offline=offline))
    paths: dict[RelativePath, Path] = {}
    remote = []
    for file in wanted:
        local = source.local_path(file)
        if local is not None:
            check_cached(checkpoint, file, local)
            paths[file] = local
        elif not source.remote:
            raise SourceError(checkpoint.location, f"file {printable_name(file)} is missing")
        else:
            remote.append(file)
    if not remote:
        return paths
    if offline:  # nothing is downloaded, so nothing is announced
        from ..sources.hub_errors import OFFLINE_HINT

        defect = "not on this machine (not in the local cache) and offline mode is on"
        raise SourceError(source.name_of(remote[0]), defect, OFFLINE_HINT)
    if notify is not None:
        sizes = {info.path: info.size or 0 for info in checkpoint.files}
        total = _gib(sum(sizes.get(file, 0) for file in remote))
        also = f" ({len(paths)} already cached)" if paths else ""
        where, into = printable_name(source.name_of()), source.downloads_into
        notify(f"--values: downloading {len(remote)} file(s) of {label} ({where}), {total}, into {into}{also}")
    folder = _new_scratch(f"{label.replace(' ', '-')}-")  # one per side
    paths.update(fetch(source, folder, remote, progress))
    return paths


def check_cached(checkpoint: Checkpoint, file: RelativePath, path: Path) -> None:
    """A Hub file taken from the HF cache holds what the Hub lists for it: its sha256 is computed and compared with
    the LFS metadata (the cache's blob name is only a name: a snapshot edited in place keeps it). Refused in one
    line when it differs; never replaced (the edit may be the user's work)."""
    expected = file_sha256(checkpoint, file)
    if expected is None:
        return
    digest = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as handle:
            block = bytearray(2**20)
            view = memoryview(block)
            while size := handle.readinto(block):
                digest.update(view[:size])
    except OSError as err:
        raise SourceError(str(path), f"cannot read: {err.strerror or err}") from None
    if digest.hexdigest() != expected:
        raise SourceError(
            str(path),
            f"the Hugging Face cache's copy of {printable_name(file)} does not hold what the Hub lists for it at "
            f"{checkpoint.revision} (sha256 {digest.hexdigest()[:12]}…, not {expected[:12]}…: changed after download?)",
            "move it away to download it again",
        )


def scratch_folder() -> Path:
    """Where an object store's weight files are downloaded for --values (by this process or its --jobs workers): one
    temporary folder a run, removed at exit (Ctrl-C and SIGTERM included: the CLI turns them into an unwinding)."""
    import shutil
    import tempfile

    global _SCRATCH
    if _SCRATCH is None:
        try:
            _SCRATCH = Path(tempfile.mkdtemp(prefix="ckptdiff-values-"))
        except OSError as err:
            try:
                where = tempfile.gettempdir()
            except OSError:  # no usual folder took tempfile's test file either: all full, or none writable
                where = "the temporary folder"
            raise disk_write_error(err, where, SCRATCH_HINT) from None
        atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
    return _SCRATCH


_SCRATCH: Path | None = None


def _new_scratch(prefix: str) -> Path:
    """A fresh folder in the run's scratch folder; one line when the disk cannot take it."""
    import tempfile

    parent = scratch_folder()
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as err:
        raise disk_write_error(err, str(parent), SCRATCH_HINT) from None


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def fetch_tensors(
    checkpoint: Checkpoint,
    tensors: Iterable[TensorInfo],
    *,
    label: str,
    offline: bool = False,
    notify: Notify | None = None,
) -> tuple[dict[str, TensorInfo], dict[RelativePath, Path]]:
    """These tensors as the pass reads them, reading no more than their bytes: a file on this machine (a local
    checkpoint's, a Hub file already in the HF cache) as it is; from a Hub repo or a store, each tensor's byte
    range alone (``sources.tensor_read``, never the rest of its file) into a scratch file of its own.

    Returns the tensors by name (one read by its range: its scratch file, from offset 0) and the local path of
    each file they name."""

    from ..sources import SourceOptions, source_of
    from ..sources.tensor_read import read_tensor_chunks

    source = source_of(checkpoint, SourceOptions(offline=offline))
    placed: dict[str, TensorInfo] = {}
    paths: dict[RelativePath, Path] = {}
    remote: list[TensorInfo] = []
    for tensor in {t.name: t for t in tensors}.values():
        local = source.local_path(tensor.file)
        if local is not None:
            placed[tensor.name], paths[tensor.file] = tensor, local
        elif not source.remote:
            raise SourceError(checkpoint.location, f"file {tensor.file} is missing")
        else:
            remote.append(tensor)
    if not remote:
        return placed, paths
    if offline:
        from ..sources.hub_errors import OFFLINE_HINT

        defect = "not on this machine (not in the local cache) and offline mode is on"
        raise SourceError(source.name_of(remote[0].file), defect, OFFLINE_HINT)
    if notify is not None:
        total = _gib(sum(t.data_offsets[1] - t.data_offsets[0] for t in remote))
        where = printable_name(source.name_of())
        notify(f"--values: reading {len(remote)} tensor(s) of {label} ({where}) by their byte ranges, {total}")
    folder = _new_scratch(f"{label.replace(' ', '-')}-tensors-")
    for number, tensor in enumerate(remote):
        path = folder / f"{number}.tensor"
        try:
            with open(path, "wb") as out:
                for piece in read_tensor_chunks(source, tensor):
                    out.write(piece)
        except OSError as err:  # the scratch file's write: the tensor's reads say their own line (SourceError)
            path.unlink(missing_ok=True)
            raise disk_write_error(err, str(path), SCRATCH_HINT) from None
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        begin, end = tensor.data_offsets
        own = f"{tensor.file}#{tensor.name}"  # the pass's name for the scratch file, never one of the checkpoint's
        placed[tensor.name] = TensorInfo(tensor.name, tensor.dtype, tensor.shape, own, (0, end - begin))
        paths[own] = path
    return placed, paths
