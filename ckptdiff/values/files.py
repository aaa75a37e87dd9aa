"""Where --values gets each file's bytes: local paths, Hub files downloaded into the HF cache, known sha256s."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, RelativePath
from ..errors import SourceError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Notify = Callable[[str], None]


def file_sha256(checkpoint: Checkpoint, file: RelativePath) -> str | None:
    """A file's sha256 if known without reading it: the Hub listing, or its blob name in the HF cache."""
    for info in checkpoint.files:
        if info.path == file and info.sha256:
            return info.sha256.lower()
    if checkpoint.kind == "hub":
        return None
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
        local = local_path(checkpoint, file)
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
        notify(
            f"--values: downloading {len(missing)} file(s) of {label} ({where}), {_gib(total)}, "
            f"into the Hugging Face cache{also}"
        )
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
