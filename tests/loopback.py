"""What the loopback test servers (the Hub emulator, tests/store_servers.py's web server) share: how their loop runs."""

from __future__ import annotations

import threading
from socketserver import BaseServer

#: How often a server's loop looks for shutdown(), which waits for it: every test that uses a server stops one (the
#: standard library's default, 0.5 s, was waited out at each stop).
STOP_POLL = 0.01


def serve_in_background(server: BaseServer) -> threading.Thread:
    """``server``'s loop, started on a daemon thread that looks for shutdown() every STOP_POLL seconds."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": STOP_POLL}, daemon=True)
    thread.start()
    return thread
