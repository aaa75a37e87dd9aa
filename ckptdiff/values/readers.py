"""A tensor's bytes, chunk by chunk, into reused buffers: positioned reads, or torch.load for strided .bin tensors.

Not through safetensors' ``safe_open`` nor a memory map: every mapped page read stays in the process's resident
set until the kernel reclaims it, so a 2 GB file would cost ~2 GB of RSS. Plain positioned reads at the offsets
the headers give (safetensors) or the restricted unpickler found (torch zip archives, whose storages are stored
uncompressed) go through the page cache, which is not the process's memory.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoint import TORCH_SUFFIXES, Checkpoint, RelativePath, TensorInfo
from ..errors import CkptdiffError, SourceError, quoted_name
from ..sources.base import open_regular
from .dtypes import ValueType

if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType

    from ..sources.torch_pickle import TorchArchive

TORCH_INSTALL_HINT = "pip install 'ckptdiff[torch]'"


def require_torch(why: str = "--values") -> ModuleType:
    """Import torch, or fail with the one line saying how to get it."""
    try:
        return importlib.import_module("torch")  # a module whether or not mypy's environment has torch
    except ImportError:
        raise CkptdiffError(why, "needs torch, which is not installed", TORCH_INSTALL_HINT) from None


def is_torch_file(file: RelativePath) -> bool:
    return file.endswith(TORCH_SUFFIXES)


class FileReader:
    """Positioned reads of one file, each filling a whole reused bytearray (one sized for a full chunk, one for
    the shorter last chunk of a tensor): two reads compare with ``==`` (one memcmp), and nothing is allocated
    per chunk."""

    def __init__(self, path: Path, where: str) -> None:
        self.where = where
        self.handle = open_regular(path, where, buffering=0)  # closed by Side.close; never a pipe that blocks
        self.full = bytearray()
        self.tail = bytearray()
        self.size: int | None = None  # the file's length, looked up on the first place()

    def read(self, offset: int, nbytes: int) -> bytearray:
        buffer = self.buffer(nbytes)
        self.read_into(offset, memoryview(buffer))
        return buffer

    def buffer(self, nbytes: int) -> bytearray:
        """The reused buffer for reads of ``nbytes``."""
        if nbytes == len(self.full):
            return self.full
        if nbytes == len(self.tail):
            return self.tail
        if nbytes > len(self.full):
            self.full = bytearray(nbytes)
            return self.full
        self.tail = bytearray(nbytes)
        return self.tail

    def place(self, offset: int, nbytes: int) -> tuple[int, int, bytearray]:
        """(file descriptor, ``offset``, the reused buffer for ``nbytes``) for a kernel that reads the bytes
        itself, once the file is known to hold them (a file cut later gives the kernel a short read)."""
        if self.size is None:
            self.size = os.fstat(self.handle.fileno()).st_size
        if offset + nbytes > self.size:
            raise SourceError(self.where, f"file ends at byte {self.size}, a tensor needs {offset + nbytes}")
        return self.handle.fileno(), offset, self.buffer(nbytes)

    def read_into(self, offset: int, view: memoryview) -> None:
        """Fill ``view`` with the bytes from ``offset`` on."""
        got, nbytes = 0, len(view)
        while got < nbytes:
            n = _pread_into(self.handle, view[got:], offset + got)
            if not n:
                raise SourceError(self.where, f"file ends at byte {offset + got}, a tensor needs {offset + nbytes}")
            got += n


def _pread_into(handle: Any, view: memoryview, offset: int) -> int:
    """One positioned read into ``view``: os.preadv where the OS has it (one system call), else seek + readinto."""
    if hasattr(os, "preadv"):
        return os.preadv(handle.fileno(), [view], offset)
    handle.seek(offset)
    return handle.readinto(view) or 0


class Side:
    """One checkpoint's files (local paths, or Hub files already in the HF cache), opened on demand, and the
    float32 buffer its chunks are widened into. One thread at a time: :meth:`copy` gives another its own."""

    def __init__(self, label: str, checkpoint: Checkpoint | None, paths: Mapping[RelativePath, Path]) -> None:
        self.label = label
        self.checkpoint = checkpoint
        self.paths = paths
        self.readers: dict[RelativePath, FileReader] = {}
        self.archives: dict[RelativePath, TorchArchive] = {}
        self.loaded: dict[RelativePath, Any] = {}  # torch.load(mmap=True) state dicts, strided tensors only
        self.strided: tuple[TensorInfo, Any] | None = None  # the last strided tensor, flattened

    def where(self, file: RelativePath) -> str:
        return str(self.paths.get(file, file))

    def copy(self) -> Side:
        """The same files with handles and buffers of its own, for another thread."""
        return Side(self.label, self.checkpoint, self.paths)

    def read(self, info: TensorInfo, kind: ValueType, start: int, count: int) -> bytearray:
        """The bytes of elements ``start`` to ``start + count``: a reused buffer, valid until this side's next read."""
        if self.strided is None or self.strided[0] is not info:
            strided = self._strided_tensor(info)
            self.strided = (info, strided.reshape(-1)) if strided is not None else None
        if self.strided is not None:
            import torch

            return bytearray(self.strided[1][start : start + count].contiguous().view(torch.uint8).numpy())
        itemsize = kind.itemsize
        return self._reader(info.file).read(info.data_offsets[0] + start * itemsize, count * itemsize)

    def is_plain(self, info: TensorInfo) -> bool:
        """Whether the tensor's bytes are one run in its file (every safetensors tensor), read by :meth:`fill`."""
        if self.strided is None or self.strided[0] is not info:
            strided = self._strided_tensor(info)
            self.strided = (info, strided.reshape(-1)) if strided is not None else None
        return self.strided is None

    def buffer(self, info: TensorInfo, nbytes: int) -> bytearray:
        """The reused buffer :meth:`read` would return for ``nbytes`` of this tensor's file."""
        return self._reader(info.file).buffer(nbytes)

    def fill(self, info: TensorInfo, byte_start: int, view: memoryview) -> None:
        """``view`` filled with a plain tensor's bytes from ``byte_start`` on."""
        self._reader(info.file).read_into(info.data_offsets[0] + byte_start, view)

    def place(self, info: TensorInfo, byte_start: int, nbytes: int) -> tuple[int, int, bytearray]:
        """Where a plain tensor's ``nbytes`` from ``byte_start`` on lie, (file descriptor, offset in the file), and
        the reused buffer a kernel reads them into."""
        return self._reader(info.file).place(info.data_offsets[0] + byte_start, nbytes)

    def read_bytes(self, info: TensorInfo, start: int, nbytes: int) -> bytearray:
        return self._reader(info.file).read(info.data_offsets[0] + start, nbytes)

    def close(self) -> None:
        for reader in self.readers.values():
            reader.handle.close()
        self.readers.clear()
        self.loaded.clear()
        self.strided = None

    def _reader(self, file: RelativePath) -> FileReader:
        if file not in self.readers:
            self.readers[file] = FileReader(self.paths[file], self.where(file))
        return self.readers[file]

    def _strided_tensor(self, info: TensorInfo) -> Any | None:
        """A torch-archive tensor whose bytes are not one contiguous run: loaded through torch.load (mmap)."""
        if not is_torch_file(info.file):
            return None
        from ..sources import torch_pickle  # legacy archives only: pickle and zipfile stay out of a safetensors run

        if info.file not in self.archives:
            self.archives[info.file] = torch_pickle.read_archive(self.paths[info.file])
        archive = self.archives[info.file]
        if archive.big_endian:
            raise CkptdiffError(self.where(info.file), "is a big-endian torch archive; --values reads little-endian")
        if archive.records[info.name].contiguous:
            return None
        if info.file not in self.loaded:
            torch = require_torch(f"--values on {info.file}")
            try:
                self.loaded[info.file] = torch.load(self.paths[info.file], mmap=True, weights_only=True)
            except Exception as err:
                raise SourceError(self.where(info.file), f"torch.load(weights_only=True) refused it: {err}") from None
        loaded = self.loaded[info.file]
        for key in (None, *torch_pickle.STATE_DICT_KEYS):
            holder = loaded if key is None else loaded.get(key) if isinstance(loaded, dict) else None
            if isinstance(holder, dict) and info.name in holder:
                return holder[info.name]
        raise SourceError(self.where(info.file), f"torch.load found no tensor {quoted_name(info.name)}")
