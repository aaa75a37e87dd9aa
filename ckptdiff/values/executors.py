"""Where the --values pass runs: threads in this process, local worker processes (--jobs), or a Dask cluster.

The pass is cut into shard-pair tasks: the tensor pairs of one file of each side. A task names its files by the
checkpoint's spec and revision plus the paths the driver sees, never by an open handle, so a worker on another
machine opens them itself: a path it shares, or the Hub or a store through the same Source and credential chain.
Each tensor's statistics are computed wholly inside one task by :func:`.scheduling.pair_stats`, chunk by chunk in
the same order, so they are the same bits whichever executor ran them.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..checkpoint import Checkpoint, RelativePath
from ..errors import (
    DISK_WRITE_ERRNOS,
    CkptdiffError,
    DiskWriteError,
    SourceError,
    display_url,
    printable_name,
    remember_url_credentials,
    scrub_secrets,
)
from .readers import Side
from .scheduling import Pair, ProgressHook, pair_stats
from .statistics import ValueStats

DASK_INSTALL_HINT = "pip install 'ckptdiff[dask]'"


@dataclass(frozen=True)
class SideSpec:
    """One side as a worker finds it: the spec and revision it was read at, and the paths the driver saw."""

    label: str
    spec: str
    revision: str | None
    offline: bool = False
    paths: dict[RelativePath, str] = field(default_factory=dict)

    @classmethod
    def of(cls, side: Side, checkpoint: Checkpoint, offline: bool) -> SideSpec:
        paths = {file: str(path) for file, path in side.paths.items()}
        return cls(side.label, checkpoint.spec, checkpoint.revision, offline, paths)


@dataclass(frozen=True)
class ShardTask:
    """The pairs of one shard pair; ``positions`` are their places in the whole pass's list of pairs."""

    sides: tuple[SideSpec, ...]
    pairs: tuple[Pair, ...]
    positions: tuple[int, ...]
    kernel: str = "c"  # chosen once for the whole pass, so every task sums the same way
    #: Where the task copies a store's files: a folder of the driver's on this machine (--jobs: removed by the
    #: driver, even when it stops a worker mid-copy), or None: the worker's temporary folder (Dask).
    scratch: str | None = None

    @property
    def nbytes(self) -> int:
        return sum(pair.nbytes for pair in self.pairs)


def shard_tasks(
    sides: Sequence[SideSpec], pairs: Sequence[Pair], kernel: str = "c", scratch: str | None = None
) -> list[ShardTask]:
    """The pass's pairs grouped by (side and file of A, side and file of B), in first-seen order."""
    groups: dict[tuple[int, str, int, str], list[int]] = {}
    for position, pair in enumerate(pairs):
        groups.setdefault((pair.side_a, pair.a.file, pair.side_b, pair.b.file), []).append(position)
    return [
        ShardTask(tuple(sides), tuple(pairs[p] for p in positions), tuple(positions), kernel, scratch)
        for positions in groups.values()
    ]


#: What a task sends back: its statistics, or the one-line error a worker met (CkptdiffError does not pickle).
TaskResult = tuple[list[ValueStats], None] | tuple[None, tuple[str | None, str, str | None]]


def run_task(task: ShardTask, threads: int | None = 1) -> TaskResult:
    """A task on a worker: open its files (shared paths, else through the side's Source), compute its pairs."""
    sides: list[Side] = []
    # A store's files are copied here and removed with the task: a long-lived worker would otherwise keep every
    # shard it was ever given, the whole pair spread over the workers' disks.
    try:
        scratch = tempfile.TemporaryDirectory(prefix="ckptdiff-values-", dir=task.scratch, ignore_cleanup_errors=True)
    except OSError as err:  # this machine's disk (full, read-only): one line from the worker, as for a read
        from ..sources.file_copy import SCRATCH_HINT

        folder = task.scratch or tempfile.gettempdir()
        return None, (folder, f"cannot be written: {err.strerror or err}", SCRATCH_HINT)
    try:
        for index, spec in enumerate(task.sides):
            files = {pair.a.file for pair in task.pairs if pair.side_a == index}
            files |= {pair.b.file for pair in task.pairs if pair.side_b == index}
            sides.append(Side(spec.label, None, worker_paths(spec, files, Path(scratch.name))))
        return pair_stats(sides, list(task.pairs), threads=threads, kernel=task.kernel), None
    except CkptdiffError as err:
        return None, (err.where, err.defect, err.hint)
    finally:
        for side in sides:
            side.close()
        scratch.cleanup()


def worker_paths(side: SideSpec, files: set[RelativePath], scratch: Path) -> dict[RelativePath, Path]:
    """Local paths of ``files`` on this machine: the driver's where they exist here, else through the Source
    (a store's copied into a folder under ``scratch``, a Hub file into the worker's HF cache)."""
    paths: dict[RelativePath, Path] = {}
    for file in sorted(files):
        known = side.paths.get(file)
        if known is not None and Path(known).is_file():
            paths[file] = Path(known)
    missing = sorted(files - set(paths))
    if not missing:
        return paths
    from ..sources import SourceOptions, open_source
    from ..sources import fetch_files as fetch

    source = open_source(side.spec, SourceOptions(offline=side.offline))
    source.pin(side.revision)
    remote = []
    for file in missing:
        local = source.local_path(file)
        if local is not None and local.is_file():
            paths[file] = local
        elif not source.remote:
            raise SourceError(
                side.spec, f"file {printable_name(file)} is missing on this worker (give workers a shared path)"
            )
        else:
            remote.append(file)
    if remote:
        paths.update(fetch(source, scratch / side.label, remote))
    return paths


class Executor(Protocol):
    """Runs a pass's shard-pair tasks and yields each task with its statistics, in any order."""

    def run(
        self, tasks: list[ShardTask], progress: ProgressHook | None
    ) -> Iterator[tuple[ShardTask, TaskResult]]: ...  # pragma: no cover

    def close(self) -> None: ...  # pragma: no cover


class ProcessExecutor:
    """``--jobs N``: N local worker processes (spawned, each importing ckptdiff afresh), one task at a time each."""

    def __init__(self, processes: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            self.pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
        except OSError as err:  # its queues' locks are POSIX semaphores, files in shared memory (/dev/shm)
            if err.errno not in DISK_WRITE_ERRNOS:
                raise
            raise DiskWriteError(
                f"--jobs {processes}",
                f"cannot start the worker processes: {err.strerror or err}",
                "their locks live in shared memory (/dev/shm): free room there, or give --jobs 1",
            ) from None

    def run(self, tasks: list[ShardTask], progress: ProgressHook | None) -> Iterator[tuple[ShardTask, TaskResult]]:
        from concurrent.futures import as_completed

        futures = {self.pool.submit(run_task, task): task for task in tasks}
        try:
            yield from _completed(((futures[f], f.result()) for f in as_completed(futures)), tasks, progress)
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        """Stop the workers: idle after a complete pass; after an error or Ctrl-C, a task the pass no longer
        wants may still be running, and waiting for it would hold the interrupted run up for a whole shard."""
        # Python 3.14's terminate_workers() does this; before it, the pool's own table of its processes
        workers = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join()


#: How long --scheduler waits for the scheduler to answer a connection (documented in docs/values.md).
CONNECT_TIMEOUT = 10.0
#: How long a pass waits with no worker in the cluster before it gives up (the last one died, or none came); the
#: environment variable overrides it (the tests: a few seconds, not 15 each).
NO_WORKER_GRACE = 15.0
NO_WORKER_GRACE_VARIABLE = "CKPTDIFF_NO_WORKER_GRACE"
#: The biggest first message (a handshake: a few hundred bytes) a Dask scheduler sends on a new connection.
_MOST_HANDSHAKE_BYTES = 1 << 20


def no_worker_grace() -> float:
    """Seconds a pass waits with no worker: 15, or ``CKPTDIFF_NO_WORKER_GRACE`` (the tests set a few)."""
    try:
        return max(float(os.environ.get(NO_WORKER_GRACE_VARIABLE, "")), 0.0)
    except ValueError:
        return NO_WORKER_GRACE


class DaskExecutor:
    """``--scheduler tcp://HOST:PORT``: tasks go to a running dask.distributed cluster, whose workers read the
    files themselves (one thread of the kernel per task: a worker runs ``--nthreads`` tasks at once).

    Whatever is at the address, and whatever happens to the cluster during the pass, the run ends in one line:
    a server that is not a Dask scheduler or never answers (:func:`probe_scheduler`), a cluster left with no
    worker for :func:`no_worker_grace` seconds, a scheduler lost mid-pass."""

    def __init__(self, address: str) -> None:
        address = scheduler_address(address)
        self.where = f"--scheduler {display_url(address)}"
        try:
            from distributed import Client
        except ImportError:
            raise CkptdiffError(
                "--scheduler", "needs dask.distributed, which is not installed", DASK_INSTALL_HINT
            ) from None
        if address.startswith("tcp://"):
            probe_scheduler(address, self.where)
        try:
            self.client = Client(address, timeout=f"{CONNECT_TIMEOUT:g}s", set_as_default=False)
        except (OSError, TimeoutError) as err:
            raise CkptdiffError(self.where, f"cannot reach the Dask scheduler: {_one_line(err)}") from None
        except Exception as err:  # the library's own error for whatever answered: still one line
            raise CkptdiffError(self.where, f"not a Dask scheduler ({_one_line(err)})") from None

    def run(self, tasks: list[ShardTask], progress: ProgressHook | None) -> Iterator[tuple[ShardTask, TaskResult]]:
        futures = self.client.map(run_task, tasks, pure=False)
        order = {future.key: task for future, task in zip(futures, tasks, strict=True)}
        try:
            yield from _completed(self._finished(futures, order), tasks, progress)
        finally:
            self.client.cancel(futures)

    def _finished(self, futures: list[Any], order: dict[Any, ShardTask]) -> Iterator[tuple[ShardTask, TaskResult]]:
        """Each task as it finishes; between finishes, a watch on the cluster: the scheduler still connected,
        some worker in it. Any failure of the cluster's is one line naming the scheduler."""
        from distributed import as_completed

        finishing, alone_since, grace = as_completed(futures, loop=self.client.loop), None, no_worker_grace()
        while not finishing.is_empty():
            try:
                done = finishing.next_batch(block=False)
            except Exception as err:  # futures cancelled under us: the scheduler went away
                raise self._lost(err) from None
            for future in done:
                try:
                    result = future.result()
                except Exception as err:
                    raise self._lost(err) from None
                yield order[future.key], result
            if done:
                continue
            time.sleep(0.2)
            if self.client.status != "running":
                raise CkptdiffError(self.where, "lost the Dask scheduler mid-pass", "check the scheduler, then retry")
            if self.client.scheduler_info().get("workers"):
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since > grace:
                raise CkptdiffError(
                    self.where,
                    f"the Dask cluster has had no worker for {grace:g} s (the last one left mid-pass, or none joined)",
                    "start workers (dask worker ADDRESS), then retry",
                )

    def _lost(self, err: BaseException) -> CkptdiffError:
        if type(err).__name__ == "KilledWorker":
            return CkptdiffError(self.where, f"Dask workers died running a task ({_one_line(err)})")
        return CkptdiffError(self.where, f"the Dask pass failed: {_one_line(err)}", "check the scheduler, then retry")

    def close(self) -> None:
        try:
            self.client.close(timeout=CONNECT_TIMEOUT)
        except Exception:  # noqa: BLE001 - a scheduler already gone: nothing left to close
            pass


def _one_line(err: BaseException) -> str:
    return scrub_secrets(" ".join(f"{type(err).__name__}: {err}".split()))[:300]


def probe_scheduler(address: str, where: str) -> None:
    """Refuse, in one line, what is not a Dask scheduler at a tcp:// address before the Dask client meets it: a
    scheduler sends its handshake as soon as it accepts, a small message of a few frames. A server that accepts
    and sends nothing within :data:`CONNECT_TIMEOUT` (the Dask client would wait for ever), or sends anything else
    (a length the client would allocate: MemoryError), is not one."""
    import socket
    import struct

    host, port = urlsplit(address).hostname, urlsplit(address).port
    deadline = time.monotonic() + CONNECT_TIMEOUT
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT) as connection:
            length = struct.unpack("<Q", _receive(connection, 8, deadline))[0]
            if not 16 <= length <= _MOST_HANDSHAKE_BYTES:
                raise CkptdiffError(where, "not a Dask scheduler (its first message is not a Dask handshake)")
            frames = struct.unpack("<Q", _receive(connection, 8, deadline))[0]
            if not 1 <= frames <= 64:
                raise CkptdiffError(where, "not a Dask scheduler (its first message is not a Dask handshake)")
    except TimeoutError:
        raise CkptdiffError(
            where,
            f"accepted the connection but sent no Dask handshake within {CONNECT_TIMEOUT:g} s: not a Dask scheduler, "
            "or one that hangs",
        ) from None
    except EOFError:
        raise CkptdiffError(where, "not a Dask scheduler (it closed the connection without a handshake)") from None
    except OSError as err:
        raise CkptdiffError(where, f"cannot reach the Dask scheduler: {err.strerror or err}") from None


def _receive(connection: Any, count: int, deadline: float) -> bytes:
    data = b""
    while len(data) < count:
        connection.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


#: The transports a scheduler listens on that a client elsewhere can reach, as Dask spells them.
DASK_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_SCHEDULER_HINT = "tcp://HOST:PORT, or tls://HOST:PORT for a cluster secured with TLS"


def scheduler_address(address: str) -> str:
    """--scheduler's address as Dask takes it (``[scheme://]host:port``), else one line that never quotes the
    credentials a mistaken ``user:password@`` holds (Dask has no place for them: TLS secures a cluster)."""
    scheme, separator, rest = address.partition("://")
    scheme, rest = (scheme.lower(), rest) if separator else ("tcp", address)
    url = address if separator else f"tcp://{address}"  # a bare host:port is Dask's tcp, user:password@ included
    remember_url_credentials(url)
    where = f"--scheduler {display_url(url) if separator else display_url(url).removeprefix('tcp://')}"
    authority = rest.partition("/")[0]
    if "@" in authority:
        raise CkptdiffError(where, "a Dask address cannot carry credentials (user:password@)", _SCHEDULER_HINT)
    try:
        parsed = urlsplit(f"//{authority}")
        port = parsed.port
    except ValueError:
        parsed, port = None, None
    if scheme not in DASK_SCHEMES or parsed is None or not parsed.hostname or not port or rest.strip("/") != authority:
        raise CkptdiffError(where, "not a Dask scheduler address", _SCHEDULER_HINT)
    return f"{scheme}://{authority}"


def _completed(
    done: Iterator[tuple[ShardTask, TaskResult]], tasks: list[ShardTask], progress: ProgressHook | None
) -> Iterator[tuple[ShardTask, TaskResult]]:
    total = sum(task.nbytes for task in tasks)
    finished = 0
    if progress is not None:
        progress(0, total)
    for task, result in done:
        finished += task.nbytes
        if progress is not None:
            progress(finished, total)
        yield task, result


def run_distributed(
    executor: Executor,
    sides: Sequence[SideSpec],
    pairs: list[Pair],
    kernel: str,
    progress: ProgressHook | None = None,
    scratch: str | None = None,
) -> list[ValueStats]:
    """Every pair's statistics through ``executor``, in the order of ``pairs``; a worker's error raised here
    (``scratch``: see :attr:`ShardTask.scratch`)."""
    results: dict[int, ValueStats] = {}
    for task, (stats, error) in executor.run(shard_tasks(sides, pairs, kernel, scratch), progress):
        if error is not None:
            raise CkptdiffError(*error)
        assert stats is not None
        results.update(zip(task.positions, stats, strict=True))
    return [results[position] for position in range(len(pairs))]
