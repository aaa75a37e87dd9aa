"""The result of a comparison. ``Report.to_dict()`` *is* the JSON schema (``ckptdiff/report/v1``)."""

from __future__ import annotations

import json
import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from operator import attrgetter
from typing import Any, Literal

from . import __version__
from .checkpoint import Checkpoint
from .policy import Policy, rules_applied

SCHEMA = "ckptdiff/report/v1"

Status = Literal["match", "shape_mismatch", "dtype_mismatch", "only_in_a", "only_in_b", "injected"]
#: Every tensor status, in the order reports list their counts.
STATUSES: tuple[Status, ...] = ("match", "injected", "shape_mismatch", "dtype_mismatch", "only_in_a", "only_in_b")
#: Statuses that keep a comparison compatible.
OK_STATUSES: frozenset[str] = frozenset({"match", "injected"})
Verdict = Literal["compatible", "incompatible"]
Severity = Literal["error", "warning", "info"]
ConfigStatus = Literal["differs", "only_in_a", "only_in_b"]
#: What an engine does with a checkpoint: uses every trained weight as trained, loads it but not as trained
#: (something skipped, random, overridden or defaulted), or raises while loading it.
Outcome = Literal["loads", "degraded", "fails"]
OUTCOMES: tuple[Outcome, ...] = ("loads", "degraded", "fails")


@dataclass(frozen=True)
class TensorSide:
    """A tensor as one side stores it. ``name`` is that side's own name when it differs from the row's."""

    shape: tuple[int, ...]
    dtype: str
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shape": list(self.shape), "dtype": self.dtype}
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True, slots=True)  # slots: a Kimi-K2 pair has 140 k rows
class TensorRow:
    name: str
    status: Status
    a: TensorSide | None
    b: TensorSide | None
    note: str | None = None
    #: Value statistics (``--values``); a mapping so this module stays torch-free.
    values: dict[str, Any] | None = None
    #: The policy rule that accepts this row despite its status ("--allow-missing 'lm_head*'").
    allowed_by: str | None = None

    @property
    def passes(self) -> bool:
        """Whether this row keeps the comparison compatible (its status is fine, or a rule accepts it)."""
        return self.status in OK_STATUSES or self.allowed_by is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "a": self.a.to_dict() if self.a else None,
            "b": self.b.to_dict() if self.b else None,
            "note": self.note,
        }
        if self.values is not None:
            out["values"] = self.values
        if self.allowed_by is not None:
            out["allowed_by"] = self.allowed_by
        return out


#: Sets one field of a TensorRow, as ``object.__setattr__`` does in its frozen ``__init__``.
_ROW_SETTERS = [getattr(TensorRow, name).__set__ for name in TensorRow.__dataclass_fields__]


def make_rows(
    names: Sequence[str],
    statuses: Sequence[Status],
    sides_a: Sequence[TensorSide | None],
    sides_b: Sequence[TensorSide | None],
    notes: Sequence[str | None],
) -> list[TensorRow]:
    """``[TensorRow(name, status, a, b, note), ...]`` filled a column at a time through the slots in C-level
    passes: the frozen dataclass's ``__init__`` would be a Python call for each of a Kimi-K2 pair's 140 k rows."""
    rows = list(map(object.__new__, repeat(TensorRow, len(names))))
    columns = (names, statuses, sides_a, sides_b, notes, repeat(None), repeat(None))
    for set_field, column in zip(_ROW_SETTERS, columns, strict=True):
        deque(map(set_field, rows, column), maxlen=0)
    return rows


@dataclass(frozen=True)
class ConfigDiff:
    """One config.json key that differs. ``a``/``b`` is None on the side where the key is absent (the status
    says which); a JSON null in the file is None too, with status ``differs``."""

    path: tuple[str, ...]  # one component per nesting level: ("eagle_config", "eagle_aux_hidden_state_layer_ids")
    a: Any
    b: Any
    status: ConfigStatus

    @property
    def key(self) -> str:
        """The path dotted for humans; a component that holds a dot itself is quoted: ``"a.b"`` vs ``a.b``."""
        return dotted_key(self.path)

    def present(self, side: str) -> bool:
        return self.status == "differs" or self.status == f"only_in_{side}"

    def to_dict(self) -> dict[str, Any]:
        a, b = json_safe(self.a), json_safe(self.b)
        return {"key": self.key, "path": list(self.path), "a": a, "b": b, "status": self.status}


def dotted_key(path: tuple[str, ...]) -> str:
    return ".".join(part if part and "." not in part and '"' not in part else json.dumps(part) for part in path)


#: How JSON reports spell the numbers JSON cannot carry (config.json may hold them: Python's json reads them).
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_safe(value: Any) -> Any:
    """``value`` with NaN and ±Infinity (anywhere inside) as the strings "NaN", "Infinity", "-Infinity", so that
    the report is standard JSON that strict parsers (jq, browsers, Go) accept."""
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE[str(value)]
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str  # stable, e.g. "injected_from_base", "config_missing"
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "code": self.code, "message": self.message}


@dataclass(frozen=True)
class SideSummary:
    """What a report says about one checkpoint."""

    spec: str
    kind: str
    revision: str | None
    files: int
    tensors: int
    parameters: int
    bytes: int
    dtypes: dict[str, tuple[int, int]]  # dtype → (parameters, bytes)
    #: For a base model: where it keeps its text model (:class:`ckptdiff.profiles.base_layouts.Resolved`).
    layout: Any = None

    @classmethod
    def of(cls, checkpoint: Checkpoint, *, layout: Any = None) -> SideSummary:
        dtypes = checkpoint.dtype_totals()  # one pass over the tensors; the totals add up from it
        return cls(
            layout=layout,
            spec=checkpoint.spec,
            kind=checkpoint.kind,
            revision=checkpoint.revision,
            files=len(checkpoint.files),
            tensors=len(checkpoint.tensors),
            parameters=sum(parameters for parameters, _ in dtypes.values()),
            bytes=sum(nbytes for _, nbytes in dtypes.values()),
            dtypes=dtypes,
        )

    @property
    def display(self) -> str:
        return f"{self.spec} @ {self.revision[:12]}" if self.revision else self.spec

    @property
    def display_with_layout(self) -> str:
        """The display name, and for a base the layout recognised: ``org/x (multimodal; text model under …)``."""
        return f"{self.display} ({self.layout.description})" if self.layout is not None else self.display

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "revision": self.revision,
            "files": self.files,
            "tensors": self.tensors,
            "parameters": self.parameters,
            "bytes": self.bytes,
            "dtypes": {d: {"parameters": p, "bytes": b} for d, (p, b) in self.dtypes.items()},
            **({"layout": self.layout.to_dict()} if self.layout is not None else {}),
        }


@dataclass(frozen=True)
class EngineEvent:
    """One thing a serving engine's loader does with a checkpoint (``tensor``: the checkpoint name, if one)."""

    severity: Severity  # error: the engine raises; warning: loads, not as trained; info: as trained
    code: str  # stable, e.g. "lm_head_random", "skipped_unknown_name"
    tensor: str | None
    message: str
    #: The policy rule that accepts this event ("--allow-event 'sglang:lm_head_random'").
    allowed_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "tensor": self.tensor,
            "message": self.message,
        }
        if self.allowed_by is not None:
            out["allowed_by"] = self.allowed_by
        return out


@dataclass(frozen=True)
class EngineResult:
    """One engine's loader replayed on one side: its events, and the outcome they imply."""

    engine: str  # "sglang", "vllm", "trtllm"
    side: str  # "A" or "B"
    events: tuple[EngineEvent, ...]
    #: One line saying why, for the headline ("layers.0.* skipped (10 tensors); 10 weights random (...)").
    summary: str = ""
    #: Each checkpoint tensor's fate (loaded, renamed, from_target, skipped, error) and the parameter it filled.
    tensors: tuple[tuple[str, str, str | None], ...] = ()
    #: Each parameter the engine builds and its fate (loaded, from_target, random, missing, default, not_needed).
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def outcome(self) -> Outcome:
        severities = {event.severity for event in self.events}
        return "fails" if "error" in severities else "degraded" if "warning" in severities else "loads"

    @property
    def passes(self) -> bool:
        """Loads as trained, or a policy rule accepts every event that says otherwise."""
        return all(event.severity == "info" or event.allowed_by is not None for event in self.events)

    @property
    def headline(self) -> str:
        return f"{self.engine} {self.side}: {self.outcome}" + (f" — {self.summary}" if self.summary else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "side": self.side,
            "outcome": self.outcome,
            "summary": self.summary,
            "events": [event.to_dict() for event in self.events],
            "tensors": [{"name": name, "fate": fate, "parameter": param} for name, fate, param in self.tensors],
            "parameters": [{"name": name, "fate": fate} for name, fate in self.parameters],
        }


@dataclass(frozen=True)
class Report:
    """Everything a run found. The verdict, counts and rule texts are derived from it, never stored."""

    a: SideSummary
    b: SideSummary | None  # None: one checkpoint checked on its own (``ckptdiff SPEC --engine ...``)
    tensors: tuple[TensorRow, ...]
    config: tuple[ConfigDiff, ...] = ()
    findings: tuple[Finding, ...] = ()
    profile: str | None = None
    base: SideSummary | None = None
    #: The user's rules (flags and config file).
    policy: Policy = field(default_factory=Policy)
    #: Tensors the policy's --ignore rules left out: (glob, how many).
    ignored: tuple[tuple[str, int], ...] = ()
    #: Serving engines replayed on each side (``--engine``), in the order requested.
    engines: tuple[EngineResult, ...] = ()
    #: The command line that produced the report, when run from the CLI.
    command: str | None = None
    counts: dict[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        found = Counter(map(attrgetter("status"), self.tensors))
        object.__setattr__(self, "counts", {status: found[status] for status in STATUSES})

    @property
    def fail_on(self) -> str:
        """Which finding severities fail the gate besides errors: "error" (only errors) or "warning"."""
        return self.policy.fail_on

    def finding_fails(self, finding: Finding) -> bool:
        return finding.severity == "error" or (finding.severity == "warning" and self.fail_on == "warning")

    @cached_property  # the fields are frozen, and dataclasses.replace builds a new Report
    def verdict(self) -> Verdict:
        # the counts say at no cost when every row's status is fine; else a row may still pass by a policy rule
        rows_pass = sum(self.counts[status] for status in OK_STATUSES) == len(self.tensors)
        ok = (
            (rows_pass or all(row.passes for row in self.tensors))
            and not any(self.finding_fails(finding) for finding in self.findings)
            and all(result.passes for result in self.engines)
        )
        return "compatible" if ok else "incompatible"

    @property
    def compatible(self) -> bool:
        return self.verdict == "compatible"

    @cached_property
    def rules_applied(self) -> tuple[str, ...]:
        """Policy rules that changed a row, an engine event or the verdict, in words ("--allow-missing 'embed_*'")."""
        return rules_applied(self.policy, self.tensors, self.ignored, self.findings, self.engines)

    @property
    def exit_code(self) -> int:
        return 0 if self.compatible else 1

    def render(self, fmt: str = "table", **options: Any) -> str:
        """Render with one of the formats in :mod:`ckptdiff.formats` (table, markdown, json, junit)."""
        from .formats import render

        return render(self, fmt, **options)

    def to_dict(self, *, tensors: bool = True) -> dict[str, Any]:
        """The JSON document. ``tensors=False`` leaves the rows list empty, for a writer that streams them."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "tool": {"name": "ckptdiff", "version": __version__},
            "verdict": self.verdict,
            "profile": self.profile,
            "a": self.a.to_dict(),
            "b": self.b.to_dict() if self.b is not None else None,
        }
        if self.base is not None:
            out["base"] = self.base.to_dict()
        out["counts"] = self.counts
        out["tensors"] = [row.to_dict() for row in self.tensors] if tensors else []
        out["config"] = [diff.to_dict() for diff in self.config]
        out["findings"] = [finding.to_dict() for finding in self.findings]
        if self.engines:
            out["engines"] = [result.to_dict() for result in self.engines]
        out["fail_on"] = self.fail_on
        out["rules_applied"] = list(self.rules_applied)
        return out
