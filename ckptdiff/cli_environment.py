"""The process environment the libraries read when they load, set by the CLI once click has accepted the command
line and before any of them is imported (never by an import of ckptdiff)."""

from __future__ import annotations

import os

#: Loggers of the object-store clients, which log failed attempts with their tracebacks on stderr (Python's
#: last-resort handler) before ckptdiff's own one line says what failed.
STORE_LOGGERS = ("gcsfs", "adlfs", "s3fs", "aiobotocore", "botocore", "fsspec", "aiohttp", "google", "azure")
#: The event loops under --scheduler's Dask client, which log a lost connection's traceback the same way.
LOOP_LOGGERS = ("tornado", "asyncio")


def set_environment(*, debug: bool, offline: bool) -> None:
    """What the libraries read from the environment when they load, set once the command line is accepted and
    before any of them is imported: huggingface_hub's verbosity (``--debug`` keeps its warnings) and offline mode
    (``--offline``: its own calls, downloads included, make no request either); one OpenBLAS thread (numpy's, under
    --values: the pass runs on its own threads, which OpenBLAS's would only compete with). The stores' and Dask's
    loggers print retries and lost connections ckptdiff reports in one line; ``--debug`` keeps them too."""
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if debug:
        return
    os.environ.setdefault("HF_HUB_VERBOSITY", "error")
    # dask.distributed sets up its own stderr logging when imported (--scheduler): a scheduler lost mid-pass is
    # ckptdiff's one line, not the client's tracebacks
    quiet = {name: "critical" for name in ("distributed", "distributed.client", "distributed.gc", "tornado")}
    os.environ.setdefault("DASK_LOGGING", repr(quiet))  # dask reads a literal from its DASK_* variables
    import logging

    for name in (*STORE_LOGGERS, *LOOP_LOGGERS):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())
            logger.propagate = False
