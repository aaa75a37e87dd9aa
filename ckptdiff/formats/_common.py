"""Helpers shared by the human-readable formats."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

import msgspec

from ..errors import printable as printable  # the terminal's escaping, for the table
from ..errors import printable_name as printable_name  # names and keys: a backslash shown doubled
from ..report import (
    STATUSES,
    ConfigDiff,
    EngineEvent,
    EngineResult,
    NotePart,
    Report,
    SideSummary,
    TensorRow,
    TensorSide,
)
from .messages import allowed_by_text, event_message
from .values_messages import nonfinite_text, value_note_text

if TYPE_CHECKING:
    from . import RenderOptions
    from .collapse import DisplayRow


def side_display(side: SideSummary) -> str:
    """``org/name @ 0123456789ab``: the spec (a file or repo name, written as names are) and the first 12
    characters of its revision or ETag."""
    version, spec = side.version, printable_name(side.spec)
    return f"{spec} @ {version[:12]}" if version else spec


def side_display_with_layout(side: SideSummary) -> str:
    """The display name, and for a base the layout recognised: ``org/x (multimodal; text model under …)``."""
    return f"{side_display(side)} ({side.layout.description})" if side.layout is not None else side_display(side)


def shape_dtype(side: TensorSide | None) -> str:
    if side is None:
        return "—"
    text = f"[{', '.join(map(str, side.shape))}] {side.dtype}"
    # a side matched under another name (naming convention, --rename) shows the name it stores
    return f"{text} as {printable_name(side.name)}" if side.name is not None else text


def human_count(n: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def side_totals(side: SideSummary) -> str:
    """``1 file, 15 tensors, 89.60K parameters, 175.50 KiB``: a side's size in words (a count of one singular)."""
    counts = ((side.files, "file"), (side.tensors, "tensor"))
    words = [f"{n:,} {word}{'' if n == 1 else 's'}" for n, word in counts]
    parameters = f"{human_count(side.parameters)} parameter{'' if side.parameters == 1 else 's'}"
    return ", ".join([*words, parameters, human_bytes(side.bytes)])


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def counts_line(report: Report) -> str:
    if report.b is None:  # one checkpoint on its own: the engines are the whole story
        return outcomes_line(report)
    parts = [f"{report.counts[status]} {status}" for status in STATUSES if report.counts[status]]
    text = ", ".join(parts) or "no tensors"
    allowed = len(report.tensors) - list(map(attrgetter("allowed_by"), report.tensors)).count(None)
    text = f"{text} ({allowed} allowed by policy)" if allowed else text
    return f"{text}; {outcomes_line(report)}" if report.engines else text


#: How an injected weight reaches the drafter, by :attr:`ckptdiff.families.model.InjectedWeight.how`; {name} is where
#: the base stores it.
INJECTED_WORDING = {
    "embedding": "frozen: the engine takes it from the base model's {name}",
    "head": "the engine takes the base model's {name} (no draft_vocab_size of its own)",
    "tied_head": "tied (tie_word_embeddings): the head is embed_tokens, from the base model's {name}",
}
#: The base check's verdict on an injected weight; {got} is the shape and dtype the base stores.
VERDICT_WORDING = {"verified": "verified: {got}", "does_not_fit": "base has {got}: does not fit"}


def note_part_text(part: NotePart) -> str:
    """One note part in words, the name it quotes written as the tables write names."""
    if part.kind == "rank":
        return f"rank {part.a} vs {part.b}"
    if part.kind == "dim":
        return f"dim {part.index}: {part.a} vs {part.b}"
    if part.kind == "dtype":
        return f"dtype {part.a} vs {part.b}"
    if part.kind == "injected":
        return INJECTED_WORDING[part.how or ""].format(name=printable_name(part.name or ""))
    if part.kind == "base_verdict":
        return VERDICT_WORDING[part.how or ""].format(got=shape_dtype(part.stores))
    return f"did you mean {part.side}'s {printable_name(part.name or '')}? (same shape and dtype)"


def note_text(row: TensorRow) -> str | None:
    """The comparison's note on a row (no policy): its parts in words, in order; None when it has none."""
    return "; ".join(map(note_part_text, row.notes)) if row.notes else None


def row_note(
    row: TensorRow,
    report: Report,
    text: Callable[[str], str] = str,
    rule: Callable[[str], str] = str,
) -> str:
    """The note column: the comparison's note, what the value cells cannot say (the non-finite elements the
    statistics left out, or why a changed tensor has no numbers), then the policy rule that accepts the row.
    ``text`` and ``rule`` escape the note and the rule for a format that needs it (markdown)."""
    left_out = _values_note(row)
    note = text("; ".join(part for part in (note_text(row), left_out) if part))
    if row.allowed_by is None:
        return note
    allowed = f"allowed by {rule(allowed_by_text(report, row.allowed_by))}"
    return f"{note}; {allowed}" if note else allowed


def _values_note(row: TensorRow) -> str:
    """The non-finite elements left out of a row's statistics; for a changed tensor with no numbers and no bytes
    compared (a dtype the statistics do not widen, against another dtype: its cells are dashes), why."""
    values = row.values
    if values is None or values.note is None:
        return ""
    note = values.note
    if not values.equal and values.max_abs is None and note.not_widened is not None and not note.bytes_compared:
        return f"values not measured: {value_note_text(note)}"  # the summary's "changed, not measured"
    return nonfinite_text(note)


def display_rows(report: Report, options: RenderOptions) -> list[DisplayRow]:
    """The tensor rows a table shows: differing only (``only_diffs``), collapsed unless ``expand``."""
    from .collapse import collapse, expanded

    rows = visible_rows(report, options.only_diffs)
    lines = expanded(rows) if options.expand else collapse(rows)
    return by_value_change(lines) if any(row.values is not None for row in rows) else lines


#: Value-statistics columns (``--values``), after the status.
VALUE_HEADERS = ["max |Δ|", "mean |Δ|", "cos", "rel L2"]


def has_values(lines: Sequence[DisplayRow]) -> bool:
    return any(line.row.values is not None for line in lines)


def value_cells(row: TensorRow) -> list[str]:
    """max and mean |b−a|, cosine and relative L2 of a row, "=" for equal tensors, "≠ (bytes)" for a change seen
    only in the bytes (a dtype not widened: F4, F6), blanks where not compared."""
    v = row.values
    if v is None:
        return ["", "", "", ""]
    if v.equal:
        return ["= (sha256)" if v.method == "sha256" else "=", "", "", ""]
    if v.max_abs is None and v.note is not None and v.note.bytes_compared:
        return ["≠ (bytes)", "", "", ""]

    def number(key: str, spec: str) -> str:
        value = v.number(key)
        return "—" if value is None else format(value, spec)

    return [number("max_abs", ".3g"), number("mean_abs", ".3g"), number("cosine", ".6f"), number("rel_l2", ".3g")]


def by_value_change(lines: Sequence[DisplayRow]) -> list[DisplayRow]:
    """Structural differences first, then tensors whose values changed, largest relative L2 first, then those that
    differ with no measure (compared as bytes), then equal ones (:func:`ckptdiff.report.value_change_order`)."""

    def key(line: DisplayRow) -> tuple[int, int, float, float]:
        v = line.row.values
        if v is None:
            return (2 if line.row.passes else 0, 0, 0.0, 0.0)
        return (1, *v.change_order)

    return sorted(lines, key=key)


def visible_rows(report: Report, only_diffs: bool) -> Sequence[TensorRow]:
    if only_diffs:  # a match whose values changed (--values) is a difference too
        if report.counts["match"] == len(report.tensors) and not any(map(attrgetter("values"), report.tensors)):
            return []  # every row matches, none with values: a C-level pass says so
        return [
            row for row in report.tensors if row.status != "match" or (row.values is not None and not row.values.equal)
        ]
    return report.tensors


#: How a config key absent from one side shows; a JSON null shows as ``null``.
ABSENT = "(absent)"


def config_value(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def config_cells(diff: ConfigDiff) -> tuple[str, str]:
    """A config difference's two values for a human: JSON text, ``null`` for a null, ``(absent)`` for no key."""
    a = config_value(diff.a) if diff.present("a") else ABSENT
    return a, config_value(diff.b) if diff.present("b") else ABSENT


def outcomes_line(report: Report) -> str:
    """``sglang A loads, vllm A degraded (allowed by policy)``: each engine and side's outcome."""
    parts = []
    for result in report.engines:
        allowed = " (allowed by policy)" if result.outcome != "loads" and result.passes else ""
        conditional = " (conditional on the target)" if result.conditions else ""
        parts.append(f"{result.engine} {result.side} {result.outcome}{conditional}{allowed}")
    return ", ".join(parts) or "no engines"


def shown_unfolded(event: EngineEvent) -> bool:
    """An event every format shows by default: one that warns or fails, the notice of a conditional verdict (it
    says on which targets "loads" holds) or of a check left undone (what "loads" does not cover). Other info
    events fold away."""
    return event.severity != "info" or event.code.endswith(("_conditional", "_unchecked"))


def event_text(report: Report, event: EngineEvent) -> str:
    """An engine event's message (which names its tensor, see :class:`.EngineEvent`) and the rule that accepts it."""
    allowed = f" (allowed by {allowed_by_text(report, event.allowed_by)})" if event.allowed_by else ""
    return f"{event_message(event)}{allowed}"


def event_line(report: Report, event: EngineEvent) -> str:
    """``[lm_head_random] lm_head.weight is missing ...`` (unescaped: each format escapes it its own way)."""
    return f"[{event.code}] {event_text(report, event)}"


#: A rule's citation as the engine tables write it at the end of an event's words: `` [repo@commit path (detail)]``.
_CITATION = re.compile(
    r" \[(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(?P<commit>[A-Za-z0-9_.-]+) (?P<path>[A-Za-z0-9_./-]+)"
    r"(?P<detail>(?: \([^()\[\]]*\))*)\]$"
)


class Citation(msgspec.Struct, frozen=True):
    """Where an engine rule was read: a file of the engine's repository at the pinned tag or commit."""

    repo: str
    commit: str
    path: str
    detail: str  # what follows the path: " (set_embed)", " (inferred)", or ""

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/blob/{self.commit}/{self.path}"

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.commit} {self.path}"


def split_citation(text: str) -> tuple[str, Citation | None]:
    """An event's words and the citation they end with (None when they cite nothing a link can point to)."""
    found = _CITATION.search(text)
    if found is None:
        return text, None
    citation = Citation(found["repo"], found["commit"], found["path"], found["detail"])
    return text[: found.start()], citation


def event_parts(report: Report, event: EngineEvent) -> tuple[str, Citation | None, str]:
    """An engine event as words, the citation they end with, and the policy rule that accepts it ("" if none)."""
    words, citation = split_citation(event_message(event))
    allowed = f"allowed by {allowed_by_text(report, event.allowed_by)}" if event.allowed_by else ""
    return words, citation, allowed


def failing_events(result: EngineResult) -> list[EngineEvent]:
    """The events of an engine result that fail the gate (not info, no rule accepts them)."""
    return [event for event in result.events if event.severity != "info" and event.allowed_by is None]


def difference_order(line: DisplayRow) -> int:
    """Where a table row goes: what fails the gate, then what passes for a reason (injected, allowed), then
    matches whose values changed (``--values``), then matches."""
    row = line.row
    if not row.passes:
        return 0
    if row.status != "match":
        return 1
    return 2 if row.values is not None and not row.values.equal else 3
