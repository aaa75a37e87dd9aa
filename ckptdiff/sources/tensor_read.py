"""One tensor's bytes from any Source: exactly its byte range, streamed in bounded pieces.

``read_tensor_chunks(source, tensor)`` is the single-tensor range read every feature that needs a few tensors'
values uses (``convert`` grafting a base's embedding, ``--values-only``): a local file is read with positioned
reads, a Hub file with one ranged GET pinned to the commit (its body handed on as it arrives), an object store's
with ranged reads of ``chunk_size`` bytes. Only the tensor's bytes are asked for, never the rest of its file,
and at most ``chunk_size`` of them are held at once, so a 2.3 GB embedding costs 8 MiB of memory.
``copy_tensor`` writes one tensor into an open file at an offset (in the kernel, by ``copy_file_range``, when
both are on this machine's disk); ``read_tensor`` returns a small tensor whole (a ``d2t``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Generator, Iterator

from ..checkpoint import TensorInfo
from ..errors import SourceError, printable_name
from .base import Source, explained_errors

#: The most bytes of a tensor held in memory at once.
TENSOR_CHUNK = 8 * 1024 * 1024
#: copy_file_range errors that mean "not between these two files": fall back to reads and writes.
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.EPERM}
#: copy_file_range's failures that are the output's (a full disk, a quota, a file-size limit), never the input's.
_OUTPUT_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def read_tensor_chunks(source: Source, tensor: TensorInfo, *, chunk_size: int = TENSOR_CHUNK) -> Iterator[bytes]:
    """Exactly ``tensor``'s bytes (its ``data_offsets`` in its file), in order, in pieces of at most
    ``chunk_size``. A file that ends early, or a store's error, is one line naming the file (CkptdiffError)."""
    begin, end = tensor.data_offsets
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    got = 0
    with explained_errors(source):
        for piece in source.stream_range(tensor.file, begin, end, chunk_size):
            got += len(piece)
            if got > end - begin:
                raise SourceError(source.name_of(tensor.file), f"sent more than the {end - begin} bytes asked for")
            yield piece
    if got != end - begin:
        where = source.name_of(tensor.file)
        raise SourceError(where, f"{printable_name(tensor.name)}: {got} of its {end - begin} bytes were read")


def read_tensor(source: Source, tensor: TensorInfo, *, max_bytes: int = 64 * 1024 * 1024) -> bytes:
    """A small tensor's bytes whole (a ``d2t``); one bigger than ``max_bytes`` is refused unread."""
    begin, end = tensor.data_offsets
    if end - begin > max_bytes:
        where = source.name_of(tensor.file)
        raise SourceError(
            where, f"{printable_name(tensor.name)} is {end - begin} bytes, more than the {max_bytes} read whole"
        )
    return b"".join(read_tensor_chunks(source, tensor))


def copy_tensor(
    source: Source, tensor: TensorInfo, out: int, offset: int, *, chunk_size: int = TENSOR_CHUNK
) -> Iterator[int]:
    """Write ``tensor``'s bytes into the open file descriptor ``out`` from ``offset`` on, yielding the bytes
    written after each piece (for a progress bar, or a check between pieces). A file on this machine's disk is
    copied in the kernel (``copy_file_range``: no byte passes through this process); anything else is streamed
    through :func:`read_tensor_chunks`. A read that fails is a CkptdiffError naming the file; a write into ``out``
    that fails (a full disk) is the OSError, for the caller, which knows what ``out`` is."""
    begin, end = tensor.data_offsets
    path = source.disk_path(tensor.file)
    if path is not None and end > begin:
        copied = yield from _kernel_copy(str(path), source.name_of(tensor.file), begin, end, out, offset, chunk_size)
        if copied == end - begin:
            return
        begin, offset = begin + copied, offset + copied  # the kernel would not: the rest by reads and writes
        tensor = TensorInfo(tensor.name, tensor.dtype, tensor.shape, tensor.file, (begin, end))
    position = offset
    for piece in read_tensor_chunks(source, tensor, chunk_size=chunk_size):
        view = memoryview(piece)
        while view:
            written = os.pwrite(out, view, position)
            view, position = view[written:], position + written
        yield len(piece)


def _kernel_copy(
    path: str, where: str, begin: int, end: int, out: int, offset: int, chunk: int
) -> Generator[int, None, int]:
    """copy_file_range from ``path`` [begin, end) to ``out`` at ``offset``; returns how many bytes it copied
    (fewer than asked when the kernel cannot copy between these files: the caller goes on by hand)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise SourceError(where, f"cannot read: {err.strerror or err}") from None
    copied = 0
    try:
        while begin + copied < end:
            want = min(chunk * 8, end - begin - copied)
            try:
                done = os.copy_file_range(descriptor, out, want, begin + copied, offset + copied)
            except OSError as err:
                if err.errno in _NO_KERNEL_COPY and copied == 0:
                    return 0
                if err.errno in _OUTPUT_FULL:
                    raise  # the output's disk, not this file: as a pwrite into ``out`` would (the caller names it)
                raise SourceError(where, f"cannot copy: {err.strerror or err}") from None
            if done == 0:
                raise SourceError(where, f"ends early: {copied} of the {end - begin} bytes asked for were there")
            copied += done
            yield done
    finally:
        os.close(descriptor)
    return copied
