"""On-disk memory of what a Hub repo looked like at a commit: its file listing and raw safetensors headers.

A commit never changes, so entries never expire. Layout, in ckptdiff's own folder under the Hugging Face home
(``$HF_HOME``, which defaults to ``$XDG_CACHE_HOME/huggingface``), apart from huggingface_hub's cache (whose
``hf cache`` commands would call a foreign folder there invalid)::

    $HF_HOME/ckptdiff/v2/models--{org}--{name}/
        refs/{revision}                  the commit a branch/tag pointed at when last resolved (for offline runs)
        {commit}/listing.json            every file of the commit: path, size, LFS sha256
        {commit}/headers/{path}.header   the first 8 + N bytes of a safetensors file (its whole header)
        {commit}/files/{path}            a small file read whole: config.json, the index

Every entry starts with the sha256 of what follows: an entry that fails it (a damaged disk, an edit that kept
its size) is a miss and is fetched again, never a wrong answer. Headers are validated again when loaded too.
Every write goes to a temporary file renamed into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import quote

from ..errors import SourceError
from .base import ListedFile, open_regular

CACHE_VERSION = "v2"
#: What the default branch is stored under in ``refs/`` (a real ref name cannot start with '@').
DEFAULT_REF = "@default"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_DIGEST_BYTES = hashlib.sha256().digest_size


def default_cache_folder() -> Path:
    """ckptdiff's own cache folder: ``$HF_HOME/ckptdiff`` (huggingface_hub's HF_HOME, so HF_HOME and
    XDG_CACHE_HOME move it)."""
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "ckptdiff"


class HeaderCache:
    """The cache folder of one repo. All methods swallow I/O problems: a cache that fails is just a miss."""

    def __init__(self, repo_id: str, folder: str | os.PathLike[str] | None = None) -> None:
        base = Path(folder) if folder is not None else default_cache_folder()
        self.root = base / CACHE_VERSION / ("models--" + repo_id.replace("/", "--"))

    # --- refs -------------------------------------------------------------------------------------------

    def _ref_path(self, revision: str | None) -> Path:
        return self.root / "refs" / quote(revision or DEFAULT_REF, safe="")

    def read_ref(self, revision: str | None) -> str | None:
        try:
            commit = _checked_read(self._ref_path(revision)).decode().strip()
        except (OSError, ValueError):
            return None
        return commit if _COMMIT.match(commit) else None

    def write_ref(self, revision: str | None, commit: str) -> None:
        _atomic_write(self._ref_path(revision), commit.encode())

    # --- listings ---------------------------------------------------------------------------------------

    def read_listing(self, commit: str) -> list[ListedFile] | None:
        if not _COMMIT.match(commit):
            return None
        try:
            document = json.loads(_checked_read(self.root / commit / "listing.json"))
            return [ListedFile(f["path"], f.get("size"), f.get("sha256")) for f in document["files"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def has_listing(self, commit: str) -> bool:
        """Whether a listing of ``commit`` is stored (not checked: :meth:`read_listing` does that)."""
        return _COMMIT.match(commit) is not None and (self.root / commit / "listing.json").is_file()

    def write_listing(self, commit: str, files: list[ListedFile]) -> None:
        document = {"commit": commit, "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in files]}
        _atomic_write(self.root / commit / "listing.json", json.dumps(document).encode())

    # --- headers ----------------------------------------------------------------------------------------

    def _header_path(self, commit: str, path: str) -> Path:
        return self.root / commit / "headers" / (quote(path, safe="") + ".header")

    def read_header(self, commit: str, path: str) -> bytes | None:
        try:
            return _checked_read(self._header_path(commit, path))
        except (OSError, ValueError):
            return None

    def write_header(self, commit: str, path: str, prefix: bytes) -> None:
        _atomic_write(self._header_path(commit, path), prefix)

    # --- small files (config.json, the index) -----------------------------------------------------------

    def _file_path(self, commit: str, path: str) -> Path:
        return self.root / commit / "files" / quote(path, safe="")

    def read_file(self, commit: str, path: str) -> bytes | None:
        try:
            return _checked_read(self._file_path(commit, path))
        except (OSError, ValueError):
            return None

    def write_file(self, commit: str, path: str, data: bytes) -> None:
        _atomic_write(self._file_path(commit, path), data)


_made_dirs: set[Path] = set()
_counter = itertools.count()


def _checked_read(path: Path) -> bytes:
    """An entry's content, or ValueError when it does not match the sha256 it starts with or is not a regular
    file: a pipe in an entry's place (a shared HF_HOME) would block the read, and the run, for ever; refused, the
    entry is fetched again and written over it."""
    try:
        with open_regular(path, str(path)) as handle:
            raw = handle.read()
    except SourceError as err:
        raise ValueError(err.line()) from None
    digest, data = raw[:_DIGEST_BYTES], raw[_DIGEST_BYTES:]
    if len(digest) != _DIGEST_BYTES or hashlib.sha256(data).digest() != digest:
        raise ValueError(f"{path}: checksum mismatch")
    return data


def _atomic_write(target: Path, data: bytes) -> None:
    """Write the sha256 of ``data`` and ``data`` to a temporary name unique to this process and thread, then
    rename it into place."""
    data = hashlib.sha256(data).digest() + data
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}-{next(_counter)}.part")
    try:
        if target.parent not in _made_dirs:
            target.parent.mkdir(parents=True, exist_ok=True)
            _made_dirs.add(target.parent)
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError:
        _made_dirs.discard(target.parent)  # a cache that fails costs requests next time, nothing else
