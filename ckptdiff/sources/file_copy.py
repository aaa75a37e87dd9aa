"""Whole remote files copied to disk for --values: a few ranged reads in flight, each written at its own offset.

One read at a time leaves the link idle for every request's round trip and start-up; ``IN_FLIGHT`` reads of
``COPY_CHUNK`` bytes keep it busy while memory stays bounded (a store streams each body into the file as it
arrives, :func:`.store_reads.bounded_copy`; other sources hold at most one chunk per read). A file is written
under a temporary name and renamed only once every byte has arrived, so a failed copy never leaves a file that
looks complete: the partial one is removed, and the error is one line naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from ..errors import DiskWriteError, SourceError, disk_write_error

#: ``copy_range(start, stop, out)``: bytes [start, stop) of the file written at their offsets into the open file
#: descriptor ``out``; how many (``Source.copy_range`` for one file).
CopyRange = Callable[[int, int, int], int]

#: Bytes per ranged read when a whole file is copied.
COPY_CHUNK = 8 * 1024 * 1024
#: Ranged reads in flight at once for one file.
IN_FLIGHT = 4
#: What a copy's name ends with until its last byte has arrived.
PARTIAL_SUFFIX = ".partial"

#: What to do when a copy for --values cannot be written (copies go to a temporary folder under TMPDIR).
SCRATCH_HINT = "free space there, or point TMPDIR at a disk with room"


def pwrite_to_copy(out: int, data: memoryview, position: int) -> int:
    """``os.pwrite`` into a copy's file: a failure of the disk (full, a quota) is a :class:`DiskWriteError`, not a
    store's error; the copy names its file (:func:`copy_file`)."""
    try:
        return os.pwrite(out, data, position)
    except OSError as err:
        raise disk_write_error(err) from None


def copy_file(
    copy_range: CopyRange,
    size: int | None,
    target: Path,
    pool: ThreadPoolExecutor,
    *,
    where: str,
    advance: Callable[[int], None] | None = None,
) -> None:
    """A file of ``size`` bytes into ``target``, read as COPY_CHUNK ranges on ``pool`` (IN_FLIGHT threads) and
    written at their offsets; ``where`` names it in errors; ``advance`` is told the bytes of each range as it lands."""
    if size is None:
        raise SourceError(where, "the store did not say how big this file is")
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    try:
        out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as err:
        raise disk_write_error(err, str(partial), SCRATCH_HINT) from None
    try:
        ranges = iter(range(0, size, COPY_CHUNK))
        running: dict[Future[int], tuple[int, int]] = {}

        def start_next() -> None:
            start = next(ranges, None)
            if start is not None:
                stop = min(size, start + COPY_CHUNK)
                running[pool.submit(copy_range, start, stop, out)] = (start, stop)

        for _ in range(IN_FLIGHT):
            start_next()
        try:
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    start, stop = running.pop(future)
                    written = future.result()
                    if written != stop - start:
                        raise SourceError(
                            where,
                            f"the store sent {written} of {stop - start} bytes at offset {start} of {size}",
                            "the object may have changed while it was copied; retry",
                        )
                    if advance is not None:
                        advance(written)
                    start_next()
        finally:
            for future in running:  # after a failure: drop what has not started, let the running reads end
                future.cancel()
            wait(running)  # nothing may write into ``out`` once it is closed
    except BaseException as err:
        os.close(out)
        partial.unlink(missing_ok=True)
        if isinstance(err, DiskWriteError):  # the copy's own write failed: the disk, not the store
            raise err.at(str(partial), SCRATCH_HINT) from None
        raise
    os.close(out)
    os.replace(partial, target)
