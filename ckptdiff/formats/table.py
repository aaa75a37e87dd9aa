"""The terminal report: differences first, cells wrapped to the terminal's width, findings by severity, the verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import msgspec

from ..report import OK_STATUSES, STATUSES, EngineEvent, EngineResult, Finding, Report
from . import RenderOptions
from ._common import (
    VALUE_HEADERS,
    config_cells,
    counts_line,
    display_rows,
    event_text,
    has_values,
    outcomes_line,
    printable,
    printable_name,
    row_note,
    shape_dtype,
    shown_unfolded,
    side_display,
    side_display_with_layout,
    value_cells,
)
from .layout import GAP, NAME_FLOOR, NOTE_FLOOR, Painter, grid, grid_or_blocks, hang
from .messages import finding_message, headline, rules_applied, variant_lines

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
SEVERITIES = ("error", "warning", "info")
_PLURAL = {"error": "errors", "warning": "warnings", "info": "info"}
#: How many failing things the verdict line names before "+N more".
NAMED_FAILURES = 3


class Terminal(msgspec.Struct, frozen=True):
    """Where the table goes: its width (None: lines are not wrapped, e.g. a file) and how much to show."""

    width: int | None = None
    #: -1 (``-q``): only the verdict and what failed it; 0: everything but info; 1 (``-v``): info too.
    verbosity: int = 0
    #: The text goes where a CI job's log may show it (stdout): what the log's guard escapes
    #: (:func:`.errors.inert_in_ci_log`) is escaped as the lines are laid out, so the escapes keep to the columns.
    log: bool = False


def render(report: Report, options: RenderOptions, terminal: Terminal | None = None) -> str:
    terminal = terminal or Terminal()
    paint = _painter(options.color)
    if terminal.verbosity < 0:
        return "\n".join(_quiet(report, options, terminal, paint)) + "\n"
    sides = [("A: ", side_display(report.a))]
    sides += [("B: ", side_display(report.b))] if report.b is not None else []
    sides += [("base: ", side_display_with_layout(report.base))] if report.base is not None else []
    lines = [
        line
        for label, shown in sides
        for line in hang(label, printable(shown), terminal.width, " " * len(label), guard=terminal.log, path=True)
    ]
    if report.profile:
        lines.append(f"profile: {report.profile}")
    for label, words in variant_lines(report):
        lines += hang(f"variant ({label}): ", printable(words), terminal.width, "  ", guard=terminal.log)
    if report.b is not None:  # one checkpoint on its own: nothing compared
        lines += ["", *_tensor_table(report, options, terminal, paint, failing_only=False)]
    if report.config:
        rows = [[printable_name(d.key), *map(printable, config_cells(d)), d.status] for d in report.config]
        lines += ["", "config.json differences:"]
        stages = [((1, 2), NOTE_FLOOR), ((0,), NAME_FLOOR), ((0, 1, 2), 0)]
        headers = ["key", "A", "B", "status"]
        table = grid(headers, rows, terminal.width, shrink=stages, names=(0,), guard=terminal.log)
        lines += grid_or_blocks(table, headers, rows, terminal.width, guard=terminal.log)
    lines += _engines(report, terminal, paint, failing_only=False)
    lines += _findings(report, terminal, paint, failing_only=False)
    if applied := rules_applied(report):
        lines += ["", "policy rules applied:"]
        lines += [line for rule in applied for line in hang("  ", printable(rule), terminal.width, guard=terminal.log)]
    lines += ["", *verdict_lines(report, terminal.width, paint, guard=terminal.log)]
    return "\n".join(lines) + "\n"


def verdict_line(report: Report) -> str:
    """``incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected``: what failed it, then the rest."""
    if report.compatible:
        return f"{report.verdict}: {counts_line(report)}"
    failures: dict[str, list[str]] = {severity: [] for severity in SEVERITIES}
    failing_statuses: Counter[str] = Counter()
    for row in report.tensors:
        if not row.passes:
            failing_statuses[row.status] += 1
            failures["error"].append(f"{row.status} {printable_name(row.name)}")
    for finding in report.findings:
        if report.finding_fails(finding):
            failures[finding.severity].append(finding.code)
    for result in report.engines:
        for event in _failing_events(result):
            failures[event.severity].append(f"{result.engine} {result.side} {event.code}")
    parts = [_named(severity, names) for severity, names in failures.items() if names]
    if report.b is not None:
        passing = [(status, report.counts[status] - failing_statuses[status]) for status in STATUSES]
        parts += [
            f"{n} {status}" + ("" if status in OK_STATUSES else " allowed by policy") for status, n in passing if n
        ]
    text = ", ".join(parts)
    if report.b is not None and report.engines:
        text += f"; {outcomes_line(report)}"
    return f"{report.verdict}: {text}"


def verdict_lines(
    report: Report, width: int | None, paint: Callable[[str, str], str] = lambda t, k: t, *, guard: bool = False
) -> list[str]:
    verdict, rest = verdict_line(report).split(":", 1)
    lines = hang("", f"{verdict}:{rest}", width, indent="  ", guard=guard)
    lines[0] = paint(verdict, verdict) + lines[0][len(verdict) :]
    return lines


def _named(severity: str, names: Sequence[str]) -> str:
    """``8 warnings (sglang A random_init ×6, vllm A aux_ids_default, +1 more)``: a name met again (an engine's
    event for several tensors) counted once, the first three named, then how many failing things are left."""
    groups = Counter(names)  # in the order first met
    shown = [name if n == 1 else f"{name} ×{n}" for name, n in list(groups.items())[:NAMED_FAILURES]]
    left = len(names) - sum(list(groups.values())[:NAMED_FAILURES])
    noun = severity if len(names) == 1 else _PLURAL[severity]
    return f"{len(names)} {noun} ({', '.join(shown + ([f'+{left} more'] if left else []))})"


def _failing_events(result: EngineResult) -> list[EngineEvent]:
    return [event for event in result.events if event.severity != "info" and event.allowed_by is None]


def _quiet(report: Report, options: RenderOptions, terminal: Terminal, paint: Painter) -> list[str]:
    """Only what failed the gate, then the verdict: failing tensors, findings and engine events."""
    lines: list[str] = []
    if report.b is not None and any(not row.passes for row in report.tensors):
        lines += _tensor_table(report, options, terminal, paint, failing_only=True)
    lines += _engines(report, terminal, paint, failing_only=True)
    lines += _findings(report, terminal, paint, failing_only=True)
    if lines and lines[0] == "":
        lines = lines[1:]
    if lines and lines[-1] != "":
        lines.append("")
    return lines + verdict_lines(report, terminal.width, paint, guard=terminal.log)


def _painter(color: bool) -> Painter:
    def paint(text: str, key: str) -> str:
        code = _COLORS.get(key)
        return f"\033[{code}m{text}\033[0m" if color and code else text

    return paint


def _tensor_table(
    report: Report, options: RenderOptions, terminal: Terminal, paint: Painter, *, failing_only: bool
) -> list[str]:
    shown = display_rows(report, options)
    # differences first: what fails the gate, then what passes for a reason (injected, allowed), then matches
    shown = sorted(shown, key=lambda line: 0 if not line.row.passes else 1 if line.row.status != "match" else 2)
    if failing_only:
        shown = [line for line in shown if not line.row.passes]
    notes = [printable(row_note(line.row, report)) for line in shown]
    with_notes, with_values = any(notes), has_values(shown)
    with_counts = any(line.count > 1 for line in shown)
    headers = ["tensor"] + (["count"] if with_counts else []) + ["A shape dtype", "B shape dtype", "status"]
    headers += (VALUE_HEADERS if with_values else []) + (["note"] if with_notes else [])
    rows = []
    for line, note in zip(shown, notes):
        row = line.row
        cells = [printable_name(line.name)] + ([str(line.count)] if with_counts else [])
        cells += [shape_dtype(row.a), shape_dtype(row.b), row.status] + (value_cells(row) if with_values else [])
        rows.append(cells + ([note] if with_notes else []))
    status_column = headers.index("status")
    colors = [("allowed" if line.row.allowed_by else line.row.status) for line in shown]
    below: list[list[str]] = []
    if with_notes and terminal.width is not None and _note_room(headers, rows, terminal.width) < NOTE_FLOOR:
        # a narrow terminal: each note on lines of its own under its row, rather than a column a few words wide
        below = [
            hang("    ", note, terminal.width, guard=terminal.log) if note else []
            for note in [row.pop() for row in rows]
        ]
        headers, with_notes = headers[:-1], False
    note_column = (len(headers) - 1,) if with_notes else ()
    sides = (status_column - 2, status_column - 1)
    # notes first, then long tensor names, and the shape cells last: "[64, 192] BF16" reads best on one line
    shrink = [(note_column, NOTE_FLOOR), (note_column, 0), ((0,), NAME_FLOOR), ((0, *sides), 0)]
    painting = (status_column, colors, paint)
    lines = grid(
        headers,
        rows,
        terminal.width,
        shrink=shrink,
        names=(0,),
        paint_column=painting,
        below=below,
        guard=terminal.log,
    )
    lines = grid_or_blocks(lines, headers, rows, terminal.width, paint_column=painting, below=below, guard=terminal.log)
    if not rows:
        lines = ["no differing tensors" if report.tensors else "no tensors"]
    hidden = len(report.tensors) - sum(line.count for line in shown)  # the matches --only-diffs leaves out
    if hidden and not failing_only:
        lines.append(f"{hidden} tensor{'s' if hidden != 1 else ''} match (--all lists them)")
    return lines


def _note_room(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> int:
    """How wide the note (last) column could be with every other column at its natural width."""
    others = [max(len(cell) for cell in column) for column in zip(headers[:-1], *(row[:-1] for row in rows))]
    return width - sum(others) - len(GAP) * len(others)


def _engines(report: Report, terminal: Terminal, paint: Painter, *, failing_only: bool) -> list[str]:
    lines: list[str] = []
    for result in report.engines:
        events = _failing_events(result) if failing_only else result.events
        if failing_only and not events:
            continue
        headline_text = paint(printable(headline(result)), _OUTCOME_COLORS[result.outcome])
        under_outcome = " " * (2 + len(f"{result.engine} {result.side}: "))  # continued under its outcome
        lines += hang("  ", headline_text, terminal.width, indent=under_outcome, guard=terminal.log)
        visible = [e for e in events if terminal.verbosity > 0 or shown_unfolded(e)]
        for event in visible:
            label = paint(event.severity, event.severity)
            text = f"{label} [{event.code}] {event_text(report, event)}"
            lines += hang("    ", text, terminal.width, indent="      ", guard=terminal.log)
        hidden = len(events) - len(visible)
        if hidden:
            lines.append(
                f"    {hidden} info event{'s' if hidden != 1 else ''} (-v shows {'them' if hidden != 1 else 'it'})"
            )
    return ["", "engines:", *lines] if lines else []


def _findings(report: Report, terminal: Terminal, paint: Painter, *, failing_only: bool) -> list[str]:
    findings: Iterable[Finding] = report.findings
    if failing_only:
        findings = [finding for finding in findings if report.finding_fails(finding)]
    by_severity = {severity: [f for f in findings if f.severity == severity] for severity in SEVERITIES}
    lines: list[str] = []
    for severity, group in by_severity.items():
        if not group:
            continue
        if severity == "info" and terminal.verbosity <= 0:
            lines += [
                "",
                _hidden_info(len(group), "finding"),
            ]
            continue
        lines += ["", paint(f"{_PLURAL[severity]}:", severity)]
        for finding in group:
            text = f"[{finding.code}] {printable(finding_message(report, finding))}"
            lines += hang("  ", text, terminal.width, indent="    ", guard=terminal.log)
    return lines


# --- layout: words, wrapping, columns ---------------------------------------------------------------------------


def _hidden_info(count: int, what: str) -> str:
    """``3 info events (-v shows them)``, ``1 info finding (-v shows it)``."""
    return f"{count} info {what}s (-v shows them)" if count != 1 else f"1 info {what} (-v shows it)"
