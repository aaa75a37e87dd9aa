"""On-disk memory of what a Hub repo looked like at a commit: its file listing and raw safetensors headers.

A commit never changes, so entries never expire. Layout, in ckptdiff's own folder under the Hugging Face home
(``$HF_HOME``, which defaults to ``$XDG_CACHE_HOME/huggingface``), apart from huggingface_hub's cache (whose
``hf cache`` commands would call a foreign folder there invalid)::

    $HF_HOME/ckptdiff/v3/models--{org}--{name}/
        refs/{revision}                  the commit a branch/tag pointed at when last resolved (for offline runs;
                                         the default branch under both @default and main)
        {commit}/listing.json            every file of the commit: path, size, LFS sha256
        {commit}/packs/{id}.pack         what one run fetched of the commit: the first 8 + N bytes of each
                                         safetensors file read (its whole header), and the small files read
                                         whole (config.json, the index)

A run keeps what it fetches in memory and writes it when its read ends (:meth:`HeaderCache.flush`): one pack,
not a file per shard. Creating a file costs the kernel far more than writing its bytes (0.7 ms of CPU a file on
the machine of docs/performance.md, 70 ms for a 100-shard pair, in the middle of the run's requests). Packs are
read in the order they were written, a later entry for a path replacing an earlier one; a commit that gathers
``HeaderCache.MAX_PACKS`` packs has them merged into one on the next write.

Every file starts with the sha256 of what follows: a file that fails it (a damaged disk, an edit that kept its
size) is a miss and is fetched again, never a wrong answer. Headers are validated again when loaded too. Every
write goes to a temporary file renamed into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import threading
import time
from pathlib import Path
from urllib.parse import quote

from ..errors import SourceError
from .base import ListedFile, open_regular

CACHE_VERSION = "v3"
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

    #: Packs of a commit at which a write merges them into one: a run reads every pack of a commit it looks at.
    MAX_PACKS = 8

    def __init__(self, repo_id: str, folder: str | os.PathLike[str] | None = None) -> None:
        base = Path(folder) if folder is not None else default_cache_folder()
        self.root = base / CACHE_VERSION / ("models--" + repo_id.replace("/", "--"))
        self._lock = threading.Lock()
        self._loaded: dict[str, dict[EntryKey, bytes]] = {}  # commit → its packs' entries and this run's
        self._packs: dict[str, tuple[list[str], list[str]]] = {}  # commit → its packs' names: loaded, damaged
        self._pending: dict[str, dict[EntryKey, bytes]] = {}  # commit → entries kept since the last flush
        self._files: list[tuple[Path, bytes]] = []  # listings and refs to write at the next flush

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
        with self._lock:
            self._files.append((self._ref_path(revision), commit.encode()))

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
        with self._lock:
            self._files.append((self.root / commit / "listing.json", json.dumps(document).encode()))

    # --- headers and small files (config.json, the index): kept in packs ---------------------------------

    def read_header(self, commit: str, path: str) -> bytes | None:
        return self._entries(commit).get((HEADER, path))

    def write_header(self, commit: str, path: str, prefix: bytes) -> None:
        self._keep(commit, (HEADER, path), prefix)

    def read_file(self, commit: str, path: str) -> bytes | None:
        return self._entries(commit).get((FILE, path))

    def write_file(self, commit: str, path: str, data: bytes) -> None:
        self._keep(commit, (FILE, path), data)

    def flush(self) -> None:
        """Write what was kept since the last flush: the listings and refs, and one pack a commit (merging the
        packs it replaces)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            files, self._files = self._files, []
        for path, data in files:
            _atomic_write(path, data)
        for commit, entries in pending.items():
            folder = self.root / commit / "packs"
            loaded, damaged = self._packs.get(commit, ([], []))
            replaced = list(damaged)  # fetched again: the new pack holds what they failed to
            if len(loaded) + 1 >= self.MAX_PACKS:
                entries = {**self._entries(commit), **entries}
                replaced += loaded
            name = f"{time.time_ns():016x}-{os.getpid()}-{next(_counter)}.pack"
            if not _atomic_write(folder / name, _pack(entries)):
                continue
            for old in replaced:
                with contextlib.suppress(OSError):
                    os.unlink(folder / old)
            self._packs[commit] = ([*(old for old in loaded if old not in replaced), name], [])

    def _keep(self, commit: str, key: EntryKey, data: bytes) -> None:
        entries = self._entries(commit)
        with self._lock:
            entries[key] = data
            self._pending.setdefault(commit, {})[key] = data

    def _entries(self, commit: str) -> dict[EntryKey, bytes]:
        """Every entry of ``commit``'s packs (loaded once), with what this run kept since."""
        with self._lock:
            loaded = self._loaded.get(commit)
            if loaded is None:
                loaded = self._loaded[commit] = {}
                if _COMMIT.match(commit):
                    self._packs[commit] = _load_packs(self.root / commit / "packs", loaded)
            return loaded


HEADER, FILE = "header", "file"
EntryKey = tuple[str, str]
_made_dirs: set[Path] = set()
_counter = itertools.count()


def _pack(entries: dict[EntryKey, bytes]) -> bytes:
    """A pack's content: a JSON table of contents (each entry's kind, path and length) on its first line, then
    the entries' bytes one after another."""
    keys = list(entries)
    contents = json.dumps([[kind, path, len(entries[kind, path])] for kind, path in keys]).encode()
    return b"".join([contents, b"\n", *(entries[key] for key in keys)])


def _load_packs(folder: Path, into: dict[EntryKey, bytes]) -> tuple[list[str], list[str]]:
    """The entries of every sound pack in ``folder`` into ``into``, oldest first; the names of the packs read
    and of those that failed their checks (a damaged disk, an edit, a FIFO in a shared HF_HOME)."""
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".pack"))
    except OSError:
        return [], []
    read, damaged = [], []
    for name in names:
        try:
            data = _checked_read(folder / name)
            contents, _, body = data.partition(b"\n")
            offset, entries = 0, {}
            for kind, path, length in json.loads(contents):
                if kind not in (HEADER, FILE) or not isinstance(path, str) or not isinstance(length, int):
                    raise ValueError(f"{name}: a malformed entry")
                if length < 0 or offset + length > len(body):
                    raise ValueError(f"{name}: an entry past the end")
                entries[kind, path] = body[offset : offset + length]
                offset += length
        except (OSError, ValueError, TypeError):
            damaged.append(name)  # a miss for each of its entries, removed once they are written again
            continue
        into.update(entries)
        read.append(name)
    return read, damaged


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


def _atomic_write(target: Path, data: bytes) -> bool:
    """Write the sha256 of ``data`` and ``data`` to a temporary name unique to this process and thread, then
    rename it into place; False when that failed (a cache that fails costs requests next time, nothing else)."""
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
        _made_dirs.discard(target.parent)
        return False
    return True
