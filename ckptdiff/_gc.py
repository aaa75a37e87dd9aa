"""Pausing Python's cyclic garbage collector around bulk work.

A Kimi-K2 pair is ~1 M small acyclic objects (tensor infos, rows, report dicts). Each full collection walks
every one of them and frees nothing; on a 140 k-tensor comparison those passes took longer than the work.
Reference counting still frees everything; the collector resumes when the outermost pause ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """``with collector_paused():`` or ``@collector_paused()``; nested pauses leave the collector to the outer one."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
