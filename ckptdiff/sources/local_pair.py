"""Two large local checkpoints at once: side B is read in a forked child while this process reads side A.

Reading a 140 k-tensor checkpoint (decoding and validating 61 shard headers and the index) is pure-Python CPU
work, about a second a side; with a second core the two sides overlap. The child sends B back as plain columns
through a pipe (``marshal``: strings, numbers, tuples, lists, dicts), and this process rebuilds the records.

Anything unusual reads B here after A instead, so results and errors are exactly those of reading the sides one
after the other: no fork (not Linux), one core, other threads running, small checkpoints, or any failure in the
child (an invalid checkpoint, a value marshal cannot carry) — then B is read again here and raises its own error.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checkpoint import INDEX_SUFFIX, Checkpoint, FileInfo, TensorInfo

#: Index bytes from which a fork pays for itself (~1 MB is ~15 k tensors; Kimi-K2's index is ~10 MB).
MIN_INDEX_BYTES = 1 << 20


def read_pair(a: str, b: str, read: Callable[[str], Checkpoint]) -> tuple[Checkpoint, Checkpoint]:
    """``(read(a), read(b))``, overlapping the two reads when that is worth a process."""
    if not _worth_a_fork(b):
        return read(a), read(b)
    receive, send = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read B, send its columns, exit without running any of the parent's exit code
        status = 1
        try:
            os.close(receive)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: the parent reports it, once
            payload = marshal.dumps(to_columns(read(b)))
            with open(send, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(send)
    try:
        side_a = read(a)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(receive)
        raise  # A's error first, as when the sides are read in turn
    with open(receive, "rb") as incoming:
        payload = incoming.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return side_a, read(b)  # B's own error (or a child that could not send it), raised here
    return side_a, from_columns(marshal.loads(payload))


def _worth_a_fork(spec: str) -> bool:
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2 or threading.active_count() > 1:
        return False
    if not _COLUMNS_FIT:
        return False
    path = Path(spec).expanduser()
    if path.is_dir():
        indexes = [p for p in path.glob("*" + INDEX_SUFFIX) if p.is_file()]
        return len(indexes) == 1 and indexes[0].stat().st_size >= MIN_INDEX_BYTES
    return path.name.endswith(INDEX_SUFFIX) and path.is_file() and path.stat().st_size >= MIN_INDEX_BYTES


def to_columns(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint as marshal-able columns: the tensor fields as parallel lists, every other field as it is."""
    infos = list(checkpoint.tensors.values())
    columns = {f.name: getattr(checkpoint, f.name) for f in dataclasses.fields(Checkpoint)}
    columns["files"] = [dataclasses.astuple(file) for file in checkpoint.files]
    columns["metadata"] = {path: dict(values) for path, values in checkpoint.metadata.items()}
    columns["tensors"] = [list(checkpoint.tensors)] + [[getattr(info, name) for info in infos] for name in _INFO_FIELDS]
    return columns


def from_columns(columns: dict[str, Any]) -> Checkpoint:
    keys, *fields = columns.pop("tensors")
    infos = dict(zip(keys, map(TensorInfo, *fields)))
    files = tuple(FileInfo(*file) for file in columns.pop("files"))
    return Checkpoint(**columns, tensors=infos, files=files)


_INFO_FIELDS = TensorInfo.__struct_fields__
_COLUMNS_FIT = True
