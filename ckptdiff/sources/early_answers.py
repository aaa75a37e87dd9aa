"""Answers to calls sent before a run asks for them, by what was asked: the run takes each one instead of calling.

The ``ckptdiff`` command sends a Hub repo's listing call, then its first reads, while the CLI still loads
(:mod:`.hub_early`); the run's HubSource takes each answer (or the very error the call raised) by its key.
:func:`finish` ends the process's early calls when the command is done: those not started are cancelled, the
rest waited for, so nothing is still sending once the command has returned.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any

_answers: dict[Hashable, Future[Any]] = {}
_registered: list[Future[Any]] = []
_threads: list[threading.Thread] = []
_lock = threading.Lock()
_open = True


def register(key: Hashable) -> Future[Any] | None:
    """A future for the answer to ``key``, which a run takes by :func:`take`; None when one is already waiting
    to be taken (the run's second asker calls on its own, as it would have) or the early calls are finished."""
    with _lock:
        if not _open or key in _answers:
            return None
        future: Future[Any] = Future()
        _answers[key] = future
        _registered.append(future)
        return future


def take(key: Hashable) -> Future[Any] | None:
    """The early answer to ``key`` (once: the first asker takes it), or None: the caller makes the call."""
    with _lock:
        return _answers.pop(key, None)


def start(name: str, work: Callable[[], None]) -> None:
    """Run ``work`` on a daemon thread of its own (an early listing call and what follows from its answer)."""
    thread = threading.Thread(target=work, name=name, daemon=True)
    with _lock:
        _threads.append(thread)
    thread.start()


class Pool:
    """Up to ``workers`` daemon threads running early reads in submission order (daemons: a read the run never
    took does not hold up the interpreter's exit; :func:`finish` waits for it in the command's own time)."""

    def __init__(self, workers: int) -> None:
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._workers, self._started = max(1, workers), 0
        self._idle = threading.Semaphore(0)  # one a thread done with its work, not yet claimed by a submit

    def submit(self, future: Future[Any], call: Callable[[], Any]) -> None:
        """Run ``call`` for ``future`` (from :func:`register`): its result or its exception."""
        self._work.put((future, call))
        if self._idle.acquire(blocking=False):
            return  # a thread done with its work takes this
        with _lock:
            more = self._started < self._workers
            self._started += more
        if more:
            threading.Thread(target=self._serve, name="ckptdiff-early-read", daemon=True).start()

    def close(self) -> None:
        """Let every thread end once the work queued before this is done."""
        with _lock:
            started = self._started
        for _ in range(started):
            self._work.put(None)

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as err:  # noqa: BLE001 - handed to the run that takes this answer
                    future.set_exception(err)
            self._idle.release()


class HeaderReads(ThreadPoolExecutor):
    """A run's pool of header reads, where a read sent early is that read's own future (a source's
    ``early_read_header``), not a thread of the pool waiting on it."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if getattr(fn, "__name__", None) == "read_header":
            take = getattr(getattr(fn, "__self__", None), "early_read_header", None)
            early: Future[Any] | None = take(*args, **kwargs) if take is not None else None
            if early is not None:
                return early
        return super().submit(fn, *args, **kwargs)


_pool: Pool | None = None


def pool(workers: int) -> Pool:
    """The process's pool of early reads (one for every repo, as both sides of a run share one pool of reads)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = Pool(workers)
        return _pool


def finish() -> None:
    """No more early calls: cancel those not started, wait for those under way (each ends by its own deadline),
    and drop every answer not taken."""
    global _open, _pool
    with _lock:
        _open = False
        threads = list(_threads)
    for thread in threads:
        thread.join()
    with _lock:
        registered, closing = list(_registered), _pool
    for future in registered:
        future.cancel()
    wait_for(registered)
    if closing is not None:
        closing.close()
    with _lock:
        _answers.clear()
        _registered.clear()
        _threads.clear()
        _pool, _open = None, True
