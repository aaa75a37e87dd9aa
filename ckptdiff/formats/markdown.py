"""A self-contained markdown report for PRs, run logs and CI step summaries."""

from __future__ import annotations

import re

from tabulate import tabulate

from ..errors import printable
from ..report import Report, SideSummary
from . import RenderOptions
from ._common import (
    VALUE_HEADERS,
    config_cells,
    counts_line,
    display_rows,
    event_text,
    has_values,
    human_bytes,
    human_count,
    row_note,
    shape_dtype,
    value_cells,
)
from .messages import finding_message, headline, rules_applied

_MARK = {"compatible": "✅", "incompatible": "❌"}
#: What markdown acts on in text: emphasis, code, links and images, raw HTML and entities, table cells (an
#: underscore inside a word, as in most names, emphasises nothing).
_MARKUP = re.compile(r"[\\`*\[<>|~&!]")
#: A scheme's "://" or "www.": GFM turns the text after them into a link.
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(?=://)|(?<=www)(?=\.)", re.IGNORECASE)
_BACKTICKS = re.compile("`+")
#: An "@" that could start a GitHub @-mention (not after a word character) or an e-mail autolink (a domain
#: with a dot after it) gets U+2060 WORD JOINER after it; "org/repo@commit" stays as it is.
_MENTION_OR_EMAIL = re.compile(r"(?<!\w)@|@(?=[\w-]+\.\w)")


def escape(text: str, *, code: bool = False, table: bool = False) -> str:
    """Outside text (names, specs, messages, server strings) made inert for a PR comment or step summary.

    Control characters are shown escaped. As text (``code=False``), markdown's punctuation is backslash-
    escaped, autolinks are broken before "://" and "www.", and an "@" starts neither a mention nor an e-mail
    link. As a code span (``code=True``), the fence is longer than any run of backticks inside, so nothing ends
    it early. In a table cell (``table=True``) "|" is escaped in both, so a name cannot shift the columns.
    """
    text = printable(text)
    if code:
        body = text.replace("|", "\\|") if table else text
        fence = "`" * (max(map(len, _BACKTICKS.findall(body)), default=0) + 1)
        pad = " " if body[:1] in ("`", " ", "") or body[-1:] in ("`", " ") else ""
        return f"{fence}{pad}{body}{pad}{fence}"
    text = _MENTION_OR_EMAIL.sub("@\u2060", text)
    return _AUTOLINK.sub(lambda m: "\\", _MARKUP.sub(lambda m: "\\" + m.group(), text))


def _side(label: str, side: SideSummary) -> str:
    pinned = f" at commit {escape(side.revision, code=True)}" if side.revision else ""
    pinned += f" at version {escape(side.etag, code=True)}" if side.etag else ""
    layout = f" ({escape(side.layout.description)})" if side.layout is not None else ""
    return (
        f"- **{label}**: {escape(side.spec, code=True)}{pinned}{layout} — {side.files} file(s), "
        f"{side.tensors} tensors, {human_count(side.parameters)} parameters, {human_bytes(side.bytes)}"
    )


def render(report: Report, options: RenderOptions) -> str:
    out = [f"## ckptdiff: {report.verdict} {_MARK[report.verdict]}", ""]
    out.append(f"**{report.verdict}**: {escape(counts_line(report))}.")
    out.append("")
    out.append(_side("A", report.a))
    if report.b is not None:
        out.append(_side("B", report.b))
    if report.base is not None:
        out.append(_side("base", report.base))
    if report.profile:
        out.append(f"- **profile**: {report.profile}")
    out.append("")

    if report.b is not None:
        out += _comparison(report, options)
    if report.engines:
        out += ["### Engines", ""]
        for result in report.engines:
            out.append(f"- **{escape(headline(result))}** {_OUTCOME_MARK[result.outcome]}")
            events = [(e, escape(event_text(report, e))) for e in result.events]
            out += [f"  - **{e.severity}** {escape(e.code, code=True)}: {text}" for e, text in events]
        out.append("")

    out += ["### Findings", ""]
    if report.findings:
        findings = [(f, escape(finding_message(report, f))) for f in report.findings]
        out += [f"- **{f.severity}** {escape(f.code, code=True)}: {text}" for f, text in findings]
    else:
        out.append("_None._")
    out.append("")
    if applied := rules_applied(report):
        out += ["### Policy rules applied", ""] + [f"- {escape(rule, code=True)}" for rule in applied] + [""]
    footer = f"_ckptdiff {escape(report.tool_version)}"
    if report.command:
        footer += f" — {escape(report.command, code=True)}"
    out.append(footer + "_")
    return "\n".join(out) + "\n"


_OUTCOME_MARK = {"loads": "✅", "degraded": "⚠️", "fails": "❌"}


def _comparison(report: Report, options: RenderOptions) -> list[str]:
    """Parameters per dtype, the tensor table and the config.json differences of a two-sided report."""
    assert report.b is not None
    out: list[str] = []
    dtypes = sorted(report.a.dtypes.keys() | report.b.dtypes.keys())
    if dtypes:
        table = []
        for dtype in dtypes:
            da, db = report.a.dtypes.get(dtype), report.b.dtypes.get(dtype)
            pa, ba = (da.parameters, da.bytes) if da else (0, 0)
            pb, bb = (db.parameters, db.bytes) if db else (0, 0)
            table.append([escape(dtype, table=True), f"{pa:,}", human_bytes(ba), f"{pb:,}", human_bytes(bb)])
        out += ["### Parameters per dtype", ""]
        out.append(
            tabulate(
                table,
                headers=["dtype", "A parameters", "A bytes", "B parameters", "B bytes"],
                tablefmt="github",
                disable_numparse=True,
            )
        )
        out.append("")

    shown = display_rows(report, options)
    out += ["### Tensors", ""]
    if shown:
        with_counts = any(line.count > 1 for line in shown)
        with_values = has_values(shown)
        table = []
        for line in shown:
            row = line.row
            status = f"{row.status} (allowed)" if row.allowed_by else row.status
            cells = [escape(line.name, code=True, table=True)] + ([str(line.count)] if with_counts else [])
            note = row_note(
                row,
                report,
                lambda text: escape(text, table=True),
                lambda rule: escape(rule, code=True, table=True),
            )
            values = value_cells(row) if with_values else []
            sides = [escape(shape_dtype(row.a), table=True), escape(shape_dtype(row.b), table=True)]
            table.append(cells + sides + [status] + values + [note])
        headers = ["tensor"] + (["count"] if with_counts else []) + ["A", "B", "status"]
        headers += ([h.replace("|", "\\|") for h in VALUE_HEADERS] if with_values else []) + ["note"]
        out.append(tabulate(table, headers=headers, tablefmt="github", disable_numparse=True))
    else:
        out.append("_No differing tensors._" if options.only_diffs else "_No tensors._")
    out.append("")

    out += ["### config.json differences", ""]
    if report.config:
        table = [
            [
                escape(d.key, code=True, table=True),
                *(escape(c, code=True, table=True) for c in config_cells(d)),
                d.status,
            ]
            for d in report.config
        ]
        out.append(tabulate(table, headers=["key", "A", "B", "status"], tablefmt="github", disable_numparse=True))
    else:
        out.append("_None._")
    out.append("")

    return out
