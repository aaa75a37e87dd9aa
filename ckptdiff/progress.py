"""Progress bars on stderr for work that takes more than a second: a callback readers call, tqdm drawn lazily.

A reader takes a :data:`Progress` (or None: no bars) and asks it for a :class:`Bar` per piece of work::

    bar = progress("org/name", None, "shard")   # the total may be unknown at first
    bar.advance()                                # from any thread
    bar.set_total(61)
    bar.close()

:func:`terminal_progress` draws the bars with tqdm on a terminal's stderr, and only for work still running after
``DELAY`` seconds, so quick runs print nothing; tqdm is imported when the first bar is made.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

from .errors import printable_name

#: Seconds a piece of work runs before its bar appears.
DELAY = 1.0


class Bar(Protocol):
    def advance(self, amount: int = 1) -> None: ...

    def set_total(self, total: int | None) -> None: ...

    def close(self) -> None: ...


#: ``progress(label, total, unit)`` → a Bar; ``total`` None while unknown; ``unit`` "shard" or "B" (bytes).
Progress = Callable[[str, "int | None", str], Bar]


class _TqdmBar:
    """A tqdm bar that several threads may advance."""

    def __init__(self, label: str, total: int | None, unit: str, stream: IO[str]) -> None:
        from tqdm import tqdm

        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._bar: Any = tqdm(
            total=total,
            desc=printable_name(label),  # a spec or a path: written as names are, no escape acts on the terminal
            unit=unit,
            unit_scale=unit == "B",
            file=stream,
            leave=False,
            delay=DELAY,
            dynamic_ncols=True,
        )

    def advance(self, amount: int = 1) -> None:
        with self._lock:
            self._bar.update(amount)

    def set_total(self, total: int | None) -> None:
        with self._lock:
            self._bar.total = total
            if time.monotonic() - self._started >= DELAY:  # a bar past its delay is on screen: redraw it now
                self._bar.refresh()

    def close(self) -> None:
        with self._lock:
            self._bar.close()


class BytesBar:
    """A bar of ``progress`` fed as ``hook(bytes done, bytes in all)``, the way the --values pass reports; made
    at the first call (when the total is known) and closed by :meth:`close`."""

    def __init__(self, progress: Progress, label: str) -> None:
        self._progress = progress
        self._label = label
        self._bar: Bar | None = None
        self._done = 0
        self._total = 0
        self._closed = False

    def __call__(self, done: int, total: int) -> None:
        if self._closed:
            return
        if self._bar is None:
            self._bar, self._total = self._progress(self._label, total, "B"), total
        elif total != self._total:
            self._total = total
            self._bar.set_total(total)
        if done > self._done:
            self._bar.advance(done - self._done)
            self._done = done

    def close(self) -> None:
        if self._bar is not None and not self._closed:
            self._bar.close()
        self._closed = True


def terminal_progress(stream: IO[str] | None = None) -> Progress | None:
    """Bars on ``stream`` (stderr) when it is a terminal; None (no bars) when it is a file or a pipe."""
    out = stream if stream is not None else sys.stderr
    try:
        if not out.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or replaced stream
        return None

    def progress(label: str, total: int | None, unit: str) -> Bar:
        return _TqdmBar(label, total, unit, out)

    return progress
