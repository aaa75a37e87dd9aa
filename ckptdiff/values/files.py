"""Where --values gets each file's bytes: through the checkpoint's Source (local, Hub, object store); known sha256s."""

from __future__ import annotations

import atexit
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from ..checkpoint import Checkpoint, RelativePath
from ..errors import SourceError
from ..progress import Progress

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Notify = Callable[[str], None]


def file_sha256(checkpoint: Checkpoint, file: RelativePath) -> str | None:
    """A file's sha256 if known without reading it: the Hub listing, or its blob name in the HF cache."""
    for info in checkpoint.files:
        if info.path == file and info.sha256:
            return info.sha256.lower()
    path = local_path(checkpoint, file)
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
    import tempfile

    from ..sources import SourceOptions, source_of
    from ..sources import fetch_files as fetch

    wanted = sorted(set(files))
    source = source_of(checkpoint, SourceOptions(offline=offline))
    paths: dict[RelativePath, Path] = {}
    remote = []
    for file in wanted:
        local = source.local_path(file)
        if local is not None:
            paths[file] = local
        elif not source.remote:
            raise SourceError(checkpoint.location, f"file {file} is missing")
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
        where, into = source.name_of(), source.downloads_into
        notify(f"--values: downloading {len(remote)} file(s) of {label} ({where}), {total}, into {into}{also}")
    folder = Path(tempfile.mkdtemp(prefix=f"{label.replace(' ', '-')}-", dir=scratch_folder()))  # one per side
    paths.update(fetch(source, folder, remote, progress))
    return paths


def scratch_folder() -> Path:
    """Where an object store's weight files are downloaded for --values (by this process or its --jobs workers): one
    temporary folder a run, removed at exit (Ctrl-C and SIGTERM included: the CLI turns them into an unwinding)."""
    import shutil
    import tempfile

    global _SCRATCH
    if _SCRATCH is None:
        _SCRATCH = Path(tempfile.mkdtemp(prefix="ckptdiff-values-"))
        atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
    return _SCRATCH


_SCRATCH: Path | None = None


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
