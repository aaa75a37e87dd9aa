"""Writing a plan: each shard's header, then every tensor streamed to its offsets in bounded memory.

A tensor whose input file is on this machine's disk is copied in the kernel (``copy_file_range``: its bytes never
pass through this process); one from the Hub or an object store is streamed through the single-tensor range read
(:mod:`ckptdiff.sources.tensor_read`), 8 MiB at a time, its sha256 taken on the way for the proof. A cast
(``d2t`` into the dtype the engine reads) is done on the tensor whole: a d2t is a few hundred kB.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CkptdiffError
from ..sources.base import Source
from ..sources.tensor_read import TENSOR_CHUNK, copy_tensor, read_tensor, read_tensor_chunks
from .layout import INDEX_FILE
from .plan import NUMPY_DTYPES, Plan, PlannedTensor


@dataclass
class Written:
    """What the write saw: the sha256 of each tensor that came through this process (remote inputs)."""

    digests: dict[str, str] = field(default_factory=dict)


def numpy_dtype(dtype: str) -> Any:
    import numpy as np

    spelled = NUMPY_DTYPES.get(dtype)
    if spelled is None:
        raise CkptdiffError("d2t", f"cannot cast a {dtype} tensor")
    if spelled == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(spelled)


def cast_values(data: bytes, stored: str, wanted: str, where: str) -> bytes:
    """A d2t's values in another dtype, refused if any value does not survive (not a whole number, out of range)."""
    import numpy as np

    values = np.frombuffer(data, dtype=numpy_dtype(stored))
    target = numpy_dtype(wanted)
    wide = values.astype(np.float64) if values.dtype.kind == "f" else values.astype(np.int64)
    if values.dtype.kind == "f" and not (np.isfinite(wide).all() and (wide == np.round(wide)).all()):
        raise CkptdiffError(where, f"d2t holds values that are not whole numbers: it cannot become {wanted}")
    info = np.iinfo(target)
    if wide.size and (wide.min() < info.min or wide.max() > info.max):
        raise CkptdiffError(where, f"d2t holds values outside {wanted}'s range")
    out: bytes = wide.astype(target).tobytes()
    return out


def write_plan(
    plan: Plan,
    folder: Path,
    sources: dict[str, Source],
    advance: Callable[[int], None] | None = None,
) -> Written:
    """Write ``plan`` into ``folder`` (it exists and is empty): shards, index, config.json. ``sources`` by side
    ("source", "base"); ``advance`` hears the bytes of each piece written."""
    written = Written()
    by_name = {t.name: t for t in plan.tensors}
    for shard in plan.shards.shards:
        out = os.open(folder / shard.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(out, shard.header, 0)
            for name in shard.names:
                tensor = by_name[name]
                offset = plan.shards.offsets[name][0]
                _write_tensor(tensor, sources[tensor.origin.side], out, offset, written, advance)
            os.ftruncate(out, shard.size)  # an empty last tensor still ends the file where the header says
            os.fsync(out)  # on disk before OUT is renamed into place (and a replaced OUT removed)
        finally:
            os.close(out)
    if plan.shards.indexed:
        write_durably(folder / INDEX_FILE, json.dumps(plan.shards.index(), indent=2) + "\n")
    write_durably(folder / "config.json", json.dumps(plan.config, indent=2, sort_keys=True) + "\n")
    return written


def write_durably(path: Path, text: str) -> None:
    """A small file of the output, written and flushed to disk (a new file: never one of the user's)."""
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(out, text.encode(), 0)
        os.fsync(out)
    finally:
        os.close(out)


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (files created or renamed in it) to disk, where the platform can."""
    try:
        handle = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows: no directory handles; its renames are journaled by the file system
    try:
        os.fsync(handle)
    except OSError:
        pass  # some file systems refuse fsync on a directory; nothing more can be done there
    finally:
        os.close(handle)


def _write_tensor(
    tensor: PlannedTensor,
    source: Source,
    out: int,
    offset: int,
    written: Written,
    advance: Callable[[int], None] | None,
) -> None:
    origin = tensor.origin.tensor
    if "cast" in tensor.transforms:
        data = cast_values(read_tensor(source, origin), origin.dtype, tensor.dtype, source.name_of(origin.file))
        _write_all(out, data, offset)
        if advance:
            advance(len(data))
        return
    if source.disk_path(origin.file) is not None:
        for count in copy_tensor(source, origin, out, offset, chunk_size=TENSOR_CHUNK):
            if advance:
                advance(count)
        return
    digest = hashlib.sha256()
    position = offset
    for piece in read_tensor_chunks(source, origin, chunk_size=TENSOR_CHUNK):
        digest.update(piece)
        _write_all(out, piece, position)
        position += len(piece)
        if advance:
            advance(len(piece))
    written.digests[tensor.name] = digest.hexdigest()


def _write_all(out: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        count = os.pwrite(out, view, offset)
        view, offset = view[count:], offset + count
