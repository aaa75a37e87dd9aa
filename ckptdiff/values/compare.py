"""The whole --values pass: which tensors to read, which files are identical by hash, the files fetched, stats."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..checkpoint import Checkpoint, RelativePath
from ..progress import BytesBar, Progress
from .base import EmbedJob, embed_jobs
from .files import Notify, check_cached, fetch_files, identical_files, local_path
from .readers import Side, is_torch_file, require_torch
from .scheduling import Pair, ProgressHook, choose_kernel, pair_stats
from .statistics import IDENTICAL_BY_HASH, ValueStats

#: The pass's sides, in this order, and how a download announces each.
SIDE_LABELS = ("A", "B", "base")
ANNOUNCED_AS = ("A", "B", "the base")


@dataclass(frozen=True)
class ValuesOptions:
    """Where the pass runs and who hears how far it got.

    ``jobs``: that many local worker processes (``--jobs`` given with ``--values``); ``scheduler``: a
    dask.distributed scheduler's address (``--scheduler``), whose workers read the files themselves; neither:
    threads in this process, as many as the cores free. ``on_progress(bytes done, bytes in all)`` is called as
    the pass goes (both sides' bytes; per chunk in-process, per shard pair elsewhere).
    """

    jobs: int | None = None
    scheduler: str | None = None
    on_progress: ProgressHook | None = None


@dataclass(frozen=True)
class ValuesResult:
    stats: dict[str, ValueStats]  # row name → stats
    identical: dict[tuple[RelativePath, RelativePath], str]  # (file in A, file in B) → shared sha256
    embeds: tuple[tuple[str, str, str, ValueStats], ...]  # (side label, its tensor, base tensor, stats)
    #: The revisions (commits) of A and B whose Hub LFS metadata gave the shared sha256s (files.HUB_LFS)
    revisions: tuple[str | None, str | None] = (None, None)


def compare_values(
    a: Checkpoint,
    b: Checkpoint,
    names: Iterable[str | tuple[str, str, str]],
    *,
    base: Checkpoint | None = None,
    embed_pairs: Iterable[tuple[str, str]] = (),
    offline: bool = False,
    progress: Progress | None = None,
    notify: Notify | None = None,
    options: ValuesOptions | None = None,
) -> ValuesResult:
    """Statistics for ``names`` (tensors in both with equal shapes) and, with a base, the embed checks.

    A name is one tensor name, or (key, name in A, name in B) when the sides name it differently; results
    are keyed by it. ``embed_pairs`` are (tensor name in a side, tensor name in the base) pairs. Reading a
    .bin/.pt file's values needs torch (checked before anything is downloaded); safetensors need only numpy.
    ``progress`` draws the download bars and a bar of the bytes compared (:mod:`ckptdiff.progress`);
    ``options`` says where the pass runs (:class:`ValuesOptions`).
    """
    options = options or ValuesOptions()
    triples = [(n, n, n) if isinstance(n, str) else n for n in names]
    triples = [(k, x, y) for k, x, y in triples if x in a.tensors and y in b.tensors]
    triples = [(k, x, y) for k, x, y in triples if a.tensors[x].shape == b.tensors[y].shape]
    identical = identical_files(a, b)
    stats: dict[str, ValueStats] = {}
    to_read = []
    for key, name_a, name_b in triples:
        if (a.tensors[name_a].file, b.tensors[name_b].file) in identical and name_a == name_b:
            stats[key] = IDENTICAL_BY_HASH
        else:
            to_read.append((key, name_a, name_b))
    jobs: list[EmbedJob] = embed_jobs({"A": a, "B": b}, base, list(embed_pairs)) if base is not None else []
    files_a = {a.tensors[x].file for _, x, _ in to_read} | {a.tensors[t].file for lb, t, _ in jobs if lb == "A"}
    files_b = {b.tensors[y].file for _, _, y in to_read} | {b.tensors[t].file for lb, t, _ in jobs if lb == "B"}
    base_files = {base.tensors[name].file for _, _, name in jobs} if base is not None else set()
    legacy = sorted(file for file in files_a | files_b | base_files if is_torch_file(file))
    if legacy:
        require_torch(f"--values on {legacy[0]}")
    checkpoints = [a, b] + ([base] if base is not None and jobs else [])
    wanted = [files_a, files_b, base_files]
    pairs = [Pair(0, a.tensors[name_a], 1, b.tensors[name_b]) for _, name_a, name_b in to_read]
    for label, own, base_name in jobs:
        index = 0 if label == "A" else 1
        pairs.append(Pair(2, base.tensors[base_name], index, (a, b)[index].tensors[own]))  # type: ignore[union-attr]
    kernel = choose_kernel(notify)
    bar = BytesBar(progress, "--values") if progress is not None else None
    options = replace(options, on_progress=_both(options.on_progress, bar))
    sides: list[Side] = []
    try:
        if options.scheduler is not None:
            results = _on_dask(options, checkpoints, wanted, pairs, kernel, offline)
        else:
            fetch: dict[str, Any] = dict(offline=offline, progress=progress, notify=notify)
            for checkpoint, files, label, called in zip(checkpoints, wanted, SIDE_LABELS, ANNOUNCED_AS, strict=False):
                sides.append(Side(label, checkpoint, fetch_files(checkpoint, files, label=called, **fetch)))
            if options.jobs is not None:
                results = _on_processes(options, sides, checkpoints, pairs, kernel, offline)
            else:
                results = pair_stats(sides, pairs, kernel=kernel, progress=options.on_progress)
    finally:
        if bar is not None:
            bar.close()
        for side in sides:
            side.close()
    for (key, _, _), result in zip(to_read, results, strict=False):
        stats[key] = result
    embeds = tuple((*job, result) for job, result in zip(jobs, results[len(to_read) :], strict=True))
    return ValuesResult(stats, identical, embeds, (a.revision, b.revision))


def _both(hook: ProgressHook | None, bar: BytesBar | None) -> ProgressHook | None:
    """The caller's progress hook and the bar, both told every step."""
    if hook is None or bar is None:
        return hook or bar

    def both(done: int, total: int) -> None:
        hook(done, total)
        bar(done, total)

    return both


def _on_processes(
    options: ValuesOptions,
    sides: list[Side],
    checkpoints: list[Checkpoint],
    pairs: list[Pair],
    kernel: str,
    offline: bool,
) -> list[ValueStats]:
    from .executors import ProcessExecutor, SideSpec, run_distributed
    from .files import scratch_folder

    specs = [SideSpec.of(side, checkpoint, offline) for side, checkpoint in zip(sides, checkpoints, strict=True)]
    executor = ProcessExecutor(options.jobs or 1)
    try:
        return run_distributed(executor, specs, pairs, kernel, options.on_progress, str(scratch_folder()))
    finally:
        executor.close()


def _on_dask(
    options: ValuesOptions,
    checkpoints: list[Checkpoint],
    wanted: list[set[RelativePath]],
    pairs: list[Pair],
    kernel: str,
    offline: bool,
) -> list[ValueStats]:
    """The pass on a Dask cluster: nothing is downloaded here; each worker opens the files it is given."""
    from .executors import DaskExecutor, SideSpec, run_distributed

    specs = []
    for checkpoint, files, label in zip(checkpoints, wanted, SIDE_LABELS, strict=False):
        paths = {file: path for file in files if (path := local_path(checkpoint, file)) is not None}
        for file, path in paths.items():  # a Hub file in this machine's HF cache holds what the Hub lists
            check_cached(checkpoint, file, path)
        specs.append(
            SideSpec(label, checkpoint.spec, checkpoint.revision, offline, {f: str(p) for f, p in paths.items()})
        )
    executor = DaskExecutor(options.scheduler or "")
    try:
        return run_distributed(executor, specs, pairs, kernel, options.on_progress)
    finally:
        executor.close()
