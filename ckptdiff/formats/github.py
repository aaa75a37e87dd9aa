"""GitHub Actions workflow annotations (``::error``/``::warning``) for what fails or warns, then the plain table."""

from __future__ import annotations

from dataclasses import replace

from msgspec import structs

from ..errors import inert_in_ci_log
from ..report import Report
from . import RenderOptions
from ._common import display_rows, event_text, printable, printable_name, row_note, shape_dtype
from .messages import finding_message
from .table import Terminal, verdict_line
from .table import render as render_table

#: GitHub shows at most 10 error and 10 warning annotations per step; a few more than that are written.
MOST_ANNOTATIONS = 20


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as the runner unescapes it (actions/toolkit's escapeData)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``title=``): ``:`` and ``,`` would end it (escapeProperty)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str) -> str:
    return f"::{level} title={escape_property(title)}::{escape_data(message)}\n"


def workflow_commands(report: Report) -> list[str]:
    """One annotation per failing tensor row (collapsed patterns), finding and engine event that is not info."""
    out: list[str] = []
    failing = [line for line in display_rows(report, RenderOptions()) if not line.row.passes]
    for line in failing:
        row = line.row
        note = row_note(row, report)
        sides = f"A {shape_dtype(row.a)}, B {shape_dtype(row.b)}" + (f" ({note})" if note else "")
        count = f" ({line.count} tensors)" if line.count > 1 else ""
        out.append(annotation("error", f"ckptdiff: {row.status}", f"{printable_name(line.name)}{count}: {sides}"))
    for finding in report.findings:
        if finding.severity != "info":
            level = "error" if report.finding_fails(finding) else "warning"
            out.append(annotation(level, f"ckptdiff: {finding.code}", printable(finding_message(report, finding))))
    for result in report.engines:
        for event in result.events:
            if event.severity != "info":
                level = "warning" if event.allowed_by else "error"  # an engine event fails the gate unless allowed
                title = f"ckptdiff: {result.engine} {result.side} {event.code}"
                out.append(annotation(level, title, event_text(report, event)))
    if len(out) > MOST_ANNOTATIONS:
        more = len(out) - MOST_ANNOTATIONS
        out = out[:MOST_ANNOTATIONS] + [annotation("error", "ckptdiff", f"and {more} more (see the report)")]
    if not report.compatible:
        out.append(annotation("error", "ckptdiff", printable(verdict_line(report))))
    return out


def render(report: Report, options: RenderOptions, terminal: Terminal | None = None) -> str:
    """The annotations, then the table, in which no name or key can start a workflow command of its own."""
    table = render_table(report, replace(options, color=False), structs.replace(terminal or Terminal(), log=True))
    return "".join(workflow_commands(report)) + inert_in_ci_log(table)
