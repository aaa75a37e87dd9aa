"""A conversion plan (and its outcome) as a terminal table, markdown or JSON; the JSON is also ``convert.json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import printable_name
from .plan import Plan, PlannedTensor

PROVENANCE_SCHEMA = "ckptdiff/convert/v1"


def _origin(tensor: PlannedTensor, plan: Plan) -> dict[str, Any]:
    info = tensor.origin.tensor
    checkpoint = plan.source if tensor.origin.side == "source" else plan.base
    assert checkpoint is not None
    return {
        "checkpoint": tensor.origin.side,
        "spec": checkpoint.spec,
        "revision": checkpoint.revision,
        "name": info.name,
        "file": info.file,
        "dtype": info.dtype,
        "shape": list(info.shape),
    }


def plan_document(plan: Plan) -> dict[str, Any]:
    """The plan as data: every output tensor and its input tensor, what is left out, the config patch, checks."""
    check = plan.check
    return {
        "schema": PROVENANCE_SCHEMA,
        "engine": plan.engine,
        "proven_by": "ckptdiff and the engine's loader (oracle job)" if plan.engine_proven else "ckptdiff only",
        "engine_proof": None if plan.engine_proven else "not proven by an engine",
        "engine_proof_reason": None if plan.engine_proven else plan.unproven_why,
        "source": {"spec": plan.source.spec, "revision": plan.source.revision},
        "base": {"spec": plan.base.spec, "revision": plan.base.revision} if plan.base is not None else None,
        "embed": plan.embed,
        "tensors": [
            {
                "name": t.name,
                "dtype": t.dtype,
                "shape": list(t.shape),
                "file": t.file,
                "from": _origin(t, plan),
                "transforms": list(t.transforms),
            }
            for t in plan.tensors
        ],
        "not_written": [{"name": left.name, "why": left.why} for left in plan.left],
        "config": {
            "changes": [
                {"key": c.key, "old": c.old, "new": c.new, "removed": c.removed, "why": c.why} for c in plan.changes
            ],
        },
        "shards": [{"file": s.file, "tensors": len(s.names), "bytes": s.size} for s in plan.shards.shards],
        "index": plan.shards.indexed,
        "tokenizer": plan.tokenizer.to_dict() if plan.tokenizer is not None else None,
        "engine_check": None
        if check is None
        else {
            "outcome": check.outcome,
            "events": [{"severity": e.severity, "code": e.code, "tensor": e.tensor} for e in check.events],
        },
        "problems": plan.problems,
        "warnings": plan.warnings,
    }


def _value(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _cells(tensor: PlannedTensor) -> list[str]:
    """A tensor's row: its name, its input's (BASE's marked), the transform, the dtype (a cast: both), shape, file;
    names written as every table writes them (:func:`.errors.printable_name`)."""
    info = tensor.origin.tensor
    origin = printable_name(info.name) if tensor.origin.side == "source" else f"BASE {printable_name(info.name)}"
    cast = f"{info.dtype}→{tensor.dtype}" if info.dtype != tensor.dtype else tensor.dtype
    return [
        printable_name(tensor.name),
        origin,
        "+".join(tensor.transforms),
        cast,
        str(list(tensor.shape)),
        tensor.file,
    ]


def _rows(plan: Plan, expand: bool) -> tuple[list[str], list[list[str]]]:
    """The tensor table's headers and rows: a row per tensor (``expand``), or tensors whose names differ only in
    layer/expert indices, and that agree on everything else a row shows, folded into one row of patterns
    (``layers.61.mlp.experts.{0..255}.w`` ← ``layers.0.mlp.experts.{0..255}.w``) with a count. Rows of one
    pattern are adjacent: an expert that differs sits under its siblings' row, not among expert 200's tensors."""
    from ..formats.collapse import fold, name_template

    rows = [_cells(t) for t in plan.tensors]
    if expand:
        return HEADERS, rows
    names = [(t.name, t.origin.tensor.name) for t in plan.tensors]
    folds = fold(names, [(t.origin.side, *cells[2:]) for t, cells in zip(plan.tensors, rows)])
    if all(line.count == 1 for line in folds):
        return HEADERS, rows
    rank: dict[tuple[str, ...], int] = {}
    for line in folds:  # each pattern where its first tensor comes, its rows together (a stable sort)
        rank.setdefault(name_template(plan.tensors[line.first].name), len(rank))
    folds.sort(key=lambda line: rank[name_template(plan.tensors[line.first].name)])
    folded = []
    for line in folds:
        cells = rows[line.first]
        origin = ("BASE " if plan.tensors[line.first].origin.side == "base" else "") + printable_name(line.names[1])
        folded.append([printable_name(line.names[0]), origin, str(line.count), *cells[2:]])
    return HEADERS[:2] + ["count"] + HEADERS[2:], folded


#: Tensors left for one reason that are listed by name; more are counted (a full model's main layers: ~90,000).
LEFT_LISTED = 8


def _left_lines(plan: Plan, name_as: Callable[[str], str] = str, why_as: Callable[[str], str] = str) -> list[str]:
    """The tensors not written, a line each, or per reason when many share one (convert.json lists them all);
    ``name_as``/``why_as``: how a format writes a name and a reason (markdown: a code span, inert text)."""
    by_why: dict[str, list[str]] = {}
    for left in plan.left:
        by_why.setdefault(left.why, []).append(printable_name(left.name))
    lines = []
    for why, names in by_why.items():
        if len(names) <= LEFT_LISTED:
            lines += [f"{name_as(name)}: {why_as(why)}" for name in names]
        else:
            shown = ", ".join(name_as(name) for name in names[:3])
            lines.append(f"{len(names)} tensors ({shown}, …): {why_as(why)}")
    return lines


HEADERS = ["tensor", "from", "transform", "dtype", "shape", "file"]


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} B"


def render_table(plan: Plan, *, expand: bool = False, width: int | None = None) -> str:
    """The plan for a terminal: rows folded into layer/expert patterns unless ``expand``, wrapped to ``width``
    (a path breaking after a ``/``). It is printed where a CI job's log may show it: what the log's guard escapes
    (:func:`ckptdiff.errors.inert_in_ci_log`) is escaped as the lines are laid out, so that it keeps to them."""
    from ..formats.layout import hang

    architectures = ", ".join(plan.config.get("architectures", []))
    lines = hang("SRC: ", printable_name(plan.source.spec), width, "     ", guard=True, path=True)
    lines += hang("for: ", f"{plan.label} ({architectures})", width, "     ", guard=True)
    if plan.base is not None:
        lines += hang(
            "base: ",
            f"{printable_name(plan.base.spec)} (embedding: {plan.embed})",
            width,
            "      ",
            guard=True,
            path=True,
        )
    headers, rows = _rows(plan, expand)
    files = {t.file for t in plan.tensors}
    if len(files) == 1:  # one output file: named once, on the plan's last line, rather than on every row
        headers, rows = headers[:-1], [row[:-1] for row in rows]
    lines += ["", *_tensor_grid(headers, rows, width)]
    if plan.left:
        left = [part for line in _left_lines(plan) for part in hang("  ", line, width, "    ", guard=True)]
        lines += ["", "not written:", *left]
    if plan.changes:
        lines += ["", "config.json:", *_config_grid(plan, width)]
    lines += _checks(plan, "  ", width, guard=True)
    shards = len(plan.shards.shards)
    only = f" ({next(iter(files))})" if len(files) == 1 else ""
    files_line = f"{shards} file{'' if shards == 1 else 's'}" + (" + index" if plan.shards.indexed else only)
    count = len(plan.tensors)
    plan_line = f"plan: {count} tensor{'' if count == 1 else 's'}, {_size(plan.nbytes)} in {files_line}"
    lines += ["", *hang("", plan_line, width, "  ", guard=True, path=True)]
    return "\n".join(lines) + "\n"


def _tensor_grid(headers: list[str], rows: list[list[str]], width: int | None) -> list[str]:
    """The tensor table: side by side where it fits; narrower, each input name on a line of its own under its
    row (``← name``), so that the output names keep most of the width and each row reads the same way; narrower
    still (a long name part beside the shapes), each tensor as lines of its own, as the config patch does."""
    from ..formats.layout import NAME_FLOOR, grid, grid_or_blocks, wrap

    natural = sum(max(map(len, column)) for column in zip(headers, *rows)) + 2 * (len(headers) - 1)
    if width is None or natural <= width:
        return grid(headers, rows, width, shrink=[((0, 1), NAME_FLOOR), ((0, 1), 0)], names=(0, 1), guard=True)
    below = [
        [("  ← " if n == 0 else "    ") + part for n, part in enumerate(wrap(row[1], width - 4, name=True))]
        for row in rows
    ]
    narrow = [[row[0], *row[2:]] for row in rows]
    lines = grid(
        [f"{headers[0]} ← from", *headers[2:]], narrow, width, shrink=[((0,), 0)], names=(0,), below=below, guard=True
    )
    paths = (len(headers) - 1,) if headers[-1] == "file" else ()
    return grid_or_blocks(lines, headers, rows, width, paths=paths, guard=True)


def _config_grid(plan: Plan, width: int | None) -> list[str]:
    """The config.json patch: the key, both values and the reason side by side where that fits; narrower, as the
    comparison's table does with its notes, each reason under its row, then both values in one column
    (``old → new``), since a JSON value such as ``["Eagle3LlamaForCausalLM"]`` has nowhere to wrap; narrower
    still (a long key beside such a value: about 60 columns), each change as lines of its own, no table."""
    from ..formats.layout import NAME_FLOOR, NOTE_FLOOR, fits, grid, grid_or_blocks, hang

    headers = ["key", "SRC", "written", "why"]
    rows = [
        [printable_name(c.key), _value(c.old), "(removed)" if c.removed else _value(c.new), c.why] for c in plan.changes
    ]
    lines = grid(headers, rows, width, shrink=[((3,), NOTE_FLOOR), ((0, 1, 2), 0)], names=(0,), guard=True)
    if width is None or fits(lines, width):
        return lines
    below = [hang("    ", why, width, guard=True, path=True) for *_, why in rows]  # a why may name the base
    three = [row[:3] for row in rows]
    lines = grid(headers[:3], three, width, shrink=[((0, 1, 2), 0)], names=(0,), below=below, guard=True)
    if fits(lines, width):
        return lines
    both = [[key, f"{old} → {new}"] for key, old, new, _ in rows]
    stages = [((1,), NOTE_FLOOR), ((0,), NAME_FLOOR), ((0, 1), 0)]
    lines = grid(["key", "SRC → written"], both, width, shrink=stages, names=(0,), below=below, guard=True)
    return grid_or_blocks(lines, headers, rows, width, paths=(1, 2, 3), guard=True)


def _checks(plan: Plan, indent: str, width: int | None = None, *, guard: bool = False) -> list[str]:
    """The vocabulary check, the engine check and the plan's problems, each item wrapped to ``width`` (``guard``:
    with what a CI log's guard escapes escaped first, :func:`ckptdiff.formats.layout.hang`)."""
    from functools import partial

    from ..formats.layout import hang as plain_hang

    hang = partial(plain_hang, guard=guard)

    lines: list[str] = []
    more = indent + "  "
    if plan.tokenizer is not None:
        verdict = "same vocabulary" if plan.tokenizer.same else "different vocabularies"
        sides = f"{printable_name(plan.tokenizer.from_base)} → {printable_name(plan.tokenizer.base)}"
        lines += [
            "",
            *hang("", f"tokenizer: {verdict}: {sides}", width, more),
        ]
        lines += [part for item in plan.tokenizer.compared for part in hang(indent, f"compared {item}", width, more)]
        lines += [part for item in plan.tokenizer.differences for part in hang(indent, item, width, more)]
    if plan.check is not None:
        check = f"engine check on the plan ({plan.label}'s loader replayed): {plan.check.outcome}"
        lines += ["", *hang("", check, width, more)]
    items = [f"warning: {w}" for w in plan.warnings]
    if not plan.engine_proven:
        items.insert(0, f"{plan.label}: not proven by an engine ({plan.unproven_why}); ckptdiff's check only")
    lines += [part for item in items for part in hang(indent, item, width, more)]
    if plan.problems:
        lines += ["", "the plan fails:"] + [part for p in plan.problems for part in hang(indent, p, width, more)]
    return lines


def render_markdown(plan: Plan, *, expand: bool = False, width: int | None = None) -> str:
    """The plan for a PR comment or a step summary: every name and message inert, as the comparison's markdown
    writes them (a name's backticks lengthen its code span, its ``|`` keeps to its cell, its ``<b>`` is text)."""
    from ..formats.markdown import escape  # the comparison's: one way to make outside text inert

    # names come printable_name'd (_cells, _left_lines): not doubled again; the other cells (transform, dtype,
    # shape, count, the output's file) are convert's own words
    def code(text: str) -> str:
        return escape(text, code=True, table=True)

    lines = [f"### ckptdiff convert: {escape(plan.source.spec, code=True, name=True)} for {plan.label}", ""]
    if plan.base is not None:
        lines += [f"Base: {escape(plan.base.spec, code=True, name=True)}, embedding: {plan.embed}", ""]
    headers, rows = _rows(plan, expand)
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += [
        "| " + " | ".join(code(v) if i in (0, 1) else v.replace("|", "\\|") for i, v in enumerate(r)) + " |"
        for r in rows
    ]
    if plan.left:
        left = _left_lines(plan, lambda name: escape(name, code=True), escape)
        lines += ["", "Not written:", ""] + [f"- {line}" for line in left]
    if plan.changes:
        lines += ["", "| config.json key | SRC | written | why |", "|---|---|---|---|"]
        for c in plan.changes:
            written = "(removed)" if c.removed else code(_value(c.new))
            key = escape(c.key, code=True, table=True, name=True)
            lines.append(f"| {key} | {code(_value(c.old))} | {written} | {escape(c.why, table=True)} |")
    for line in _checks(plan, "  "):
        text = escape(line.strip())
        lines.append(text and ("- " + text if line.startswith("  ") else text))
    return "\n".join(lines) + "\n"


def render_json(plan: Plan, *, expand: bool = False, width: int | None = None) -> str:
    """Every tensor, always (``expand`` and ``width`` are the text formats')."""
    return json.dumps(plan_document(plan), indent=2) + "\n"


RENDERERS: dict[str, Callable[..., str]] = {"table": render_table, "markdown": render_markdown, "json": render_json}
