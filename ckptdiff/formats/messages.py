"""The message catalogue: the words of findings, engine events, policy rules and engine headlines, from their
codes and params.

Findings and engine events carry a ``code`` and structured ``params``; every format renders their text here,
and nothing reads the text back. Each family registers its findings' and events' words
(:func:`ckptdiff.families.finding_words`, :func:`ckptdiff.families.event_words`). A finding whose code is not
(yet) in the catalogue shows the ``message`` it was built with.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import msgspec

from ..errors import printable_name, quoted_name
from ..families import event_words, finding_words, variant_words
from ..report import EngineEvent, EngineResult, Finding, PolicyRule, Report, SideSummary
from .values_messages import VALUES


def shown_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A finding's or event's params as its words quote them: every string (a tensor name, a config key, a file or
    repo name, a value from a config.json) written as the tables write names (:func:`.errors.printable_name`), in
    lists too; a ``{key: value}`` param is a setting, its key a name and its value left for the words to show as
    JSON. Every format's sentences, the JSON report's included, so quote a name the same way."""
    return {key: _shown(value, setting=True) for key, value in params.items()}


def _shown(value: Any, setting: bool = False) -> Any:
    if isinstance(value, str):
        return printable_name(value)
    if isinstance(value, (list, tuple)):
        return [_shown(item) for item in value]
    if isinstance(value, dict):  # a record in a list (a largest change: its tensor and numbers) is shown whole
        return {_shown(key): item if setting else _shown(item) for key, item in value.items()}
    return value


#: What each kind of rule does to the rows it matches, for "rules applied".
_EFFECT = {
    "ignore": "left out",
    "allow_missing": "accepted as missing from B",
    "allow_extra": "accepted as extra in B",
    "allow_dtype_change": "accepted with a dtype change",
}


def variant_lines(report: Report) -> list[tuple[str, str]]:
    """(side label, its variants in words) for each side whose drafter is a variant of its family (MLA, EAGLE 3.1,
    multi-layer, an MTP layout); one ``("A and B", ...)`` when both sides are the same variants."""
    sides = [("A", report.a)] + ([("B", report.b)] if report.b is not None else [])
    if len(sides) == 2 and report.a.variants == sides[1][1].variants:
        sides = [("A and B", report.a)]
    return [(label, variants_text(side)) for label, side in sides if side.variants]


def variants_text(side: SideSummary) -> str:
    """A side's variant codes in their family's words (a code no family words shows as itself)."""
    words = variant_words()
    return "; ".join(words.get(code, code) for code in side.variants)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def flag(kind: str) -> str:
    return "--" + kind.replace("_", "-")


def rule_text(rule: PolicyRule) -> str:
    """A rule in the words of the command line (its pattern as typed, shell-quoted), plus the config file it came
    from: ``--allow-missing 'x*' (from ckptdiff.toml)``; one a Policy built in Python holds, in its words:
    ``allow_missing 'x*'`` (the Policy's field and the glob, as its errors name them)."""
    if rule.origin == "python":
        return f"{rule.kind} {quoted_name(rule.pattern)}"
    text = flag(rule.kind)
    if not (rule.kind == "allow_dtype_change" and rule.pattern == "*"):
        text += f" {shlex.quote(rule.pattern)}"
    return f"{text} (from {printable_name(rule.path)})" if rule.path else text


def allowed_by_text(report: Report, rule_id: str) -> str:
    """The rule a row or event's ``allowed_by`` references, in words."""
    return rule_text(report.rule(rule_id))


def fail_on_text(report: Report) -> str | None:
    """Names ``--fail-on warning`` when it makes warning findings fail the gate."""
    count = report.failing_warnings
    if not count:
        return None
    origin = f" (from {printable_name(report.fail_on_origin)})" if report.fail_on_origin else ""
    verb = "fails" if count == 1 else "fail"
    setting = "fail_on='warning'" if report.policy_in_python else "--fail-on warning"
    return f"{setting}{origin}: {plural(count, 'warning finding')} {verb} the gate"


def rules_applied(report: Report) -> list[str]:
    """The rules that changed a row, an engine event or the verdict, each with what it did."""
    out = []
    for rule in report.rules_applied:
        count = report.rule_hits[rule.id]
        if rule.kind == "allow_event":
            out.append(f"{rule_text(rule)}: {plural(count, 'engine event')} accepted")
        else:
            out.append(f"{rule_text(rule)}: {plural(count, 'tensor')} {_EFFECT[rule.kind]}")
    warning = fail_on_text(report)
    return out + ([warning] if warning else [])


class _Fields(dict[str, object]):
    """An event's params for its template; a field the template names but the event lacks shows as "?"."""

    def __missing__(self, key: str) -> str:
        return "?"


class EventCatalogue(msgspec.Struct, frozen=True):
    """Event wording key → template (or a function of the params); params worded before a template takes them;
    fields derived from the params; headline phrases by code."""

    words: dict[str, Any]
    param_words: dict[str, Any]
    derived: dict[str, Any]
    summaries: dict[str, str]


@cache  # built on first use: a run without engine events does not load the families' wording modules
def event_catalogue() -> EventCatalogue:
    words: dict[str, Any] = {}
    param_words: dict[str, Any] = {}
    derived: dict[str, Any] = {}
    summaries: dict[str, str] = {}
    for module in event_words():
        words |= module.EVENTS
        param_words |= getattr(module, "PARAM_WORDS", {})
        derived |= getattr(module, "DERIVED", {})
        summaries |= getattr(module, "SUMMARIES", {})
    return EventCatalogue(words, param_words, derived, summaries)


def _event_fields(params: Mapping[str, Any]) -> _Fields:
    catalogue = event_catalogue()
    param_words = catalogue.param_words
    fields = _Fields({key: param_words[key](v, params) if key in param_words else v for key, v in params.items()})
    for key, derive in catalogue.derived.items():
        if key not in fields:
            fields[key] = derive(params)
    for key, word in param_words.items():  # a worded param the event left out reads as its absence
        if key not in fields:
            fields[key] = word(None, params)
    return fields


def event_message(event: EngineEvent) -> str:
    """An engine event in words, followed by its rule's citation: ``lm_head.weight is missing ... [repo@v path]``."""
    words = event_catalogue().words.get(event.wording)
    if words is None:
        text = event.code
    elif isinstance(words, str):
        text = words.format_map(_event_fields(shown_params(event.params)))
    else:
        text = words(shown_params(event.params))
    return f"{text} [{event.source}]" if event.source else text


def _pattern(names: list[str]) -> str:
    """A short name for several tensor names: their common dotted prefix + ``*``, or the one name."""
    if len(names) == 1:
        return names[0]
    parts = [name.split(".") for name in names]
    common: list[str] = []
    for column in zip(*parts):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    return (".".join(common) + ".*") if common else f"{len(names)} names"


#: Event codes that say a tensor was skipped, told together in the headline.
_SKIPPED = ("skipped_unknown_name", "ignored_name")


def engine_summary(result: EngineResult) -> str:
    """One line: what went wrong, most serious first; empty when the engine uses every weight as trained."""
    events = result.events
    parts: list[str] = []
    for event in events:
        if event.severity == "error" and len(parts) < 2:
            phrase = event_catalogue().summaries.get(event.code)
            if phrase is not None:
                parts.append(phrase.format_map(_event_fields(shown_params(event.params))))
            else:
                parts.append(event.code + (f" ({printable_name(event.tensor)})" if event.tensor else ""))
    skipped = [e.tensor for e in events if e.code in _SKIPPED and e.tensor]
    if skipped:
        count = len(skipped)
        parts.append(f"{printable_name(_pattern(skipped))} skipped ({count} tensor{'s' if count > 1 else ''})")
    random_params = [name for name, fate in result.parameters if fate == "random"]
    if random_params:
        count = len(random_params)
        parts.append(f"{count} weight{'s' if count > 1 else ''} random ({printable_name(_pattern(random_params))})")
    from ..families.rules import PARAMETER_FATES  # with an engine's events only: the rules load with the engines

    for event in events:
        told = event.code in _SKIPPED or PARAMETER_FATES.get(event.code) == "random"
        if event.severity == "warning" and not told:
            parts.append(event.code + (f" ({printable_name(event.tensor)})" if event.tensor else ""))
    return "; ".join(dict.fromkeys(parts))


def headline(result: EngineResult) -> str:
    """``sglang B: degraded — lm_head random``."""
    summary = engine_summary(result)
    return f"{result.engine} {result.side}: {result.outcome}" + (f" — {summary}" if summary else "")


def _nothing_compared(params: Mapping[str, Any], report: Report) -> str:
    ignored, in_a, in_b = params.get("ignored", 0), params.get("tensors_a", 0), params.get("tensors_b", 0)
    python = report.policy_in_python  # a Policy built in Python: its keywords, not the flags
    if ignored:
        why = f"{'ignore' if python else '--ignore'} rules left out all {plural(ignored, 'tensor')} both sides share"
    else:
        why = f"A has {plural(in_a, 'tensor')}, B {in_b}, none under one name"
    accepts = "Policy(allow_empty=True)" if python else "--allow-empty"
    return f"no tensor was compared ({why}): an empty comparison is not a pass ({accepts} accepts it)"


def _rule_unmatched(params: Mapping[str, Any], report: Report) -> str:
    rule = report.rule(params["rule"])
    acts_on = "engine event" if rule.kind == "allow_event" else "tensor"
    return f"{rule_text(rule)} matched no {acts_on}: the rule did nothing (a typo, or no longer needed?)"


def _rule_other_side(params: Mapping[str, Any], report: Report) -> str:
    rule = report.rule(params["rule"])
    matches = plural(params["matches"], "tensor")
    if rule.kind == "allow_dtype_change":
        mirror = ":".join(reversed(rule.pattern.split(":")))
        return (
            f"{rule_text(rule)} matched nothing, but {matches} change dtype the other way ({mirror}): A and B swapped?"
        )
    side = "A" if rule.kind == "allow_extra" else "B"
    return (
        f"{rule_text(rule)} matched nothing, but {matches} only in {side} match it: "
        f"A and B swapped, or {params['mirror'] if rule.origin == 'python' else flag(params['mirror'])} meant?"
    )


def _config_missing(params: Mapping[str, Any], report: Report) -> str:
    side = report.a if params["side"] == "A" else report.b
    spec = f" ({printable_name(side.spec)})" if side is not None else ""
    return f"{params['side']}{spec} has no config.json; configs not compared"


#: Finding code → its text as a template over its params (``str.format``).
TEMPLATES: dict[str, str] = {
    "naming_conventions_differ": (
        "A uses the {a} naming, B the {b} one; tensors were matched after mapping both to one naming (the JSON "
        "report keeps each side's own names). Check that the engine you deploy loads these names: SGLang skips "
        "names it does not know silently, leaving those weights randomly initialised"
    ),
}


def _from_params(render: Callable[[Mapping[str, Any]], str]) -> Callable[[Mapping[str, Any], Report], str]:
    return lambda params, report: render(params)


def _template(code: str) -> Callable[[Mapping[str, Any], Report], str]:
    return lambda params, report: TEMPLATES[code].format_map(params)


@cache  # built on first use: a run without findings does not load the families' wording modules
def finding_catalogue() -> dict[str, Callable[[Mapping[str, Any], Report], str]]:
    """Finding code → how its text is made from its params (and the report, for the rules it names)."""
    return {
        **{code: _template(code) for code in TEMPLATES},
        "nothing_compared": _nothing_compared,
        "policy_rule_unmatched": _rule_unmatched,
        "policy_rule_other_side": _rule_other_side,
        "config_missing": _config_missing,
        **{code: _from_params(render) for code, render in (finding_words() | VALUES).items()},
    }


def finding_message(report: Report, finding: Finding) -> str:
    """A finding in words, each name it quotes written as the tables write names."""
    render = finding_catalogue().get(finding.code)
    return render(shown_params(finding.params), report) if render is not None else finding.message
