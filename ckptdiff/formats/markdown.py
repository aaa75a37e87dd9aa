"""A self-contained markdown report for PRs, run logs and CI step summaries."""

from __future__ import annotations

from tabulate import tabulate

from .. import __version__
from ..report import Report, SideSummary
from . import RenderOptions
from ._common import (
    VALUE_HEADERS,
    config_cells,
    counts_line,
    display_rows,
    event_text,
    has_values,
    human_bytes,
    human_count,
    printable,
    shape_dtype,
    value_cells,
)

_MARK = {"compatible": "✅", "incompatible": "❌"}


def _code(text: str) -> str:
    return "`" + printable(text).replace("`", "'").replace("|", "\\|") + "`"


def _cell(text: str) -> str:
    return printable(text).replace("|", "\\|")


def _side(label: str, side: SideSummary) -> str:
    pinned = "commit" if side.kind == "hub" else "version"  # a store's ETag or VersionId
    revision = f" at {pinned} `{side.revision}`" if side.revision else ""
    layout = f" ({_cell(side.layout.description)})" if side.layout is not None else ""
    return (
        f"- **{label}**: {_code(side.spec)}{revision}{layout} — {side.files} file(s), {side.tensors} tensors, "
        f"{human_count(side.parameters)} parameters, {human_bytes(side.bytes)}"
    )


def render(report: Report, options: RenderOptions) -> str:
    out = [f"## ckptdiff: {report.verdict} {_MARK[report.verdict]}", ""]
    out.append(f"**{report.verdict}**: {counts_line(report)}.")
    out.append("")
    out.append(_side("A", report.a))
    if report.b is not None:
        out.append(_side("B", report.b))
    if report.base is not None:
        out.append(_side("base", report.base))
    if report.profile:
        out.append(f"- **profile**: {report.profile}")
    out.append("")

    if report.b is not None:
        out += _comparison(report, options)
    if report.engines:
        out += ["### Engines", ""]
        for result in report.engines:
            out.append(f"- **{_cell(result.headline)}** {_OUTCOME_MARK[result.outcome]}")
            out += [f"  - **{e.severity}** `{e.code}`: {_cell(event_text(e))}" for e in result.events]
        out.append("")

    out += ["### Findings", ""]
    if report.findings:
        out += [f"- **{f.severity}** `{f.code}`: {_cell(f.message)}" for f in report.findings]
    else:
        out.append("_None._")
    out.append("")
    if report.rules_applied:
        out += ["### Policy rules applied", ""] + [f"- {_code(rule)}" for rule in report.rules_applied] + [""]
    footer = f"_ckptdiff {__version__}"
    if report.command:
        footer += f" — `{report.command}`"
    out.append(footer + "_")
    return "\n".join(out) + "\n"


_OUTCOME_MARK = {"loads": "✅", "degraded": "⚠️", "fails": "❌"}


def _comparison(report: Report, options: RenderOptions) -> list[str]:
    """Parameters per dtype, the tensor table and the config.json differences of a two-sided report."""
    assert report.b is not None
    out: list[str] = []
    dtypes = sorted(report.a.dtypes.keys() | report.b.dtypes.keys())
    if dtypes:
        table = []
        for dtype in dtypes:
            pa, ba = report.a.dtypes.get(dtype, (0, 0))
            pb, bb = report.b.dtypes.get(dtype, (0, 0))
            table.append([dtype, f"{pa:,}", human_bytes(ba), f"{pb:,}", human_bytes(bb)])
        out += ["### Parameters per dtype", ""]
        out.append(
            tabulate(
                table,
                headers=["dtype", "A parameters", "A bytes", "B parameters", "B bytes"],
                tablefmt="github",
                disable_numparse=True,
            )
        )
        out.append("")

    shown = display_rows(report, options)
    out += ["### Tensors", ""]
    if shown:
        with_counts = any(line.count > 1 for line in shown)
        with_values = has_values(shown)
        table = []
        for line in shown:
            row = line.row
            status = f"{row.status} (allowed)" if row.allowed_by else row.status
            cells = [_code(line.name)] + ([str(line.count)] if with_counts else [])
            note = _cell(row.note or "")
            if row.allowed_by:
                note = f"{note}; allowed by {_code(row.allowed_by)}" if note else f"allowed by {_code(row.allowed_by)}"
            values = value_cells(row) if with_values else []
            table.append(cells + [shape_dtype(row.a), shape_dtype(row.b), status] + values + [note])
        headers = ["tensor"] + (["count"] if with_counts else []) + ["A", "B", "status"]
        headers += ([h.replace("|", "\\|") for h in VALUE_HEADERS] if with_values else []) + ["note"]
        out.append(tabulate(table, headers=headers, tablefmt="github", disable_numparse=True))
    else:
        out.append("_No differing tensors._" if options.only_diffs else "_No tensors._")
    out.append("")

    out += ["### config.json differences", ""]
    if report.config:
        table = [[_code(d.key), *(_code(cell) for cell in config_cells(d)), d.status] for d in report.config]
        out.append(tabulate(table, headers=["key", "A", "B", "status"], tablefmt="github", disable_numparse=True))
    else:
        out.append("_None._")
    out.append("")

    return out
