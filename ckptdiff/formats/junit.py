"""JUnit XML, the test-report format CI systems already display (Jenkins, GitLab, GitHub test reporters).

One ``<testsuite>`` per comparison; one ``<testcase>`` per tensor (classname ``tensors``), per finding
(classname ``findings``), one for config.json (classname ``config``) and one per engine and side
(classname ``engines``, named like ``sglang B``). A tensor that breaks compatibility is a ``<failure>``
whose ``type`` is its status and whose message says why; a row a policy rule accepts is ``<skipped>`` with
the rule; findings that fail the gate are failures typed by their code; an engine that does not load a side
as trained is a failure typed by its outcome (``degraded``, ``fails``), or skipped when the policy accepts
its events. Only the attributes and elements of the common JUnit schema are used, and no timestamps or host
names, so the same inputs give the same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..report import Report, TensorRow
from . import RenderOptions
from ._common import config_cells, event_line, note_text, printable_name, shape_dtype, side_display
from .messages import allowed_by_text, finding_message, headline, rules_applied, variants_text


def escape(value: str) -> str:
    """Text a JUnit viewer shows as written: every character that is not printable (controls, bidi overrides,
    line separators, lone surrogates: a superset of what XML 1.0 cannot carry at all) is shown as ``\\xNN``,
    ``\\uNNNN``; newlines and tabs stay, as layout. ElementTree escapes ``&``, ``<``, ``>`` and quotes itself.
    Every attribute and text of the document goes through it."""
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() or c in "\n\t" else ascii(c)[1:-1] for c in value)


def _element(parent: ET.Element, tag: str, text: str | None = None, **attributes: str) -> ET.Element:
    element = ET.SubElement(parent, tag, {key: escape(value) for key, value in attributes.items()})
    if text is not None:
        element.text = escape(text)
    return element


def _sides(row: TensorRow) -> str:
    return f"A: {shape_dtype(row.a)}\nB: {shape_dtype(row.b)}"  # a side stored under another name says "as" it


def render(report: Report, options: RenderOptions) -> str:
    suites = ET.Element("testsuites", name="ckptdiff")
    title = f"ckptdiff {side_display(report.a)}" + (f" vs {side_display(report.b)}" if report.b else "")
    suite = _element(suites, "testsuite", name=title)
    properties = _element(suite, "properties")
    facts = [
        ("ckptdiff.version", report.tool_version),
        ("verdict", report.verdict),
        ("a", printable_name(report.a.spec)),
        ("a.revision", report.a.version or ""),
    ]
    if report.b is not None:
        facts += [("b", printable_name(report.b.spec)), ("b.revision", report.b.version or "")]
    if report.base is not None:
        facts += [("base", printable_name(report.base.spec)), ("base.revision", report.base.version or "")]
        if report.base.layout is not None:
            facts.append(("base.layout", report.base.layout.description))
    facts += [("profile", report.profile or "none"), ("fail_on", report.fail_on)]
    sides = [("a", report.a)] + ([("b", report.b)] if report.b is not None else [])
    facts += [(f"{label}.variants", variants_text(side)) for label, side in sides if side.variants]
    facts += [(f"rule.{i}", rule) for i, rule in enumerate(rules_applied(report), 1)]
    if report.command:
        facts.append(("command", report.command))
    for name, value in facts:
        _element(properties, "property", name=name, value=value)

    tests = failures = skipped = 0
    for row in report.tensors:
        tests += 1
        case = _element(suite, "testcase", classname="tensors", name=printable_name(row.name))
        if row.allowed_by is not None:
            skipped += 1
            _element(case, "skipped", message=f"{row.status}, allowed by {allowed_by_text(report, row.allowed_by)}")
        elif not row.passes:
            failures += 1
            note = note_text(row)
            reason = f"{row.status}: {note}" if note else row.status
            _element(case, "failure", _sides(row), message=reason, type=row.status)
        elif row.status != "match":
            _element(case, "system-out", f"{row.status}: {note_text(row) or ''}\n{_sides(row)}")

    seen: dict[str, int] = {}
    for finding in report.findings:
        tests += 1
        seen[finding.code] = seen.get(finding.code, 0) + 1
        name = finding.code if seen[finding.code] == 1 else f"{finding.code} ({seen[finding.code]})"
        case = _element(suite, "testcase", classname="findings", name=name)
        message = finding_message(report, finding)
        if report.finding_fails(finding):
            failures += 1
            _element(case, "failure", f"{finding.severity}: {message}", message=message, type=finding.code)
        else:
            _element(case, "system-out", f"{finding.severity}: {message}")

    if report.b is not None:
        tests += 1
        case = _element(suite, "testcase", classname="config", name="config.json")
        if report.config:
            lines = [f"{printable_name(d.key)}: {' vs '.join(config_cells(d))} ({d.status})" for d in report.config]
            _element(case, "system-out", "\n".join(lines))

    for result in report.engines:
        tests += 1
        case = _element(suite, "testcase", classname="engines", name=f"{result.engine} {result.side}")
        events = "\n".join(f"{event.severity} {event_line(report, event)}" for event in result.events)
        if result.passes and result.outcome != "loads":
            skipped += 1
            _element(case, "skipped", events, message=f"{headline(result)} (allowed by policy)")
        elif not result.passes:
            failures += 1
            _element(case, "failure", events, message=headline(result), type=result.outcome)
        elif events:
            _element(case, "system-out", events)

    if not report.compatible and not failures:  # the verdict must show up as a failure somewhere
        tests += 1
        failures += 1
        case = _element(suite, "testcase", classname="ckptdiff", name="verdict")
        _element(case, "failure", report.verdict, message=report.verdict, type="verdict")

    # the common schema (Jenkins junit-10.xsd) has no "skipped" on <testsuites>, only on <testsuite>
    suites.attrib.update({"tests": str(tests), "failures": str(failures), "errors": "0", "time": "0"})
    suite.attrib.update(
        {"tests": str(tests), "failures": str(failures), "errors": "0", "skipped": str(skipped), "time": "0"}
    )
    ET.indent(suites, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
