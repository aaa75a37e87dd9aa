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

Globs use :func:`fnmatch.fnmatchcase` (``*`` also crosses dots) against the row's name and each side's own
name. An accepted row keeps its true status; it gains ``allowed_by`` naming the rule, and the rule is listed
in ``Report.rules_applied``.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from .errors import CkptdiffError

if TYPE_CHECKING:
    from .report import EngineResult, Finding, TensorRow

FailOn = Literal["error", "warning"]
FAIL_ON_CHOICES: tuple[str, ...] = ("error", "warning")
ANY_DTYPE_CHANGE = "*"
#: Policy fields that hold lists of patterns, in the order reports name them.
PATTERN_FIELDS: tuple[str, ...] = ("ignore", "allow_missing", "allow_extra", "allow_dtype_change", "allow_event")


class PolicyError(CkptdiffError):
    """A policy rule (flag or config-file setting) that cannot be understood."""


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


@dataclass(frozen=True)
class Policy:
    ignore: tuple[str, ...] = ()  # globs of tensor names left out of the comparison
    allow_missing: tuple[str, ...] = ()  # globs: in A but absent from B is fine
    allow_extra: tuple[str, ...] = ()  # globs: in B but absent from A is fine
    allow_dtype_change: tuple[str, ...] = ()  # "*" or "FROM:TO" pairs (A's dtype : B's dtype)
    allow_event: tuple[str, ...] = ()  # "ENGINE:CODE" globs: engine events that do not fail the gate
    fail_on: FailOn = "error"
    #: Settings that came from a config file rather than the command line: (field, file shown to users).
    origins: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.fail_on not in FAIL_ON_CHOICES:
            raise PolicyError(self._where("fail_on"), f"{self.fail_on!r} is not one of {', '.join(FAIL_ON_CHOICES)}")
        for field in PATTERN_FIELDS:
            for pattern in getattr(self, field):
                if not isinstance(pattern, str) or not pattern:
                    raise PolicyError(self._where(field), f"{pattern!r} is not a non-empty glob")
        object.__setattr__(self, "allow_dtype_change", tuple(self._dtype_rule(r) for r in self.allow_dtype_change))
        for rule in self.allow_event:
            if rule.count(":") != 1 or not all(rule.split(":")):
                example = "e.g. sglang:lm_head_random"
                raise PolicyError(self._where("allow_event"), f"{rule!r} is not ENGINE:CODE ({example})")

    def _where(self, field: str) -> str:
        origin = dict(self.origins).get(field)
        return f"{origin}: {field.replace('_', '-')}" if origin else flag_name(field)

    def _dtype_rule(self, rule: str) -> str:
        from .dtypes import DTYPE_BITS

        if rule == ANY_DTYPE_CHANGE:
            return rule
        parts = rule.split(":")
        if len(parts) != 2:
            raise PolicyError(
                self._where("allow_dtype_change"),
                f"{rule!r} is not FROM:TO (e.g. BF16:F32)",
                "a bare --allow-dtype-change goes after A and B",
            )
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

    def describe(self, field: str, value: str | None = None) -> str:
        """A rule in the words of the command line, plus the config file it came from."""
        text = flag_name(field)
        if value is not None and not (field == "allow_dtype_change" and value == ANY_DTYPE_CHANGE):
            text += f" {shlex.quote(value)}"
        origin = dict(self.origins).get(field)
        return f"{text} (from {origin})" if origin else text


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def apply_policy(
    policy: Policy, rows: Sequence[TensorRow]
) -> tuple[tuple[TensorRow, ...], tuple[tuple[str, int], ...]]:
    """Leave out ignored rows and mark accepted ones (``allowed_by``); returns the rows and, per --ignore glob
    that acted, how many rows it left out.

    Linear in the number of rows: each glob list is one compiled regex, tried only on rows it can affect.
    """
    if policy.is_default:
        return tuple(rows), ()
    ignore = _Globs(policy.ignore)
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
        rule: tuple[str, str] | None = None
        if row.status in allow:
            field, globs = allow[row.status]
            pattern = globs.first(_names(row))
            if pattern is not None:
                rule = (field, pattern)
        elif row.status == "dtype_mismatch" and row.a is not None and row.b is not None:
            a_dtype, b_dtype = row.a.dtype, row.b.dtype
            found = next((r for r in policy.allow_dtype_change if _dtype_rule_matches(r, a_dtype, b_dtype)), None)
            if found is not None:
                rule = ("allow_dtype_change", found)
        if rule is not None:
            row = replace(row, allowed_by=policy.describe(*rule))
        kept.append(row)
    return tuple(kept), tuple((p, ignored[p]) for p in policy.ignore if p in ignored)


def apply_event_policy(policy: Policy, results: Sequence[EngineResult]) -> tuple[EngineResult, ...]:
    """Engine results with ``allowed_by`` on the warning and error events an --allow-event rule accepts."""
    if not policy.allow_event:
        return tuple(results)
    globs = _Globs(policy.allow_event)
    out = []
    for result in results:
        events = []
        for event in result.events:
            pattern = globs.first([f"{result.engine}:{event.code}"]) if event.severity != "info" else None
            events.append(replace(event, allowed_by=policy.describe("allow_event", pattern)) if pattern else event)
        out.append(replace(result, events=tuple(events)))
    return tuple(out)


_WHAT = {
    "ignore": "left out",
    "allow_missing": "accepted as missing from B",
    "allow_extra": "accepted as extra in B",
    "allow_dtype_change": "accepted with a dtype change",
}


def rules_applied(
    policy: Policy,
    rows: Sequence[TensorRow],
    ignored: Sequence[tuple[str, int]],
    findings: Sequence[Finding],
    engines: Sequence[EngineResult] = (),
) -> tuple[str, ...]:
    """The rules that changed a row, an engine event or the verdict, in words, derived from what they marked."""
    if policy.is_default:
        return ()
    hits: dict[str, int] = dict.fromkeys((policy.describe("ignore", p) for p, _ in ignored), 0)
    for pattern, count in ignored:
        hits[policy.describe("ignore", pattern)] = count
    for row in rows:
        if row.allowed_by is not None:
            hits[row.allowed_by] = hits.get(row.allowed_by, 0) + 1
    for result in engines:
        for event in result.events:
            if event.allowed_by is not None:
                hits[event.allowed_by] = hits.get(event.allowed_by, 0) + 1
    rules = []
    for field in PATTERN_FIELDS:
        for pattern in getattr(policy, field):
            count = hits.get(policy.describe(field, pattern), 0)
            if count and field == "allow_event":
                rules.append(f"{policy.describe(field, pattern)}: {_plural(count, 'engine event')} accepted")
            elif count:
                rules.append(f"{policy.describe(field, pattern)}: {_plural(count, 'tensor')} {_WHAT[field]}")
    warning = fail_on_rule(policy, findings)
    return tuple(rules) + ((warning,) if warning else ())


def fail_on_rule(policy: Policy, findings: Sequence[Finding]) -> str | None:
    """Names ``--fail-on warning`` when it makes warning findings fail the gate."""
    if policy.fail_on != "warning":
        return None
    warnings = sum(1 for f in findings if f.severity == "warning")
    if not warnings:
        return None
    verb = "fails" if warnings == 1 else "fail"
    return f"{policy.describe('fail_on', 'warning')}: {_plural(warnings, 'warning finding')} {verb} the gate"
