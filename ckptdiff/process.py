"""How a ckptdiff process behaves, set once at its entry: libraries quiet unless --debug, Ctrl-C as one line."""

from __future__ import annotations

import os
import signal
import sys
import threading

#: Loggers of the object-store clients, which log failed attempts with their tracebacks on stderr (Python's
#: last-resort handler) before ckptdiff's own one line says what failed.
STORE_LOGGERS = ("gcsfs", "adlfs", "s3fs", "aiobotocore", "botocore", "fsspec", "aiohttp", "google", "azure")


def prepare(args: list[str]) -> None:
    """Before anything else loads: huggingface_hub reads its verbosity at import, and the stores' loggers print
    retries ckptdiff reports in one line; ``--debug`` keeps both."""
    if "--debug" not in args:
        os.environ.setdefault("HF_HUB_VERBOSITY", "error")
        _quiet_store_loggers()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _interrupt)


def _quiet_store_loggers() -> None:
    import logging

    for name in STORE_LOGGERS:
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())
            logger.propagate = False


def _interrupt(signum: int, frame: object) -> None:
    """Ctrl-C: one line and exit 130 at once. Unwinding would wait for threads blocked on the network (their
    pools join them) until their timeout, and click would turn the KeyboardInterrupt into a bare "Aborted"."""
    sys.stderr.write("ckptdiff: interrupted\n")
    sys.stderr.flush()
    os._exit(130)
