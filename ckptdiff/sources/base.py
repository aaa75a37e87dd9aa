"""The one interface every checkpoint store implements (local disk, the Hub, object stores): files, bytes, names."""

from __future__ import annotations

import functools
import io
import os
import stat
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TypeAlias

import msgspec

from ..checkpoint import CONFIG_NAME, RelativePath, SourceKind, check_json_size
from ..errors import CkptdiffError, HeaderError, SourceError
from ..limits import MAX_JSON_BYTES
from ..progress import Progress
from ..safetensors_header import (
    LENGTH_PREFIX_BYTES,
    MAX_HEADER_BYTES,
    SafetensorsHeader,
    check_file_size,
    header_json,
    parse_header,
    read_header_length,
)
from .shared_shards import SharedShards

#: A seekable read-only handle on a weight file: the local file, or a remote one read through ranges.
ReadHandle: TypeAlias = "BinaryIO | RangeFile"
#: The first ranged read of a header: 97 % of the Hub's headers fit in 100 kB (huggingface_hub's measurement).
INITIAL_RANGE = 100_000


class ListedFile(msgspec.Struct, frozen=True):
    """One file of a checkpoint as its store lists it: no read needed to know its size or content hash."""

    path: str
    size: int | None
    sha256: str | None  # where the store keeps one (Hub LFS files)


class Listing(msgspec.Struct, frozen=True):
    """What a spec points at: the files of its folder (or repo, or prefix), and the one file it names, if any."""

    files: dict[RelativePath, ListedFile]
    named: RelativePath | None = None  # the spec named this file (a .safetensors, an index, a .bin)
    #: Its subfolders, where ``files`` is one level (a local folder, a store's prefix; a Hub listing has every file).
    folders: tuple[RelativePath, ...] = ()
    #: The names asked for one by one where nothing can be listed (a web server): ``files`` holds those found.
    asked: tuple[RelativePath, ...] = ()


class Described(msgspec.Struct, frozen=True):
    """How reports name a source: its kind, where it is, and the revision it was pinned to (commit, ETag)."""

    kind: SourceKind
    location: str
    revision: str | None


#: A symlink whose target does not exist (a Hugging Face cache snapshot whose blob was deleted, a folder copied
#: without what its links point to).
BROKEN_LINK = "is a broken symlink: the file it points to does not exist"


def open_regular(
    path: str | os.PathLike[str], where: str, *, buffering: int = -1, expected: str = "a file"
) -> BinaryIO:
    """A file on this machine opened for reading; refused in one line unless it is a regular file. A pipe put in
    a shard's place would block the open itself (a FIFO waits for a writer) and a device would never end, so the
    file is opened without blocking and its type checked on the open descriptor: nothing can be swapped in
    between the check and the reads."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as err:
        raise SourceError(where, BROKEN_LINK if os.path.islink(path) else f"cannot read: {err.strerror}") from None
    except OSError as err:
        raise SourceError(where, f"cannot read: {err.strerror or err}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise SourceError(where, f"is a folder, expected {expected}")
        if not stat.S_ISREG(mode):
            raise SourceError(where, "is not a regular file (a pipe, device or socket); not read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)  # a regular file's reads never wait; this keeps them plain
        return os.fdopen(descriptor, "rb", buffering=buffering)
    except BaseException:
        os.close(descriptor)
        raise


class Source(ABC):
    """A checkpoint's store. The planner (sources.planner) reads every store through these methods only.

    Implementations must be safe to call from several threads at once: the planner reads shards in parallel.
    """

    spec: str
    #: Whether reads wait on a network (then the planner overlaps them on a pool of ``jobs`` threads).
    remote: bool = True
    #: Header reads in flight at once.
    jobs: int = 8
    #: How to say a shard the index names is absent ("missing", "not in the repo").
    absent: str = "missing"
    #: Where fetch_to puts files that are not on disk yet (for the --values download note).
    downloads_into: str = "a temporary folder"
    #: Every read is at one revision that cannot change under the run (a Hub commit): no need to watch for rewrites.
    at_one_commit: bool = False
    #: Shards shared with the other side of a pair (:mod:`.shared_shards`).
    shared: SharedShards | None = None

    @property
    def display(self) -> str:
        """The spec as every output prints it: without credentials (``sources.display_spec``)."""
        from . import display_spec

        return display_spec(self.spec)

    @abstractmethod
    def list_files(self) -> Listing:
        """The checkpoint's files with their sizes (and content hashes where the store has them)."""

    @abstractmethod
    def read_range(self, file: RelativePath, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of a file (fewer at its end)."""

    @abstractmethod
    def name_of(self, file: RelativePath | None = None) -> str:
        """How error lines name a file of this source (or the source itself)."""

    @abstractmethod
    def describe(self, weights: RelativePath | None = None) -> Described:
        """The kind, location and pinned revision for reports (after list_files); ``weights`` is the file that
        defines the checkpoint (its index, or its first weight file), whose version a store shows."""

    def files_below(self, listing: Listing) -> list[RelativePath]:
        """Files in subfolders (``sub/model.safetensors``), for the hint when no weights are at the top: those a
        repo's listing holds; a store lists its ``listing.folders``."""
        return [path for path in listing.files if "/" in path]

    def spec_of(self, folder: RelativePath) -> str:
        """How the command line names this checkpoint's subfolder ``folder``."""
        return self.name_of(folder)

    def prepare(self) -> None:
        """Before the reads start on threads: load what they will need (a store's HTTP client), so that what the
        caller does meanwhile overlaps their round trips rather than their start. By default, nothing."""
        return None

    def finish_reading(self) -> None:
        """A read through the planner has ended (or failed): a source that keeps what it fetched in memory for its
        cache writes it now. By default, nothing."""
        return None

    def pin(self, revision: str | None) -> None:
        """Reopened after a read (for --values): take up the revision that read saw, without listing again."""
        return None  # a local folder has no revision

    def explain(self, err: BaseException) -> CkptdiffError | None:
        """A store library's exception as one line naming this source, or None for a bug (shown as one)."""
        return None

    def stat(self, file: RelativePath) -> ListedFile | None:
        """A file the listing may not show (an index's shard in a subfolder): its entry, or None if absent."""
        return None

    def is_folder(self, file: RelativePath) -> bool:
        """Whether a name no file has is a folder (a prefix) instead, for an error that says so. By default, no:
        a listing of every file (the Hub's) shows a folder by the files below it."""
        return False

    def config_beside(self) -> dict[RelativePath, ListedFile]:
        """config.json beside the one file a spec names (whose siblings are not listed): by name, or nothing."""
        config = self.stat(CONFIG_NAME)
        return {CONFIG_NAME: config} if config is not None else {}

    def read_small(self, file: ListedFile, *, what: str, error: type[CkptdiffError] = CkptdiffError) -> bytes:
        """A config.json or an index, whole; refused unread when it is bigger than any real one."""
        check_json_size(file.size, self.name_of(file.path), what=what, error=error)
        # one byte more than the listing's size: a file that grew since is seen, and a slow read's time limit
        # scales with the file, not with the cap
        data = self.read_range(file.path, 0, min(file.size, MAX_JSON_BYTES) + 1 if file.size else MAX_JSON_BYTES + 1)
        check_json_size(len(data), self.name_of(file.path), what=what, error=error)
        return data

    def read_header(self, file: ListedFile, first_range: int | None = None) -> SafetensorsHeader:
        """One safetensors file's header through ranged reads: one sized for typical headers, then the rest."""
        return self.decode_prefix(file, self.read_prefix(file, first_range))

    def decode_prefix(self, file: ListedFile, prefix: bytes) -> SafetensorsHeader:
        """The header in ``prefix`` (the file's 8-byte length and JSON, as read)."""
        source = self.name_of(file.path)
        raw = header_json(prefix, source=source, file_size=file.size)
        return self.decode_header(file.path, raw, source=source, size=file.size)

    def decode_header(self, path: RelativePath, raw: bytes, *, source: str, size: int | None) -> SafetensorsHeader:
        """The header whose JSON is ``raw``: decoded and validated, or the other side's decode of the same bytes
        when the pair shares shards (:mod:`.shared_shards`); the file's size is checked either way."""
        shared = self.shared
        if shared is None:
            return parse_header(raw, source=source, file_size=size)
        header = shared.header_for(path, raw)
        if header is not None:  # the other side's decode of these very bytes; only the file's size is this side's
            check_file_size(header, size, source=source)
            return header
        header = parse_header(raw, source=source, file_size=size)
        shared.remember(path, raw, header)
        return header

    def read_prefix(self, file: ListedFile, first_range: int | None = None) -> bytes:
        """The 8-byte length and the JSON header of a safetensors file: one read, then only the missing remainder."""
        source, size = self.name_of(file.path), file.size
        if size is not None and size < LENGTH_PREFIX_BYTES:
            read_header_length(b"", source=source, file_size=size)  # raises: too short
        first = first_range or INITIAL_RANGE
        stop = first if size is None else min(first, size)
        data = self.read_range(file.path, 0, max(stop, LENGTH_PREFIX_BYTES))
        need = LENGTH_PREFIX_BYTES + read_header_length(data[:LENGTH_PREFIX_BYTES], source=source, file_size=size)
        if len(data) < need:
            data += self.read_range(file.path, len(data), need)
        if len(data) < need:
            raise HeaderError(source, f"header truncated: the store sent {len(data)} of {need} bytes")
        return bytes(data[:need])

    def local_path(self, file: RelativePath) -> Path | None:
        """The file on this machine's disk, if it is there without downloading."""
        return None

    def disk_path(self, file: RelativePath) -> Path | None:
        """The file on this machine's disk to read directly, checked as this source's reads are (a local
        checkpoint's symlinks out of its folder are refused), or None: read it through :meth:`stream_range`."""
        return self.local_path(file)

    def fingerprint(self, file: RelativePath) -> tuple[object, ...] | None:
        """What a rewrite of ``file`` changes, asked afresh (for a run that must see its input change under it),
        or None when it is gone. A file on disk: (inode, size, mtime); a store overrides it with the version it
        reports; ``()`` where neither is known."""
        path = self.disk_path(file)
        if path is None:
            return ()
        try:
            status = os.stat(path)
        except OSError:
            return None
        return (status.st_ino, status.st_size, status.st_mtime_ns)

    def open_file(self, file: ListedFile) -> ReadHandle:
        """A seekable read-only handle (for zip archives): the local file, or ranged reads behind a small buffer."""
        local = self.local_path(file.path)
        if local is not None:
            return open_regular(local, self.name_of(file.path))
        if file.size is None:
            raise SourceError(self.name_of(file.path), "the store did not say how big this file is")
        return RangeFile(self, file.path, file.size)

    def stream_range(self, file: RelativePath, start: int, stop: int, chunk_size: int) -> Iterator[bytes]:
        """Bytes [start, stop) of a file in order, in pieces of at most ``chunk_size`` (a tensor's bytes, read in
        bounded memory: :mod:`.tensor_read`); fewer bytes than asked is an error. Here: one ranged read per
        piece (exactly the bytes asked for); a store that can stream one request's body overrides it."""
        position = start
        while position < stop:
            piece = self.read_range(file, position, min(stop, position + chunk_size))
            if not piece:
                got, want = position - start, stop - start
                raise SourceError(self.name_of(file), f"ends early: {got} of the {want} bytes asked for were there")
            position += len(piece)
            yield piece

    def copy_range(self, file: RelativePath, start: int, stop: int, out: int) -> int:
        """Bytes [start, stop) of a file written at the same offsets into the open file descriptor ``out`` (for
        fetch_to, from several threads at once); how many were written (fewer at the file's end)."""
        from .file_copy import pwrite_to_copy

        view = memoryview(self.read_range(file, start, stop))
        position = start
        while view:
            written = pwrite_to_copy(out, view, position)
            view, position = view[written:], position + written
        return position - start

    def fetch_to(
        self, folder: Path, files: Iterable[RelativePath], progress: Progress | None = None
    ) -> dict[RelativePath, Path]:
        """Local paths of these files: ones on disk as they are, others copied into ``folder`` (for --values) a
        few ranges at a time (:mod:`.file_copy`), with a bar of the bytes copied from ``progress``
        (:mod:`ckptdiff.progress`), or none."""
        paths: dict[RelativePath, Path] = {}
        remote: list[ListedFile] = []
        for file in files:
            local = self.local_path(file)
            if local is not None:
                paths[file] = local
            else:
                remote.append(self.stat(file) or ListedFile(file, None, None))
        if not remote:
            return paths
        from concurrent.futures import ThreadPoolExecutor

        from .file_copy import IN_FLIGHT, copy_file

        bar = progress(self.display, sum(entry.size or 0 for entry in remote), "B") if progress else None
        try:
            with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="ckptdiff-copy") as pool:
                for entry in remote:
                    target = folder / entry.path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    copy_range = functools.partial(self.copy_range, entry.path)
                    advance = bar.advance if bar is not None else None
                    copy_file(copy_range, entry.size, target, pool, where=self.name_of(entry.path), advance=advance)
                    paths[entry.path] = target
        finally:
            if bar is not None:
                bar.close()
        return paths


#: The smallest ranged read a RangeFile makes: zip readers ask for a few bytes at a time.
RANGE_BLOCK = 64 * 1024


class RangeFile(io.RawIOBase):
    """A remote file as a seekable read-only handle: each read becomes a ranged read of at least RANGE_BLOCK."""

    def __init__(self, source: Source, file: RelativePath, size: int) -> None:
        super().__init__()
        self.source, self.file, self.size = source, file, size
        self.position = 0
        self._buffer_start, self._buffer = 0, b""
        self._lock = threading.Lock()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    # io hands readinto any writable buffer; ours are the bytearray and byte memoryview io and zipfile pass
    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        with self._lock:
            count = min(len(buffer), max(0, self.size - self.position))
            if count == 0:
                return 0
            start, stop = self.position, self.position + count
            end = self._buffer_start + len(self._buffer)
            if not (self._buffer_start <= start and stop <= end):
                block = max(count, RANGE_BLOCK)
                self._buffer = self.source.read_range(self.file, start, min(self.size, start + block))
                self._buffer_start = start
                if len(self._buffer) < count:
                    count = len(self._buffer)
            offset = start - self._buffer_start
            buffer[:count] = self._buffer[offset : offset + count]
            self.position += count
            return count


@contextmanager
def explained_errors(source: Source) -> Iterator[None]:
    """A store's own exceptions (HTTP, cloud SDK) become the one-line error ``source.explain`` gives; a
    CkptdiffError passes as it is, and an exception ``explain`` does not know is a bug, raised as it is."""
    try:
        yield
    except CkptdiffError:
        raise
    except Exception as err:
        explained = source.explain(err)
        if explained is None:
            raise
        raise explained from None


def needed_from_prefix(data: bytes | bytearray) -> int | None:
    """How many bytes from the start of the file a header needs, once its 8-byte length has arrived (None for a
    length the reader would refuse anyway: then the caller stops at its range and the reader says why)."""
    if len(data) < LENGTH_PREFIX_BYTES:
        return None
    length = int.from_bytes(data[:LENGTH_PREFIX_BYTES], "little")
    return LENGTH_PREFIX_BYTES + length if length <= MAX_HEADER_BYTES else None
