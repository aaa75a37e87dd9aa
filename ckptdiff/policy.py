"""What a user allows: rules that leave names out or accept differences, and when warnings fail the gate.

Vocabulary (A is the reference, B the candidate):

- ``--ignore GLOB``: tensors whose name matches are left out of the comparison altogether.
- ``--allow-missing GLOB``: a tensor in A but **not in B** (status ``only_in_a``) is acceptable.
- ``--allow-extra GLOB``: a tensor in B but **not in A** (status ``only_in_b``) is acceptable.
- ``--allow-dtype-change [FROM:TO]``: a tensor whose dtype is FROM in A and TO in B, shapes equal, is
  acceptable; bare (no value) accepts any dtype change. Either side may be ``*``.
- ``--allow-event ENGINE:CODE``: an engine event (``--engine``) with that code does not fail the gate, e.g.
  ``sglang:lm_head_random``; both parts are globs (``*:embed_tokens_overridden``). The engine's outcome is
  still reported as it is.
- ``--fail-on error|warning``: whether warning findings fail the gate too (errors always do).
- ``--fail-on-conditional``: an engine verdict that holds only on some targets (no ``--base`` to decide it:
  "loads if the target is a 61-layer DeepSeek-V2/V3 model") fails the gate, for teams that always pass their
  target; without it such a verdict is a notice.
- ``--allow-empty``: a comparison in which no tensor is compared (both sides empty, or every name ignored)
  may pass; without it, it fails with the finding ``nothing_compared``.

Globs use :func:`fnmatch.fnmatchcase` (``*`` also crosses dots) against the row's name and each side's own
name. An accepted row keeps its true status; its ``allowed_by`` holds the id of the rule (a
:class:`~ckptdiff.report.PolicyRule` the report lists). A rule that acts on nothing is reported as a finding
(``policy_rule_unmatched``), and so is one that would act on the other side (``policy_rule_other_side``:
arguments swapped, or ``--allow-missing`` meant for ``--allow-extra``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import cast

import msgspec
from msgspec.structs import replace

from .errors import CkptdiffError, scrub_secrets
from .policy_keys import FAIL_ON_CHOICES, PATTERN_FIELDS
from .report import EngineResult, FailOn, Finding, PolicyRule, RuleKind, RuleOrigin, TensorRow, rule_id

__all__ = ["FailOn", "Policy", "PolicyError", "apply_event_policy", "apply_policy", "idle_rule_findings"]

ANY_DTYPE_CHANGE = "*"


class PolicyError(CkptdiffError):
    """A policy rule (flag or config-file setting) that cannot be understood."""


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


@dataclass(frozen=True)
class Policy:
    """The user's rules. ``origins`` names the settings that came from a config file: (field, file shown)."""

    ignore: tuple[str, ...] = ()  # globs of tensor names left out of the comparison
    allow_missing: tuple[str, ...] = ()  # globs: in A but absent from B is fine
    allow_extra: tuple[str, ...] = ()  # globs: in B but absent from A is fine
    allow_dtype_change: tuple[str, ...] = ()  # "*" or "FROM:TO" pairs (A's dtype : B's dtype)
    allow_event: tuple[str, ...] = ()  # "ENGINE:CODE" globs: engine events that do not fail the gate
    fail_on: FailOn = "error"
    #: A comparison in which no tensor is compared may pass (``--allow-empty``).
    allow_empty: bool = False
    #: An engine verdict conditional on the target fails the gate (``--fail-on-conditional``).
    fail_on_conditional: bool = False
    origins: tuple[tuple[str, str], ...] = ()
    #: Made from the command line's flags: an error names a setting by its flag (``--ignore``) rather than by its
    #: keyword here (``ignore``); one from a config file (``origins``) names the file and its key either way.
    flags: bool = dataclass_field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.fail_on not in FAIL_ON_CHOICES:
            raise PolicyError(self._where("fail_on"), f"{self.fail_on!r} is not one of {', '.join(FAIL_ON_CHOICES)}")
        for switch in ("allow_empty", "fail_on_conditional"):
            value = getattr(self, switch)
            if not isinstance(value, bool):  # the words of where it was written: TOML's true, Python's True
                words = "true or false" if self.origin(switch) is not None else "True or False"
                raise PolicyError(self._where(switch), f"{value!r} is not {words}")
        for field in PATTERN_FIELDS:
            patterns = getattr(self, field)
            if isinstance(patterns, str) or not isinstance(patterns, (tuple, list)):
                hint = None
                if isinstance(patterns, str) and not self.flags and self.origin(field) is None:
                    hint = f"a string is one glob: give a list, {field}=[{patterns!r}]"
                raise PolicyError(self._where(field), f"{patterns!r} is not a list of globs", hint)
            object.__setattr__(self, field, tuple(patterns))
            for pattern in patterns:
                if not isinstance(pattern, str) or not pattern.strip():  # blank: an unset variable's ' ' too
                    raise PolicyError(self._where(field), f"{pattern!r} is not a non-empty glob")
        object.__setattr__(self, "allow_dtype_change", tuple(self._dtype_rule(r) for r in self.allow_dtype_change))
        for rule in self.allow_event:
            if rule.count(":") != 1 or not all(rule.split(":")):
                example = "e.g. sglang:lm_head_random"
                raise PolicyError(self._where("allow_event"), f"{rule!r} is not ENGINE:CODE ({example})")
            from .families.event_codes import allow_rule_defect  # a typo fails before anything is read

            defect = allow_rule_defect(rule)
            if defect is not None:
                raise PolicyError(self._where("allow_event"), f"{rule!r}: {defect}")

    def _where(self, field: str) -> str:
        origin = dict(self.origins).get(field)
        if origin:
            return f"{origin}: {field.replace('_', '-')}"
        return flag_name(field) if self.flags else field

    def _dtype_rule(self, rule: str) -> str:
        from .dtypes import DTYPE_BITS

        if rule == ANY_DTYPE_CHANGE:
            return rule
        parts = rule.split(":")
        if len(parts) != 2:
            if self.origin("allow_dtype_change") is not None:  # "true" there, not a bare flag, allows any
                hint = "allow-dtype-change = true allows any change"
            else:
                hint = "a bare --allow-dtype-change goes after A and B" if self.flags else "'*' allows any change"
            raise PolicyError(self._where("allow_dtype_change"), f"{rule!r} is not FROM:TO (e.g. BF16:F32)", hint)
        normalised = []
        for dtype in parts:
            dtype = dtype.strip().upper()
            if dtype != ANY_DTYPE_CHANGE and dtype not in DTYPE_BITS:
                raise PolicyError(
                    self._where("allow_dtype_change"),
                    f"{dtype or '(empty)'!r} in {rule!r} is not a safetensors dtype",
                    f"one of {', '.join(DTYPE_BITS)} or *",
                )
            normalised.append(dtype)
        return ":".join(normalised)

    @property
    def is_default(self) -> bool:
        return not any(getattr(self, f) for f in PATTERN_FIELDS) and self.fail_on == "error"

    def origin(self, field: str) -> str | None:
        """The config file a setting came from, None for a flag (or the default)."""
        return dict(self.origins).get(field)

    @property
    def rules(self) -> tuple[PolicyRule, ...]:
        """Every pattern rule as a structured reference, in the order reports list them."""
        out = []
        for field in PATTERN_FIELDS:
            kind = cast(RuleKind, field)
            path = self.origin(field)
            for position, pattern in enumerate(getattr(self, field), 1):
                origin: RuleOrigin = "config" if path else "flag" if self.flags else "python"
                # the record is what reports show: a token pasted into a glob is scrubbed there
                out.append(PolicyRule(rule_id(kind, position), kind, scrub_secrets(pattern), origin, path))
        return tuple(out)

    def rule_ids(self, field: str) -> dict[str, str]:
        """A kind's patterns → their rule ids."""
        return {pattern: rule_id(cast(RuleKind, field), i) for i, pattern in enumerate(getattr(self, field), 1)}


class _Globs:
    """Several globs matched at once; reports which one matched first."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._each = [re.compile(fnmatch.translate(p)) for p in self.patterns]
        self._any = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in self.patterns)) if patterns else None

    def first(self, names: Iterable[str]) -> str | None:
        if self._any is None:
            return None
        for name in names:
            if self._any.match(name):
                return next(p for p, rx in zip(self.patterns, self._each) if rx.match(name))
        return None


def _names(row: TensorRow) -> Iterable[str]:
    yield row.name
    for side in (row.a, row.b):
        if side is not None and side.name is not None and side.name != row.name:
            yield side.name


def _dtype_rule_matches(rule: str, a: str, b: str) -> bool:
    if rule == ANY_DTYPE_CHANGE:
        return True
    want_a, want_b = rule.split(":")
    return want_a in (ANY_DTYPE_CHANGE, a) and want_b in (ANY_DTYPE_CHANGE, b)


def apply_policy(
    policy: Policy, rows: Sequence[TensorRow]
) -> tuple[tuple[TensorRow, ...], tuple[tuple[str, int], ...]]:
    """Leave out ignored rows and mark accepted ones (``allowed_by``: the rule's id); returns the rows and, per
    --ignore rule that acted, its id and how many rows it left out.

    Linear in the number of rows: each glob list is one compiled regex, tried only on rows it can affect.
    """
    if policy.is_default:
        return tuple(rows), ()
    ignore = _Globs(policy.ignore)
    ids = {field: policy.rule_ids(field) for field in PATTERN_FIELDS}
    allow = {
        "only_in_a": ("allow_missing", _Globs(policy.allow_missing)),
        "only_in_b": ("allow_extra", _Globs(policy.allow_extra)),
    }
    ignored: dict[str, int] = {}
    kept: list[TensorRow] = []
    for row in rows:
        if ignore.patterns:
            pattern = ignore.first(_names(row))
            if pattern is not None:
                ignored[pattern] = ignored.get(pattern, 0) + 1
                continue
        rule: str | None = None
        if row.status in allow:
            field, globs = allow[row.status]
            pattern = globs.first(_names(row))
            if pattern is not None:
                rule = ids[field][pattern]
        elif row.status == "dtype_mismatch" and row.a is not None and row.b is not None:
            a_dtype, b_dtype = row.a.dtype, row.b.dtype
            found = next((r for r in policy.allow_dtype_change if _dtype_rule_matches(r, a_dtype, b_dtype)), None)
            if found is not None:
                rule = ids["allow_dtype_change"][found]
        if rule is not None:
            row = msgspec.structs.replace(row, allowed_by=rule)
        kept.append(row)
    return tuple(kept), tuple((ids["ignore"][p], ignored[p]) for p in policy.ignore if p in ignored)


def apply_event_policy(policy: Policy, results: Sequence[EngineResult]) -> tuple[EngineResult, ...]:
    """Engine results with ``allowed_by`` on the warning and error events an --allow-event rule accepts."""
    if not policy.allow_event:
        return tuple(results)
    globs = _Globs(policy.allow_event)
    ids = policy.rule_ids("allow_event")
    out = []
    for result in results:
        events = []
        for event in result.events:
            pattern = globs.first([f"{result.engine}:{event.code}"]) if event.severity != "info" else None
            events.append(msgspec.structs.replace(event, allowed_by=ids[pattern]) if pattern else event)
        out.append(replace(result, events=tuple(events)))
    return tuple(out)


#: For a rule that acted on nothing: the row status it acts on, and the status its mirror rule acts on.
_OTHER_SIDE: dict[str, tuple[str, str]] = {
    "allow_missing": ("only_in_b", "allow_extra"),
    "allow_extra": ("only_in_a", "allow_missing"),
}


def idle_rule_findings(
    policy: Policy,
    rows: Sequence[TensorRow],
    hits: Mapping[str, int],
    *,
    engines_run: bool,
) -> list[Finding]:
    """A finding for each rule that acted on nothing: ``policy_rule_other_side`` when it matches tensors of the
    other side (swapped A and B, or the mirror flag meant), else ``policy_rule_unmatched``. --allow-event rules
    count only when engines ran."""
    out: list[Finding] = []
    for rule in policy.rules:
        if hits.get(rule.id) or (rule.kind == "allow_event" and not engines_run):
            continue
        other = _other_side_matches(rule.kind, rule.pattern, rows)
        if other:
            mirror = _OTHER_SIDE.get(rule.kind, (None, rule.kind))[1]
            params = {"rule": rule.id, "matches": other, "mirror": mirror}
            out.append(Finding("warning", "policy_rule_other_side", subject=rule.id, params=params))
        else:
            out.append(Finding("warning", "policy_rule_unmatched", subject=rule.id, params={"rule": rule.id}))
    return out


def _other_side_matches(kind: str, pattern: str, rows: Sequence[TensorRow]) -> int:
    """How many rows the rule would act on had A and B been swapped."""
    if kind in _OTHER_SIDE:
        status = _OTHER_SIDE[kind][0]
        globs = _Globs([pattern])
        return sum(1 for row in rows if row.status == status and globs.first(_names(row)) is not None)
    if kind == "allow_dtype_change" and pattern != ANY_DTYPE_CHANGE:
        from_dtype, to_dtype = pattern.split(":")
        swapped = f"{to_dtype}:{from_dtype}"
        return sum(
            1
            for row in rows
            if row.status == "dtype_mismatch"
            and row.a is not None
            and row.b is not None
            and _dtype_rule_matches(swapped, row.a.dtype, row.b.dtype)
        )
    return 0
