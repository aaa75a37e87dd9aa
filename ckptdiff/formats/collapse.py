"""Pattern collapse for the human-readable formats: one row per layer/expert pattern instead of per tensor.

Rows whose names differ only in integer path components (``layers.7``, ``experts.12``) and that agree on
everything shown (status, both sides' shape and dtype, note, policy marker, value statistics) become one
row named like ``model.layers.{1..60}.mlp.experts.{0..383}.gate_proj.weight`` with a count. A pattern row
always stands for exactly the names it spells out: when a set of indices is not a full grid (layer 5 lacks
expert 7), it is split into several grids. Linear in the number of rows.

:func:`fold` does the same for items of several names: ``ckptdiff convert``'s plan rows, an output tensor and
the input tensor it is made from, fold into ``model.layers.61.mlp.experts.{0..255}.w`` ←
``model.layers.0.mlp.experts.{0..255}.w``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

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
    rows = rows if isinstance(rows, list) else list(rows)
    # what a line shows besides the name; a side's shape and dtype, and its own name if renamed, which no other
    # row has (a side's tensor is in one row): a renamed row stands alone
    keys = [(row.status, row.a, row.b, row.notes, row.allowed_by, row.values) for row in rows]
    folds = fold([row.name for row in rows], keys)
    return [DisplayRow(line.names[0], line.count, rows[line.first]) for line in folds]


def name_template(name: str) -> tuple[str, ...]:
    """``name`` without its integer path components: what the names one fold can hold have in common."""
    return tuple(_INDEX.split(name)[0::2])


@dataclass(frozen=True)
class Fold:
    """Items folded into one line: each of their names as a pattern, how many items, the first one's position."""

    names: tuple[str, ...]
    count: int
    first: int


def fold(names: Iterable[str | tuple[str, ...]], keys: Iterable[Hashable]) -> list[Fold]:
    """Fold items into layer/expert patterns, in the order each pattern's first item appears.

    An item is its names (the first one unique among the items; a converted tensor's: its output name and its
    input's) and a key of everything else its line shows (None: it stands alone). Items fold when their keys
    are equal and their names differ only in integer path components. A later name's index that rises with one
    of the first name's is spelled from it, so that the patterns expand, in index order, into names that pair
    up (``layers.61.experts.{0..3}.w`` ← ``layers.0.experts.{0..3}.w``); any other index that varies splits
    the fold."""
    groups: dict[Hashable, tuple[int, str | tuple[str, ...], list[tuple[str, ...]]]] = {}
    split = _INDEX.split
    for position, item, key in zip(itertools.count(), names, keys, strict=False):
        if isinstance(item, str):  # one name (the comparison's rows), kept cheap: a full model's report has 140 k
            parts = split(item)
            template: Hashable = tuple(parts[0::2])
            indices = tuple(parts[1::2])
        else:
            pieces = [split(name) for name in item]
            template = tuple(tuple(p[0::2]) for p in pieces)
            indices = tuple(index for p in pieces for index in p[1::2])
        if not indices or key is None:
            groups[(position,)] = (position, item, [()])
            continue
        group_key = (template, key)
        group = groups.get(group_key)
        if group is None:
            groups[group_key] = (position, item, [indices])
        else:
            group[2].append(indices)
    out: list[Fold] = []
    for first, item, tuples in groups.values():  # in the order of their first items: the dict's own
        spelled = (item,) if isinstance(item, str) else item
        if len(tuples) == 1:
            out.append(Fold(spelled, 1, first))
        else:
            templates = [tuple(split(name)[0::2]) for name in spelled]
            out += [Fold(names, count, first) for names, count in _patterns(templates, tuples)]
    return out


def _patterns(
    templates: Sequence[tuple[str, ...]], tuples: Sequence[tuple[str, ...]]
) -> list[tuple[tuple[str, ...], int]]:
    """The grids covering a group's index tuples exactly, in index order: each one's names, spelled, and how many
    items it stands for. A later name's index that varies with one of the first name's, rising as it rises
    (``layers.61`` ← ``layers.0``, ``layers.62`` ← ``layers.1``), is spelled from it; each of the first name's
    indices serves at most one of a name's, in order, so that the names expand in pairs. The others are grid
    dimensions of their own (and split the group where they vary)."""
    width = len(templates[0]) - 1
    # per name, per index: the grid dimension it is spelled from and how (None: its own value)
    spans: list[list[tuple[int, dict[str, str] | None]]] = [[(d, None) for d in range(width)]]
    if len(templates) > 1:
        columns = list(zip(*tuples))
        kept = list(range(width))
        start = width
        for template in templates[1:]:
            span: list[tuple[int, dict[str, str] | None]] = []
            tied = -1
            for p in range(start, start + len(template) - 1):
                q, mapping = next(
                    ((q, m) for q in range(tied + 1, width) if (m := _rising(columns[q], columns[p])) is not None),
                    (None, None),
                )
                if q is None:
                    span.append((len(kept), None))
                    kept.append(p)
                else:
                    span.append((q, mapping))
                    tied = q
            spans.append(span)
            start += len(template) - 1
        tuples = [tuple(t[p] for p in kept) for t in tuples]
    grids = _grids(tuples)
    grids.sort(key=lambda grid: tuple(min(map(int, values)) for values in grid))
    out = []
    for grid in grids:
        count = 1
        for values in grid:
            count *= len(values)
        names = tuple(
            _spell(t, [grid[d] if m is None else frozenset(m[v] for v in grid[d]) for d, m in span])
            for t, span in zip(templates, spans)
        )
        out.append((names, count))
    return out


def _rising(first: Sequence[str], later: Sequence[str]) -> dict[str, str] | None:
    """``later``'s index as a function of ``first``'s that rises with it (the same value, a shifted one), if it
    varies and is one: then the two patterns expand, in index order, into names that pair up."""
    mapping: dict[str, str] = {}
    for a, b in zip(first, later):
        if mapping.setdefault(a, b) != b:
            return None
    if len(mapping) < 2:
        return None
    pairs = sorted((int(a), int(b)) for a, b in mapping.items())
    if any(b1 >= b2 for (_, b1), (_, b2) in zip(pairs, pairs[1:])):
        return None
    return mapping


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
