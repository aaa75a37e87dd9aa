"""The result of a comparison as typed data: sides, rows, findings, engine results and policy rule references."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal

import msgspec
from msgspec.structs import force_setattr

from .checkpoint import Checkpoint
from .frozen_dict import FrozenDict, frozen, hashable

SCHEMA = "ckptdiff/report/v1"

Status = Literal["match", "shape_mismatch", "dtype_mismatch", "only_in_a", "only_in_b", "injected"]
#: Every tensor status, in the order reports list their counts.
STATUSES: tuple[Status, ...] = ("match", "injected", "shape_mismatch", "dtype_mismatch", "only_in_a", "only_in_b")
#: Statuses that keep a comparison compatible.
OK_STATUSES: frozenset[str] = frozenset({"match", "injected"})
Verdict = Literal["compatible", "incompatible"]
Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
ConfigStatus = Literal["differs", "only_in_a", "only_in_b"]
#: What an engine does with a checkpoint: uses every trained weight as trained, loads it but not as trained
#: (something skipped, random, overridden or defaulted), or raises while loading it.
Outcome = Literal["loads", "degraded", "fails"]
OUTCOMES: tuple[Outcome, ...] = ("loads", "degraded", "fails")
#: Where a side was read from. A Hub cache read is the Hub.
SideKind = Literal["local", "hub", "store"]
FailOn = Literal["error", "warning"]
#: What a policy rule does (the config-file key; the flag is ``--`` and the key with dashes).
RuleKind = Literal["ignore", "allow_missing", "allow_extra", "allow_dtype_change", "allow_event"]
RuleOrigin = Literal["flag", "config", "python"]  # python: a Policy built in code, not by the CLI

#: How JSON reports spell the numbers JSON cannot carry, in config values and value statistics alike.
NonFinite = Literal["NaN", "Infinity", "-Infinity"]
NON_FINITE: dict[str, NonFinite] = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
Number = float | NonFinite


def json_number(value: float | None) -> Number | None:
    """A float as JSON reports carry it: NaN and ±Infinity as the strings "NaN", "Infinity", "-Infinity"."""
    if value is None or math.isfinite(value):
        return value
    return NON_FINITE[str(value)]


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float inside spelled as :func:`json_number` does, so that the report is
    standard JSON that strict parsers (jq, browsers, Go) accept."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return value


class TensorSide(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """A tensor as one side stores it. ``name`` is that side's own name when it differs from the row's."""

    shape: tuple[int, ...]
    dtype: str
    name: str | None = None


class ValueNote(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """What a row's value statistics leave out or approximate, as data; the formats word it
    (:func:`ckptdiff.formats.values_messages.value_note_text`).

    ``widened``: A's and B's dtypes, which differ, both widened to float32 to compare; ``not_widened``: a dtype
    the statistics do not widen (F4, F6, complex), its bytes compared for equality when ``bytes_compared``;
    ``nonfinite``: how many elements (NaN, ±inf) were left out of the statistics."""

    widened: tuple[str, str] | None = None
    not_widened: str | None = None
    bytes_compared: bool = False
    nonfinite: int = 0


class RowValues(msgspec.Struct, frozen=True, omit_defaults=True):
    """How B's values differ from A's for one tensor (``--values``); ``method``: bytes read or file sha256."""

    equal: bool
    max_abs: Number | None
    mean_abs: Number | None
    cosine: Number | None  # None when a side is all zeros (undefined) or the file was not read
    rel_l2: Number | None  # ‖b−a‖/‖a‖; None when a is all zeros and b is not
    method: Literal["read", "sha256"]
    note: ValueNote | None = None

    @classmethod
    def of(
        cls,
        equal: bool,
        max_abs: float | None,
        mean_abs: float | None,
        cosine: float | None,
        rel_l2: float | None,
        method: Literal["read", "sha256"] = "read",
        note: ValueNote | None = None,
    ) -> RowValues:
        """From the statistics' floats, with non-finite numbers spelled as JSON reports carry them."""
        return cls(
            equal, json_number(max_abs), json_number(mean_abs), json_number(cosine), json_number(rel_l2), method, note
        )

    def number(self, field_name: str) -> float | None:
        """A statistic as a float (NaN and infinities included), for sorting and display."""
        value = getattr(self, field_name)
        return float(value.lower().replace("infinity", "inf")) if isinstance(value, str) else value

    @property
    def change_order(self) -> tuple[int, float, float]:
        """Where this change ranks, largest first: :func:`value_change_order`."""
        return value_change_order(self.equal, self.number("rel_l2"), self.number("max_abs"))


def value_change_order(equal: bool, rel_l2: float | None, max_abs: float | None) -> tuple[int, float, float]:
    """A sort key that puts the largest value change first: tensors measured as numbers by decreasing relative L2
    (an A of all zeros that B is not, whose rel L2 is undefined, changed without bound: first), ties by max |Δ|;
    then tensors that differ with no measure (a dtype compared only by its bytes, F4 or F6); then equal ones.
    A difference of bytes says nothing of its size, so it is not ranked among sizes."""
    if equal:
        return (2, 0.0, 0.0)
    if max_abs is None:
        return (1, 0.0, 0.0)
    relative = math.inf if rel_l2 is None or math.isnan(rel_l2) else rel_l2
    return (0, -relative, -(math.inf if math.isnan(max_abs) else max_abs))


NoteKind = Literal["rank", "dim", "dtype", "injected", "base_verdict", "did_you_mean"]


class NotePart(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One part of a row's note, as data; :func:`ckptdiff.formats._common.note_text` words it.

    ``rank``/``dim``/``dtype``: A's and B's ``a``/``b`` (``index`` for a dim); ``injected``: ``how`` the engine
    takes it (``embedding``, ``head``, ``tied_head``) from the base's ``name``; ``base_verdict``: ``how``
    (``verified``, ``does_not_fit``) with the tensor the base ``stores``; ``did_you_mean``: the ``side`` label
    and ``name``."""

    kind: NoteKind
    a: str | int | None = None
    b: str | int | None = None
    index: int | None = None
    how: str | None = None
    name: str | None = None
    side: str | None = None
    stores: TensorSide | None = None


class TensorRow(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One tensor name of either side (its JSON object is :class:`ckptdiff.formats.document.TensorRowDocument`);
    a Kimi-K2 pair has 140 k rows, hence a C-built Struct."""

    name: str
    status: Status
    a: TensorSide | None
    b: TensorSide | None
    #: What the passes found about the row, in order (worded by the formats into the JSON ``note``).
    notes: tuple[NotePart, ...] = ()
    #: Value statistics (``--values``).
    values: RowValues | None = None
    #: The id of the policy rule that accepts this row despite its status (:class:`PolicyRule`).
    allowed_by: str | None = None

    @property
    def passes(self) -> bool:
        """Whether this row keeps the comparison compatible (its status is fine, or a rule accepts it)."""
        return self.status in OK_STATUSES or self.allowed_by is not None

    @property
    def compared(self) -> bool:
        """Both sides store it (under this name or their own): a tensor the comparison looked at."""
        return self.a is not None and self.b is not None


class ConfigDiff(msgspec.Struct, frozen=True):
    """One config.json key that differs. ``a``/``b`` is None on the side where the key is absent (the status
    says which); a JSON null in the file is None too, with status ``differs``."""

    path: tuple[str, ...]  # one component per nesting level: ("eagle_config", "eagle_aux_hidden_state_layer_ids")
    a: Any
    b: Any
    status: ConfigStatus

    def __hash__(self) -> int:  # a and b are JSON values: lists and objects count by their contents
        return hash((self.path, hashable(self.a), hashable(self.b), self.status))

    @property
    def key(self) -> str:
        """The path dotted for humans; a component that holds a dot itself is quoted: ``"a.b"`` vs ``a.b``."""
        return dotted_key(self.path)

    def present(self, side: str) -> bool:
        return self.status == "differs" or self.status == f"only_in_{side}"


def dotted_key(path: tuple[str, ...]) -> str:
    return ".".join(
        part if part and "." not in part and '"' not in part else msgspec.json.encode(part).decode() for part in path
    )


class Finding(msgspec.Struct, frozen=True, omit_defaults=True):
    """Something a comparison noticed. Its words come from the message catalogue (``code`` and ``params``);
    ``message`` holds the text of codes the catalogue does not know (yet)."""

    severity: Severity
    code: str  # stable, e.g. "injected_from_base", "config_missing"
    message: str = ""
    #: What it is about: a tensor name or a config key (dotted), when it is about one.
    subject: str | None = None
    #: The finding's data (read-only, a :class:`FrozenDict`).
    params: Mapping[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        force_setattr(self, "params", frozen(self.params))


class EngineEvent(msgspec.Struct, frozen=True, omit_defaults=True):
    """One thing a serving engine's loader does with a checkpoint (``tensor``: the checkpoint name, if one), as
    data like :class:`Finding`: the formats word it from ``wording`` (a key of its family's catalogue) and
    ``params``, and cite ``source``."""

    severity: Severity  # error: the engine raises; warning: loads, not as trained; info: as trained
    code: str  # stable, e.g. "lm_head_random", "skipped_unknown_name"
    tensor: str | None
    wording: str  # e.g. "eagle3.sglang.random_init"
    params: Mapping[str, Any] = msgspec.field(default_factory=dict)  # read-only, as a Finding's
    #: Where the rule was read: ``repo@commit path`` (``(inferred)`` when reasoned from that code); None for
    #: the replay's own events (no config.json).
    source: str | None = None
    #: The id of the policy rule that accepts this event (:class:`PolicyRule`).
    allowed_by: str | None = None

    def __post_init__(self) -> None:
        force_setattr(self, "params", frozen(self.params))


class TargetSpan(msgspec.Struct, frozen=True):
    """Targets of one model-class family and some depths: ``layers`` are inclusive [low, high] ranges."""

    family: str  # the family in words ("DeepSeek-V2/V3-class")
    architectures: tuple[str, ...]  # the target architectures (config.architectures[0]) of the family
    layers: tuple[tuple[int, int], ...]


class Condition(msgspec.Struct, frozen=True):
    """A verdict that holds only on some targets, when no ``--base`` says which one it is: the engine loads the
    drafter as trained on exactly these targets (``code`` names the rule; the event of that code words it)."""

    code: str
    targets: tuple[TargetSpan, ...]


class TensorFate(msgspec.Struct, frozen=True):
    """What an engine does with one checkpoint tensor, and the parameter it fills."""

    name: str
    fate: str  # loaded, renamed, from_target, skipped, error
    parameter: str | None


class ParameterFate(msgspec.Struct, frozen=True):
    """Where an engine's parameter gets its value from."""

    name: str
    fate: str  # loaded, from_target, random, missing, default, not_needed


class EngineResult(msgspec.Struct, frozen=True):
    """One engine's loader replayed on one side: its events, and the outcome they imply."""

    engine: str  # "sglang", "vllm", "trtllm"
    side: str  # "A" or "B"
    events: tuple[EngineEvent, ...]
    #: Each checkpoint tensor's fate (loaded, renamed, from_target, skipped, error) and the parameter it filled.
    tensors: tuple[tuple[str, str, str | None], ...] = ()
    #: Each parameter the engine builds and its fate (loaded, from_target, random, missing, default, not_needed).
    parameters: tuple[tuple[str, str], ...] = ()
    #: What the outcome depends on that ckptdiff was not told (no --base): it holds on these targets only.
    conditions: tuple[Condition, ...] = ()

    @property
    def outcome(self) -> Outcome:
        severities = {event.severity for event in self.events}
        return "fails" if "error" in severities else "degraded" if "warning" in severities else "loads"

    @property
    def passes(self) -> bool:
        """Loads as trained, or a policy rule accepts every event that says otherwise."""
        return all(event.severity == "info" or event.allowed_by is not None for event in self.events)


class Layout(msgspec.Struct, frozen=True):
    """Where a base model keeps its text model, as recognised (:mod:`ckptdiff.base_layouts`)."""

    name: str
    description: str
    multimodal: bool
    recognised_by: str
    text_config: tuple[str, ...]
    embedding: str | None
    lm_head: str | None
    lm_head_tied: bool
    final_norm: str | None


class DtypeTotals(msgspec.Struct, frozen=True):
    parameters: int
    bytes: int


class SideSummary(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a report says about one checkpoint, and where it came from: ``revision`` is a Hub commit,
    ``etag`` an object store's version of the weights (ETag, VersionId or generation)."""

    spec: str
    kind: SideKind
    revision: str | None
    etag: str | None
    files: int
    tensors: int
    parameters: int
    bytes: int
    dtypes: Mapping[str, DtypeTotals]  # read-only
    #: For a base model: where it keeps its text model.
    layout: Layout | None = None
    #: The variants of its drafter family this side is (codes, e.g. ``mla``, ``eagle3.1``; the formats say them).
    variants: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        force_setattr(self, "dtypes", frozen(self.dtypes))

    @classmethod
    def of(cls, checkpoint: Checkpoint, *, layout: Layout | None = None, variants: tuple[str, ...] = ()) -> SideSummary:
        dtypes = checkpoint.dtype_totals()  # one pass over the tensors; the totals add up from it
        kind: SideKind = "store" if checkpoint.kind == "store" else "local" if checkpoint.kind == "local" else "hub"
        return cls(
            spec=checkpoint.spec,
            kind=kind,
            revision=checkpoint.revision if kind != "store" else None,
            etag=checkpoint.revision if kind == "store" else None,
            files=len(checkpoint.files),
            tensors=len(checkpoint.tensors),
            parameters=sum(parameters for parameters, _ in dtypes.values()),
            bytes=sum(nbytes for _, nbytes in dtypes.values()),
            dtypes={dtype: DtypeTotals(p, b) for dtype, (p, b) in dtypes.items()},
            layout=layout,
            variants=variants,
        )

    @property
    def version(self) -> str | None:
        """The revision or ETag, whichever this side has."""
        return self.revision or self.etag


class PolicyRule(msgspec.Struct, frozen=True, omit_defaults=True):
    """One rule of the user's policy, referenced by ``id`` from the rows and events it accepts."""

    id: str  # "allow_missing.1": the kind and its position among that kind's rules (1-based)
    kind: RuleKind
    pattern: str  # the glob, "FROM:TO" or "*" (any dtype change), "ENGINE:CODE"
    origin: RuleOrigin
    path: str | None = None  # the config file, when it came from one


def rule_id(kind: RuleKind, position: int) -> str:
    return f"{kind}.{position}"


@dataclass(frozen=True)
class Report:
    """Everything a run found. The verdict and counts are derived from it, never stored."""

    a: SideSummary
    b: SideSummary | None  # None: one checkpoint checked on its own (``ckptdiff SPEC --engine ...``)
    tensors: tuple[TensorRow, ...]
    config: tuple[ConfigDiff, ...] = ()
    findings: tuple[Finding, ...] = ()
    profile: str | None = None
    base: SideSummary | None = None
    #: The user's rules (flags and config file), which rows and events reference by id.
    rules: tuple[PolicyRule, ...] = ()
    #: Which finding severities fail the gate besides errors: "error" (only errors) or "warning".
    fail_on: FailOn = "error"
    #: The config file ``fail_on`` came from, None for the flag or the default.
    fail_on_origin: str | None = None
    #: An engine verdict that holds only on some targets (``EngineResult.conditions``) fails the gate.
    fail_on_conditional: bool = False
    #: The policy was a ``Policy`` built in Python, not the CLI's flags: its settings are worded as its keywords.
    policy_in_python: bool = False
    #: Tensors the policy's --ignore rules left out: (rule id, how many).
    ignored: tuple[tuple[str, int], ...] = ()
    #: Serving engines replayed on each side (``--engine``), in the order requested.
    engines: tuple[EngineResult, ...] = ()
    #: The command line that produced the report, when run from the CLI.
    command: str | None = None
    #: The version of ckptdiff that built it.
    tool_version: str = ""
    #: How many rows have each status, every status listed (read-only).
    counts: Mapping[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        found = Counter(map(attrgetter("status"), self.tensors))
        object.__setattr__(self, "counts", FrozenDict((status, found[status]) for status in STATUSES))

    def finding_fails(self, finding: Finding) -> bool:
        return finding.severity == "error" or (finding.severity == "warning" and self.fail_on == "warning")

    @cached_property  # the fields are frozen, and dataclasses.replace builds a new Report
    def verdict(self) -> Verdict:
        # the counts say at no cost when every row's status is fine; else a row may still pass by a policy rule
        rows_pass = sum(self.counts[status] for status in OK_STATUSES) == len(self.tensors)
        ok = (
            (rows_pass or all(row.passes for row in self.tensors))
            and not any(self.finding_fails(finding) for finding in self.findings)
            and all(self.engine_passes(result) for result in self.engines)
        )
        return "compatible" if ok else "incompatible"

    def engine_passes(self, result: EngineResult) -> bool:
        """Its events pass, and it holds on any target unless the policy lets a conditional verdict pass."""
        return result.passes and not (self.fail_on_conditional and result.conditions)

    @property
    def compatible(self) -> bool:
        return self.verdict == "compatible"

    @property
    def exit_code(self) -> int:
        return 0 if self.compatible else 1

    @cached_property
    def rule_hits(self) -> Mapping[str, int]:
        """How many rows (--ignore, --allow-*) or engine events (--allow-event) each rule acted on, by id."""
        hits = dict.fromkeys((rule.id for rule in self.rules), 0)
        hits.update(self.ignored)
        for row in self.tensors:
            if row.allowed_by is not None:
                hits[row.allowed_by] = hits.get(row.allowed_by, 0) + 1
        for result in self.engines:
            for event in result.events:
                if event.allowed_by is not None:
                    hits[event.allowed_by] = hits.get(event.allowed_by, 0) + 1
        return FrozenDict(hits)

    @property
    def rules_applied(self) -> tuple[PolicyRule, ...]:
        """The rules that changed a row or an engine event, in the policy's order."""
        return tuple(rule for rule in self.rules if self.rule_hits.get(rule.id))

    @property
    def failing_warnings(self) -> int:
        """How many warning findings fail the gate because of ``--fail-on warning``."""
        return sum(1 for f in self.findings if f.severity == "warning") if self.fail_on == "warning" else 0

    def rule(self, rule_id: str) -> PolicyRule:
        return next(rule for rule in self.rules if rule.id == rule_id)
