"""The whole --values pass: which tensors to read, which files are identical by hash, the files fetched, stats."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..checkpoint import Checkpoint, RelativePath
from .base import EmbedJob, embed_jobs
from .files import Notify, fetch_files, identical_files
from .readers import Side, is_torch_file, require_torch
from .scheduling import Pair, pair_stats
from .statistics import IDENTICAL_BY_HASH, ValueStats


@dataclass(frozen=True)
class ValuesResult:
    stats: dict[str, ValueStats]  # row name → stats
    identical: dict[tuple[RelativePath, RelativePath], str]  # (file in A, file in B) → shared sha256
    embeds: tuple[tuple[str, str, str, ValueStats], ...]  # (side label, its tensor, base tensor, stats)


def compare_values(
    a: Checkpoint,
    b: Checkpoint,
    names: Iterable[str | tuple[str, str, str]],
    *,
    base: Checkpoint | None = None,
    embed_pairs: Iterable[tuple[str, str]] = (),
    offline: bool = False,
    progress: bool = False,
    notify: Notify | None = None,
) -> ValuesResult:
    """Statistics for ``names`` (tensors in both with equal shapes) and, with a base, the embed checks.

    A name is one tensor name, or (key, name in A, name in B) when the sides name it differently; results
    are keyed by it. ``embed_pairs`` are (tensor name in a side, tensor name in the base) pairs. Reading a
    .bin/.pt file's values needs torch (checked before anything is downloaded); safetensors need only numpy.
    """
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
    options: dict[str, Any] = dict(offline=offline, progress=progress, notify=notify)
    sides = [Side("A", a, fetch_files(a, files_a, label="A", **options))]
    try:
        sides.append(Side("B", b, fetch_files(b, files_b, label="B", **options)))
        pairs = [Pair(0, a.tensors[name_a], 1, b.tensors[name_b]) for _, name_a, name_b in to_read]
        if base is not None and jobs:
            sides.append(Side("base", base, fetch_files(base, base_files, label="the base", **options)))
            for label, own, base_name in jobs:
                index = 0 if label == "A" else 1
                pairs.append(Pair(2, base.tensors[base_name], index, sides[index].checkpoint.tensors[own]))
        results = pair_stats(sides, pairs)
    finally:
        for side in sides:
            side.close()
    for (key, _, _), result in zip(to_read, results, strict=False):
        stats[key] = result
    embeds = tuple((*job, result) for job, result in zip(jobs, results[len(to_read) :], strict=True))
    return ValuesResult(stats, identical, embeds)
