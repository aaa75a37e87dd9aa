"""Checkpoints on the local disk: a file (safetensors, index, torch archive) or a folder, as a Source."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..checkpoint import INDEX_SUFFIX, WEIGHT_FILE_SUFFIXES, RelativePath
from ..errors import HeaderError, SourceError
from ..safetensors_header import (
    LENGTH_PREFIX_BYTES,
    SafetensorsHeader,
    parse_header,
    read_header_length,
)
from .base import BROKEN_LINK, Described, ListedFile, Listing, ReadHandle, Source, open_regular


def read_header_file(path: Path, *, source: str | None = None) -> SafetensorsHeader:
    """Read only the header bytes of one safetensors file (never its tensor data)."""
    name = source or str(path)
    raw, size = _read_header_bytes(path, name)
    return parse_header(raw, source=name, file_size=size)


def _read_header_bytes(path: Path, name: str) -> tuple[bytes, int]:
    """A safetensors file's header JSON (checked for length, not yet decoded) and the file's size."""
    try:
        # unbuffered: not even a read-ahead of tensor data
        with open_regular(path, name, buffering=0, expected="a .safetensors file") as handle:
            size = os.fstat(handle.fileno()).st_size
            length = read_header_length(_read_exactly(handle, LENGTH_PREFIX_BYTES), source=name, file_size=size)
            raw = _read_exactly(handle, length)
    except OSError as err:
        raise SourceError(name, f"cannot read: {err.strerror or err}") from None
    if len(raw) != length:
        raise HeaderError(name, f"header truncated: {len(raw)} of {length} bytes")
    return raw, size


def _read_exactly(handle: BinaryIO, count: int) -> bytes:
    """``count`` bytes, or fewer at the end of the file (an unbuffered read may return less than asked)."""
    data = handle.read(count)
    while len(data) < count:
        more = handle.read(count - len(data))
        if not more:
            break
        data += more
    return data


#: Subfolders looked into for weights when a folder has none at its top (a hint only).
_MOST_SUBFOLDERS_SEEN = 64


class LocalSource(Source):
    """A checkpoint on this machine: a file (safetensors, index, torch archive) or a folder holding one."""

    remote = False

    def __init__(self, spec: str, path: Path, *, follow_symlinks: bool = False) -> None:
        self.spec = spec
        self.path = path
        try:
            self.folder = path.parent if path.is_file() else path
        except OSError as err:  # a name longer than the file system allows (ENAMETOOLONG), a denied lookup
            raise SourceError(spec, f"cannot be looked up: {err.strerror or err}") from None
        self.follow_symlinks = follow_symlinks
        self._named: RelativePath | None = None

    def _inside(self, file: RelativePath) -> Path:
        """The file's path, refused when it resolves outside the checkpoint's folder (a symlink to a credentials
        file would otherwise be read, and its bytes shown in a config table or an error). The file the spec
        names is the user's own choice; a Hugging Face cache snapshot's links into its repo's blobs are inside."""
        path = self.folder / file
        if self.follow_symlinks or (self._named == file and path == self.path):
            return path
        root, real = os.path.realpath(self.folder), os.path.realpath(path)
        if _within(real, root):
            return path
        if os.path.basename(os.path.dirname(root)) == "snapshots":  # .../models--org--name/snapshots/<commit>
            blobs = os.path.join(os.path.dirname(os.path.dirname(root)), "blobs")
            if _within(real, blobs):
                return path
        if not os.path.exists(real):  # a link into a disk not mounted: --follow-symlinks would not find it either
            raise SourceError(str(path), BROKEN_LINK)
        raise SourceError(
            str(path),
            "is a symlink to a file outside the checkpoint's folder; not read",
            "pass --follow-symlinks to read it anyway",
        )

    def list_files(self) -> Listing:
        path = self.path
        if not path.exists():
            raise SourceError(self.display, BROKEN_LINK if path.is_symlink() else "no such file or folder")
        if path.is_file():
            self._named = path.name
            named = ListedFile(path.name, path.stat().st_size, None)
            return Listing({path.name: named, **self.config_beside()}, named=path.name)
        if not path.is_dir():
            raise SourceError(str(path), "not a regular file or folder (a device, pipe or socket?)")
        return self._folder_listing()

    def _folder_listing(self) -> Listing:
        """The folder's files, by name, and its subfolders."""
        files = {}
        folders = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError as err:  # a folder this user may not list
            raise SourceError(str(self.folder), f"cannot be listed: {err.strerror or err}") from None
        for entry in entries:
            needed = entry.name == "config.json" or entry.name.endswith(WEIGHT_FILE_SUFFIXES)
            try:
                if entry.is_file():
                    files[entry.name] = ListedFile(entry.name, entry.stat().st_size, None)
                elif entry.is_dir():
                    folders.append(entry.name)
                elif needed and entry.is_symlink():  # a cache snapshot whose blob is gone: listed, so that the
                    files[entry.name] = ListedFile(entry.name, 0, None)  # read it is chosen for names it
            except OSError as err:  # a link in a loop (ELOOP), a file gone since the listing
                if needed:
                    raise SourceError(str(self.folder / entry.name), f"cannot be read: {err.strerror or err}") from None
                continue  # another file (a README linked in a loop) is nothing the checkpoint needs
        return Listing(files, folders=tuple(sorted(folders)))

    def files_below(self, listing: Listing) -> list[RelativePath]:
        """The files one folder down, in at most 64 of the listing's subfolders; in a Hugging Face cache repo's
        folder (``models--org--name``), those of each ``snapshots/<commit>``."""
        below: list[RelativePath] = []
        folders = list(listing.folders[:_MOST_SUBFOLDERS_SEEN])
        if "snapshots" in folders and "blobs" in folders:
            try:
                commits = sorted(e.name for e in os.scandir(self.folder / "snapshots") if e.is_dir())
            except OSError:
                commits = []
            folders += [f"snapshots/{commit}" for commit in commits[:_MOST_SUBFOLDERS_SEEN]]
        for name in folders:
            try:
                below += [f"{name}/{entry.name}" for entry in os.scandir(self.folder / name) if entry.is_file()]
            except OSError:  # only a hint: a folder that cannot be read is left out
                continue
        return below

    def stat(self, file: RelativePath) -> ListedFile | None:
        try:
            status = (self.folder / file).stat()
        except OSError:
            return None
        return ListedFile(file, status.st_size, None) if stat.S_ISREG(status.st_mode) else None

    def is_folder(self, file: RelativePath) -> bool:
        try:
            return stat.S_ISDIR((self.folder / file).stat().st_mode)
        except OSError:
            return False

    def read_range(self, file: RelativePath, start: int, stop: int) -> bytes:
        path = self._inside(file)
        try:
            with open_regular(path, self.name_of(file)) as handle:
                stop = min(stop, os.fstat(handle.fileno()).st_size)  # no buffer sized for a 100 MB cap
                handle.seek(start)
                return handle.read(max(0, stop - start))
        except OSError as err:
            raise SourceError(self.name_of(file), f"cannot read: {err.strerror or err}") from None

    def disk_path(self, file: RelativePath) -> Path | None:
        return self._inside(file)

    def stream_range(self, file: RelativePath, start: int, stop: int, chunk_size: int) -> Iterator[bytes]:
        return pieces_of(self._inside(file), self.name_of(file), start, stop, chunk_size)

    def read_header(self, file: ListedFile, first_range: int | None = None) -> SafetensorsHeader:
        path = self._inside(file.path)
        name = str(path)
        raw, size = _read_header_bytes(path, name)
        return self.decode_header(file.path, raw, source=name, size=size)

    def open_file(self, file: ListedFile) -> ReadHandle:
        self._inside(file.path)
        return super().open_file(file)

    def local_path(self, file: RelativePath) -> Path | None:
        candidate = self.folder / file
        return candidate if candidate.exists() else None

    def name_of(self, file: RelativePath | None = None) -> str:
        return str(self.folder / file) if file else str(self.path)

    def describe(self, weights: RelativePath | None = None) -> Described:
        location = self.path if self._named and not self._named.endswith(INDEX_SUFFIX) else self.folder
        return Described("local", str(location), None)


def pieces_of(path: Path, where: str, start: int, stop: int, chunk_size: int) -> Iterator[bytes]:
    """Bytes [start, stop) of a file on disk, in pieces of at most ``chunk_size`` (positioned reads, no buffer of
    the file's size); a file that ends before ``stop`` is an error naming it."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise SourceError(where, f"cannot read: {err.strerror or err}") from None
    try:
        position = start
        while position < stop:
            try:
                piece = os.pread(descriptor, min(chunk_size, stop - position), position)
            except OSError as err:
                raise SourceError(where, f"cannot read: {err.strerror or err}") from None
            if not piece:
                got, want = position - start, stop - start
                raise SourceError(where, f"ends early: {got} of the {want} bytes asked for were there")
            position += len(piece)
            yield piece
    finally:
        os.close(descriptor)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
