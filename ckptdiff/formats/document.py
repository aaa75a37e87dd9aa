"""The JSON report's document types (``ckptdiff/report/v1``): built from a Report, encoded by msgspec, and the
source of ``docs/report.schema.json``."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..report import (
    SCHEMA,
    Condition,
    ConfigStatus,
    EngineEvent,
    FailOn,
    Number,
    Outcome,
    ParameterFate,
    Report,
    RowValues,
    RuleKind,
    RuleOrigin,
    Severity,
    SideSummary,
    Status,
    TensorFate,
    TensorRow,
    TensorSide,
    Verdict,
    json_safe,
)
from ..version import __version__
from ._common import note_text
from .messages import engine_summary, event_message, finding_message, rules_applied
from .values_messages import value_note_text


class Tool(msgspec.Struct, frozen=True):
    name: Literal["ckptdiff"]
    version: str


class ConfigDiffDocument(msgspec.Struct, frozen=True):
    """A config.json key that differs; a value absent on a side is null there (``status`` says which)."""

    key: str
    path: tuple[str, ...]
    a: Any
    b: Any
    status: ConfigStatus


class FindingDocument(msgspec.Struct, frozen=True, omit_defaults=True):
    severity: Severity
    code: str
    message: str
    subject: str | None = None
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class EngineEventDocument(msgspec.Struct, frozen=True, omit_defaults=True):
    """One thing an engine's loader does: ``message`` is its words and citation, made from ``wording`` (a key of
    the family's catalogue), ``params`` and ``source`` (where the rule was read)."""

    severity: Severity
    code: str
    tensor: str | None
    message: str
    wording: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    source: str | None = None
    #: The id of the policy rule that accepts this event.
    allowed_by: str | None = None


def event_document(event: EngineEvent) -> EngineEventDocument:
    return EngineEventDocument(
        event.severity,
        event.code,
        event.tensor,
        event_message(event),
        event.wording,
        json_safe(event.params),
        event.source,
        event.allowed_by,
    )


class EngineDocument(msgspec.Struct, frozen=True, omit_defaults=True):
    engine: str
    side: str
    outcome: Outcome
    summary: str
    events: tuple[EngineEventDocument, ...]
    tensors: tuple[TensorFate, ...]
    parameters: tuple[ParameterFate, ...]
    #: The targets the outcome holds on, when it depends on one no --base named (empty: it holds on any).
    conditions: tuple[Condition, ...] = msgspec.field(default_factory=tuple)


class RuleDocument(msgspec.Struct, frozen=True, omit_defaults=True):
    """A policy rule, what rows and events name in ``allowed_by``, and how many it acted on."""

    id: str
    kind: RuleKind
    pattern: str
    origin: RuleOrigin
    hits: int
    path: str | None = None


class RowValuesDocument(msgspec.Struct, frozen=True, omit_defaults=True):
    """How B's values differ from A's for one tensor (``--values``); ``method``: bytes read or file sha256;
    ``note``: what the statistics leave out or approximate, in words."""

    equal: bool
    max_abs: Number | None
    mean_abs: Number | None
    cosine: Number | None
    rel_l2: Number | None
    method: Literal["read", "sha256"]
    note: str | None = None


def values_document(values: RowValues) -> RowValuesDocument:
    note = value_note_text(values.note) if values.note is not None else None
    return RowValuesDocument(
        values.equal, values.max_abs, values.mean_abs, values.cosine, values.rel_l2, values.method, note
    )


class TensorRowDocument(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One tensor name of either side. ``note`` is what the comparison found, in words; ``values`` and
    ``allowed_by`` only when set."""

    name: str
    status: Status
    a: TensorSide | None
    b: TensorSide | None
    note: str | None
    #: Value statistics (``--values``).
    values: RowValuesDocument | None = None
    #: The id of the policy rule that accepts this row despite its status.
    allowed_by: str | None = None


class ReportDocument(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    """The whole JSON report, its keys in this order; ``base`` and ``engines`` only when there are some."""

    schema: Literal["ckptdiff/report/v1"]
    tool: Tool
    verdict: Verdict
    profile: str | None
    a: SideSummary
    b: SideSummary | None
    base: SideSummary | UnsetType = UNSET
    counts: dict[str, int]
    tensors: tuple[TensorRowDocument, ...]
    config: tuple[ConfigDiffDocument, ...]
    findings: tuple[FindingDocument, ...]
    engines: tuple[EngineDocument, ...] | UnsetType = UNSET
    fail_on: FailOn
    rules_applied: tuple[str, ...]
    rules: tuple[RuleDocument, ...]


def row_document(row: TensorRow) -> TensorRowDocument:
    """A row as its JSON object, its notes in words."""
    values = values_document(row.values) if row.values is not None else None
    return TensorRowDocument(row.name, row.status, row.a, row.b, note_text(row), values, row.allowed_by)


def row_documents(report: Report) -> tuple[TensorRowDocument, ...]:
    """The report's rows as JSON objects, each note in words."""
    return tuple(map(row_document, report.tensors))


def document(report: Report, *, tensors: bool = True) -> ReportDocument:
    """The JSON document of a report. ``tensors=False`` leaves the rows out, for a writer that adds them."""
    return ReportDocument(
        schema="ckptdiff/report/v1",
        tool=Tool("ckptdiff", report.tool_version or __version__),
        verdict=report.verdict,
        profile=report.profile,
        a=report.a,
        b=report.b,
        base=report.base if report.base is not None else UNSET,
        counts=dict(report.counts),
        tensors=row_documents(report) if tensors else (),
        config=tuple(
            ConfigDiffDocument(d.key, d.path, json_safe(d.a), json_safe(d.b), d.status) for d in report.config
        ),
        findings=tuple(
            FindingDocument(f.severity, f.code, finding_message(report, f), f.subject, json_safe(f.params))
            for f in report.findings
        ),
        engines=tuple(
            EngineDocument(
                r.engine,
                r.side,
                r.outcome,
                engine_summary(r),
                tuple(map(event_document, r.events)),
                tuple(TensorFate(*fate) for fate in r.tensors),
                tuple(ParameterFate(*fate) for fate in r.parameters),
                r.conditions,
            )
            for r in report.engines
        )
        if report.engines
        else UNSET,
        fail_on=report.fail_on,
        rules_applied=tuple(rules_applied(report)),
        rules=tuple(
            RuleDocument(r.id, r.kind, r.pattern, r.origin, report.rule_hits.get(r.id, 0), r.path) for r in report.rules
        ),
    )


def schema() -> dict[str, Any]:
    """The JSON Schema of the document, as published in docs/report.schema.json."""
    out = msgspec.json.schema(ReportDocument)
    whole = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": SCHEMA, **out}
    decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(whole))  # as JSON: a default () is []
    return decoded
