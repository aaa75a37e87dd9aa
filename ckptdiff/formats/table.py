"""The terminal report: tensor | A | B | status, then config differences, findings and the verdict."""

from __future__ import annotations

from tabulate import tabulate

from ..report import Report
from . import RenderOptions
from ._common import (
    VALUE_HEADERS,
    config_cells,
    counts_line,
    display_rows,
    event_line,
    has_values,
    printable,
    row_note,
    shape_dtype,
    side_display,
    side_display_with_layout,
    value_cells,
)
from .messages import finding_message, headline, rules_applied

_COLORS = {
    "match": "32",
    "injected": "36",
    "shape_mismatch": "31",
    "dtype_mismatch": "33",
    "only_in_a": "31",
    "only_in_b": "31",
    "compatible": "1;32",
    "incompatible": "1;31",
    "error": "31",
    "warning": "33",
    "info": "36",
    "allowed": "33",
}


_OUTCOME_COLORS = {"loads": "match", "degraded": "dtype_mismatch", "fails": "shape_mismatch"}


def render(report: Report, options: RenderOptions) -> str:
    def paint(text: str, key: str) -> str:
        code = _COLORS.get(key)
        return f"\033[{code}m{text}\033[0m" if options.color and code else text

    lines = [f"A: {printable(side_display(report.a))}"]
    lines += [f"B: {printable(side_display(report.b))}"] if report.b is not None else []
    if report.base is not None:
        lines.append(f"base: {printable(side_display_with_layout(report.base))}")
    if report.profile:
        lines.append(f"profile: {report.profile}")
    shown = display_rows(report, options)
    notes = [printable(row_note(line.row, report)) for line in shown]
    with_notes = any(notes)
    with_counts = any(line.count > 1 for line in shown)
    with_values = has_values(shown)
    table = []
    for line, note in zip(shown, notes):
        row = line.row
        cells = [printable(line.name)] + ([str(line.count)] if with_counts else [])
        status = paint(row.status, "allowed" if row.allowed_by else row.status)
        cells += [shape_dtype(row.a), shape_dtype(row.b), status] + (value_cells(row) if with_values else [])
        cells += [note] if with_notes else []
        table.append(cells)
    headers = ["tensor"] + (["count"] if with_counts else []) + ["A shape dtype", "B shape dtype", "status"]
    headers += (VALUE_HEADERS if with_values else []) + (["note"] if with_notes else [])
    if report.b is None:
        pass  # one checkpoint on its own: nothing compared
    elif table:
        lines += ["", tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True)]
    else:
        lines += ["", "no differing tensors" if options.only_diffs else "no tensors"]
    if report.config:
        config_rows = [[printable(d.key), *map(printable, config_cells(d)), d.status] for d in report.config]
        lines += [
            "",
            "config.json differences:",
            tabulate(config_rows, headers=["key", "A", "B", "status"], tablefmt="simple", disable_numparse=True),
        ]
    if report.engines:
        lines += ["", "engines:"]
        for result in report.engines:
            lines.append(f"  {paint(printable(headline(result)), _OUTCOME_COLORS[result.outcome])}")
            lines += [f"    {paint(e.severity, e.severity)} {printable(event_line(report, e))}" for e in result.events]
    if report.findings:
        lines += ["", "findings:"]
        lines += [
            f"  {paint(f.severity, f.severity)} [{f.code}] {printable(finding_message(report, f))}"
            for f in report.findings
        ]
    if applied := rules_applied(report):
        lines += ["", "policy rules applied:"] + [f"  {printable(rule)}" for rule in applied]
    lines += ["", f"{paint(report.verdict, report.verdict)}: {counts_line(report)}"]
    return "\n".join(lines) + "\n"
