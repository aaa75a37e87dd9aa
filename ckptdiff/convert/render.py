"""A conversion plan (and its outcome) as a terminal table, markdown or JSON; the JSON is also ``convert.json``."""

from __future__ import annotations

import json
from typing import Any

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


def _rows(plan: Plan) -> list[list[str]]:
    rows = []
    for t in plan.tensors:
        info = t.origin.tensor
        origin = info.name if t.origin.side == "source" else f"BASE {info.name}"
        cast = f"{info.dtype}→{t.dtype}" if info.dtype != t.dtype else t.dtype
        rows.append([t.name, origin, "+".join(t.transforms), cast, str(list(t.shape)), t.file])
    return rows


#: Tensors left for one reason that are listed by name; more are counted (a full model's main layers: ~90,000).
LEFT_LISTED = 8


def _left_lines(plan: Plan, code: str = "") -> list[str]:
    """The tensors not written, a line each, or per reason when many share one (convert.json lists them all)."""
    by_why: dict[str, list[str]] = {}
    for left in plan.left:
        by_why.setdefault(left.why, []).append(left.name)
    lines = []
    for why, names in by_why.items():
        if len(names) <= LEFT_LISTED:
            lines += [f"{code}{name}{code}: {why}" for name in names]
        else:
            shown = ", ".join(f"{code}{name}{code}" for name in names[:3])
            lines.append(f"{len(names)} tensors ({shown}, …): {why}")
    return lines


HEADERS = ["tensor", "from", "transform", "dtype", "shape", "file"]


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} B"


def render_table(plan: Plan) -> str:
    from tabulate import tabulate

    lines = [f"SRC: {plan.source.spec}", f"for: {plan.label} ({', '.join(plan.config.get('architectures', []))})"]
    if plan.base is not None:
        lines.append(f"base: {plan.base.spec} (embedding: {plan.embed})")
    lines += ["", tabulate(_rows(plan), HEADERS, disable_numparse=True)]
    if plan.left:
        lines += ["", "not written:"] + [f"  {line}" for line in _left_lines(plan)]
    if plan.changes:
        rows = [[c.key, _value(c.old), "(removed)" if c.removed else _value(c.new), c.why] for c in plan.changes]
        lines += ["", "config.json:", tabulate(rows, ["key", "SRC", "written", "why"], disable_numparse=True)]
    lines += _checks(plan, "  ")
    shards = len(plan.shards.shards)
    lines += [
        "",
        f"plan: {len(plan.tensors)} tensors, {_size(plan.nbytes)} in {shards} file{'s' if shards > 1 else ''}"
        + (" + index" if plan.shards.indexed else ""),
    ]
    return "\n".join(lines) + "\n"


def _checks(plan: Plan, indent: str) -> list[str]:
    lines: list[str] = []
    if plan.tokenizer is not None:
        verdict = "same vocabulary" if plan.tokenizer.same else "different vocabularies"
        lines += ["", f"tokenizer: {verdict}: {plan.tokenizer.from_base} → {plan.tokenizer.base}"]
        lines += [f"{indent}compared {item}" for item in plan.tokenizer.compared]
        lines += [f"{indent}{item}" for item in plan.tokenizer.differences]
    if plan.check is not None:
        lines += ["", f"engine check on the plan ({plan.label}'s loader replayed): {plan.check.outcome}"]
    if not plan.engine_proven:
        lines.append(f"{indent}{plan.label}: not proven by an engine ({plan.unproven_why}); ckptdiff's check only")
    lines += [f"{indent}warning: {w}" for w in plan.warnings]
    if plan.problems:
        lines += ["", "the plan fails:"] + [f"{indent}{p}" for p in plan.problems]
    return lines


def render_markdown(plan: Plan) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"### ckptdiff convert: `{plan.source.spec}` for {plan.label}", ""]
    if plan.base is not None:
        lines += [f"Base: `{plan.base.spec}`, embedding: {plan.embed}", ""]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += [
        "| " + " | ".join(f"`{cell(v)}`" if i in (0, 1) else cell(v) for i, v in enumerate(r)) + " |"
        for r in _rows(plan)
    ]
    if plan.left:
        lines += ["", "Not written:", ""] + [f"- {line}" for line in _left_lines(plan, code="`")]
    if plan.changes:
        lines += ["", "| config.json key | SRC | written | why |", "|---|---|---|---|"]
        lines += [
            f"| `{c.key}` | `{cell(_value(c.old))}` | {'(removed)' if c.removed else '`' + cell(_value(c.new)) + '`'} "
            f"| {cell(c.why)} |"
            for c in plan.changes
        ]
    lines += [line.strip() and ("- " + line.strip() if line.startswith("  ") else line) for line in _checks(plan, "  ")]
    return "\n".join(lines) + "\n"


def render_json(plan: Plan) -> str:
    return json.dumps(plan_document(plan), indent=2) + "\n"


RENDERERS = {"table": render_table, "markdown": render_markdown, "json": render_json}
