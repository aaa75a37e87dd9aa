"""A gate for the test servers' requests: the ones it matches wait at the server until the test lets them through.

    gate = RequestGate(lambda environ: environ["REQUEST_METHOD"] == "GET")
    s3.hooks.append(gate)        # moto's server (tests/store_servers.py) calls it with each request's WSGI environ;
                                 # the Hub emulator's hooks (tests/hub_emulator.py) with a Request: both work
    gate.wait_held(4)            # four requests are waiting now (the client has that many in flight)
    gate.let_through(1)          # one of them goes on; the others keep waiting
    gate.open()                  # every request goes on, held or still to come (also at a test's end)

    RequestGate(matches, until=3)  # opens by itself once 3 requests wait at once: a client that has them in flight
                                   # together passes, whatever the load (a smaller pool waits out HANG and fails)

A test that must act while a transfer is under way (a signal mid-download) waits for the state it needs instead of
sleeping and hoping: what it waits for is certain to come, so its long deadline is only a guard against a hang.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: Seconds a test waits for a state that is certain to come: a guard against a hang, never reached by a slow run.
HANG = 120.0


class RequestGate:
    """Holds the requests ``matches`` picks until :meth:`let_through` or :meth:`open` (or, with ``until``, until that
    many wait at once); counts them. A request held for HANG goes on anyway, so no server thread outlives a test."""

    def __init__(self, matches: Callable[[Any], bool], *, until: int | None = None) -> None:
        self.matches = matches
        self.until = until
        self.held = 0  # requests waiting at the gate now
        self.arrived = 0  # requests the gate has matched in all
        self._passes = 0
        self._open = False
        self._changed = threading.Condition()

    def __call__(self, request: Any) -> bool:
        """The server's hook: returns once the request may go on, False (the server answers it as usual)."""
        if not self.matches(request):
            return False
        with self._changed:
            self.arrived += 1
            self.held += 1
            if self.until is not None and self.held >= self.until:
                self._open = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._open or self._passes > 0, HANG)
            if not self._open and self._passes > 0:
                self._passes -= 1
            self.held -= 1
            self._changed.notify_all()
        return False

    def wait_held(self, count: int = 1) -> None:
        """Until ``count`` requests wait at the gate."""
        with self._changed:
            assert self._changed.wait_for(lambda: self.held >= count, HANG), f"{self.held} of {count} requests held"

    def let_through(self, count: int = 1) -> None:
        """``count`` held requests (or the next to come) go on; returns once they have left the gate."""
        with self._changed:
            self._passes += count
            self._changed.notify_all()
            assert self._changed.wait_for(lambda: self._passes == 0, HANG), "the held requests did not go on"

    def open(self) -> None:
        """Every request goes on from now on, those held included."""
        with self._changed:
            self._open = True
            self._changed.notify_all()
