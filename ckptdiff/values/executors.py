"""Where the --values pass runs: threads in this process, local worker processes (--jobs), or a Dask cluster.

The pass is cut into shard-pair tasks: the tensor pairs of one file of each side. A task names its files by the
checkpoint's spec and revision plus the paths the driver sees, never by an open handle, so a worker on another
machine opens them itself: a path it shares, or the Hub or a store through the same Source and credential chain.
Each tensor's statistics are computed wholly inside one task by :func:`.scheduling.pair_stats`, chunk by chunk in
the same order, so they are the same bits whichever executor ran them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..checkpoint import Checkpoint, RelativePath
from ..errors import CkptdiffError, SourceError
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
    scratch = tempfile.TemporaryDirectory(prefix="ckptdiff-values-", dir=task.scratch, ignore_cleanup_errors=True)
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
            raise SourceError(side.spec, f"file {file} is missing on this worker (give workers a shared path)")
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

        self.pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))

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


class DaskExecutor:
    """``--scheduler tcp://HOST:PORT``: tasks go to a running dask.distributed cluster, whose workers read the
    files themselves (one thread of the kernel per task: a worker runs ``--nthreads`` tasks at once)."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise CkptdiffError(
                "--scheduler", "needs dask.distributed, which is not installed", DASK_INSTALL_HINT
            ) from None
        try:
            self.client = Client(address, timeout="10s", set_as_default=False)
        except (OSError, TimeoutError) as err:
            raise CkptdiffError(f"--scheduler {address}", f"cannot reach the Dask scheduler: {err}") from None

    def run(self, tasks: list[ShardTask], progress: ProgressHook | None) -> Iterator[tuple[ShardTask, TaskResult]]:
        from distributed import as_completed

        futures = self.client.map(run_task, tasks, pure=False)
        order = {future.key: task for future, task in zip(futures, tasks, strict=True)}
        try:
            done = ((order[f.key], f.result()) for f in as_completed(futures, loop=self.client.loop))
            yield from _completed(done, tasks, progress)
        finally:
            self.client.cancel(futures)

    def close(self) -> None:
        self.client.close()


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
