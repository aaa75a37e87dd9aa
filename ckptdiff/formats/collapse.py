"""Pattern collapse for the human-readable formats: one row per layer/expert pattern instead of per tensor.

Rows whose names differ only in integer path components (``layers.7``, ``experts.12``) and that agree on
everything shown (status, both sides' shape and dtype, note, policy marker, value statistics) become one
row named like ``model.layers.{1..60}.mlp.experts.{0..383}.gate_proj.weight`` with a count. A pattern row
always stands for exactly the names it spells out: when a set of indices is not a full grid (layer 5 lacks
expert 7), it is split into several grids. Linear in the number of rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..report import TensorRow

#: An integer path component between two dots, no leading zeros (the cheapest pattern that finds them).
_INDEX = re.compile(r"\.(0|[1-9][0-9]*)(?=\.)")


@dataclass(frozen=True)
class DisplayRow:
    """One line of a table: a tensor name or a pattern, how many tensors it stands for, and what they share."""

    name: str
    count: int
    row: TensorRow  # the first tensor the line stands for; every other one has the same status, sides and note


def expanded(rows: Iterable[TensorRow]) -> list[DisplayRow]:
    return [DisplayRow(row.name, 1, row) for row in rows]


def compact_indices(values: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8, 9]`` → ``0..3,5,7..9``; two neighbours stay a pair: ``4,5``."""
    ordered = sorted(set(values))
    parts: list[str] = []
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            if last - first >= 2:
                parts.append(f"{first}..{last}")
            else:
                parts.extend(str(v) for v in ordered[start:i])
            start = i
    return ",".join(parts)


def _grids(tuples: Sequence[tuple[str, ...]]) -> list[list[frozenset[str]]]:
    """Split a set of index tuples into grids (products of index sets) that cover it exactly.

    Indices stay strings (canonical: no leading zeros, so equal strings are equal numbers); parsing 140 k
    of them into ints would cost more than the rest of the collapse."""
    if not tuples[0]:
        return [[]]
    if len(tuples) == 1:
        return [[frozenset((v,)) for v in tuples[0]]]
    rest_by_first: dict[str, list[tuple[str, ...]]] = {}
    for t in tuples:
        rest_by_first.setdefault(t[0], []).append(t[1:])
    firsts_by_rest: dict[frozenset[tuple[str, ...]], list[str]] = {}
    for first, rest in rest_by_first.items():
        firsts_by_rest.setdefault(frozenset(rest), []).append(first)
    grids = []
    for rest_set, firsts in firsts_by_rest.items():
        head = frozenset(firsts)
        for tail in _grids(sorted(rest_set)):
            grids.append([head, *tail])
    return grids


def _spell(template: tuple[str, ...], grid: list[frozenset[str]]) -> str:
    out = [template[0]]
    for values, text in zip(grid, template[1:]):
        out.append("." + (next(iter(values)) if len(values) == 1 else "{" + compact_indices(map(int, values)) + "}"))
        out.append(text)
    return "".join(out)


def collapse(rows: Iterable[TensorRow]) -> list[DisplayRow]:
    """Collapse rows into layer/expert patterns, in the order each pattern's first tensor appears."""
    groups: dict[tuple[Any, ...], tuple[int, TensorRow, tuple[str, ...], list[tuple[str, ...]]]] = {}
    split = _INDEX.split
    for position, row in enumerate(rows):
        parts = split(row.name)
        a, b = row.a, row.b
        if len(parts) == 1 or (a is not None and a.name is not None) or (b is not None and b.name is not None):
            # no index, or a side with its own name (renamed): shown as is
            groups[(position,)] = (position, row, (row.name,), [()])
            continue
        key = (
            tuple(parts[0::2]),
            row.status,
            None if a is None else (a.shape, a.dtype),
            None if b is None else (b.shape, b.dtype),
            row.notes,
            row.allowed_by,
            row.values,
        )
        indices = tuple(parts[1::2])
        group = groups.get(key)
        if group is None:
            groups[key] = (position, row, key[0], [indices])
        else:
            group[3].append(indices)
    out: list[DisplayRow] = []
    for _, first, template, tuples in sorted(groups.values(), key=lambda g: g[0]):
        if len(tuples) == 1:
            out.append(DisplayRow(first.name, 1, first))
            continue
        grids = _grids(tuples)
        grids.sort(key=lambda grid: tuple(min(map(int, values)) for values in grid))
        for grid in grids:
            count = 1
            for values in grid:
                count *= len(values)
            out.append(DisplayRow(_spell(template, grid), count, first))
    return out


_BRACES = re.compile(r"\{([0-9.,]+)\}")


def expand_pattern(pattern: str) -> list[str]:
    """The names a pattern row spells, in index order: ``a.{0..2,5}.b`` → ``a.0.b``, ``a.1.b``, ``a.2.b``,
    ``a.5.b`` (a plain name is itself)."""
    parts = _BRACES.split(pattern)
    names = [parts[0]]
    for position in range(1, len(parts), 2):
        values: list[str] = []
        for piece in parts[position].split(","):
            first, _, last = piece.partition("..")
            values += map(str, range(int(first), int(last or first) + 1))
        names = [name + value + parts[position + 1] for name in names for value in values]
    return names
