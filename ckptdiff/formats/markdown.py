"""The markdown report, written to be a PR comment: the verdict and what failed it first, then the differences
(failing first); matches, info events and totals folded under ``<details>``; engine citations linked; at most
``RenderOptions.budget`` characters, past which detail is left out but every failing tensor is still named."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import msgspec
from msgspec import structs
from tabulate import tabulate

from ..errors import printable, printable_name
from ..report import STATUSES, EngineEvent, Finding, Report, SideSummary
from . import RenderOptions
from ._common import (
    VALUE_HEADERS,
    Citation,
    config_cells,
    counts_line,
    difference_order,
    display_rows,
    event_parts,
    failing_events,
    has_values,
    human_bytes,
    row_note,
    shape_dtype,
    shown_unfolded,
    side_totals,
    value_cells,
)
from .collapse import DisplayRow, collapse, expand_pattern
from .messages import finding_message, headline, rules_applied, variant_lines

_MARK = {"compatible": "✅", "incompatible": "❌"}
_OUTCOME_MARK = {"loads": "✅", "degraded": "⚠️", "fails": "❌"}
#: What markdown acts on in text: emphasis, code, links and images, raw HTML and entities, table cells (an
#: underscore inside a word, as in most names, emphasises nothing).
_MARKUP = re.compile(r"[\\`*\[<>|~&!]")
#: A scheme's "://" or "www.": GFM turns the text after them into a link.
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(?=://)|(?<=www)(?=\.)", re.IGNORECASE)
_BACKTICKS = re.compile("`+")
#: An "@" that could start a GitHub @-mention (not after a letter or digit: after "_", emphasis such as
#: "_x_@user" can end there and leave the "@" at a text's start) or an e-mail autolink (a domain with a dot
#: after it) gets U+2060 WORD JOINER after it; "org/repo@commit" stays as it is.
_MENTION_OR_EMAIL = re.compile(r"(?<![^\W_])@|@(?=[\w-]+\.\w)")
#: How many failing tensors, findings and engine events the verdict's reasons name before "and N more".
NAMED_REASONS = 10
#: How many characters of names the reasons spend on failing tensors at most, once the table cannot list them.
REASONS_ROOM = 2_000


def escape(text: str, *, code: bool = False, table: bool = False, name: bool = False) -> str:
    """Outside text (names, specs, messages, server strings) made inert for a PR comment or step summary.

    Control characters are shown escaped. As text (``code=False``), markdown's punctuation is backslash-
    escaped, autolinks are broken before "://" and "www.", and an "@" starts neither a mention nor an e-mail
    link. As a code span (``code=True``), the fence is longer than any run of backticks inside, so nothing ends
    it early. In a table cell (``table=True``) "|" is escaped in both, so a name cannot shift the columns. A
    tensor name or config key (``name=True``) shows a backslash doubled, so that ``\\t`` is always a tab.
    """
    text = printable_name(text) if name else printable(text)
    if code:
        body = text.replace("|", "\\|") if table else text
        fence = "`" * (max(map(len, _BACKTICKS.findall(body)), default=0) + 1)
        pad = " " if body[:1] in ("`", " ", "") or body[-1:] in ("`", " ") else ""
        return f"{fence}{pad}{body}{pad}{fence}"
    text = _MENTION_OR_EMAIL.sub("@\u2060", text)
    return _AUTOLINK.sub(lambda m: "\\", _MARKUP.sub(lambda m: "\\" + m.group(), text))


def cite(citation: Citation | None) -> str:
    """A rule's citation as a link to the engine's file at the pinned tag (its parts are checked to be plain
    repository, tag and path characters where it was parsed, so nothing in it can break the link)."""
    if citation is None:
        return ""
    return f" — [{citation.label}]({citation.url}){escape(citation.detail)}"


class Detail(msgspec.Struct, frozen=True):
    """How much a rendering shows; each step down leaves more out to fit the budget."""

    matches: bool = True  # the matching tensors, folded
    info: bool = True  # info findings and engine events, folded
    totals: bool = True  # parameters and bytes per dtype, folded
    passing_differences: bool = True  # injected and allowed rows, and matches whose values changed
    #: failing tensors: "table" (a row each), "names" (the first ``table_rows`` in the table, the rest as names
    #: by status), "patterns" (the rest collapsed into patterns whatever their shapes), "cut" (as many patterns
    #: as fit, the rest counted)
    failing: str = "table"
    table_rows: int = 0


#: The renderings tried in turn until one fits the budget.
_LEAN = Detail(matches=False, info=False, totals=False, passing_differences=False)
_STEPS = (
    Detail(),
    Detail(matches=False),
    Detail(matches=False, info=False, totals=False),
    _LEAN,
    structs.replace(_LEAN, failing="names", table_rows=100),
    structs.replace(_LEAN, failing="patterns", table_rows=100),
    structs.replace(_LEAN, failing="patterns", table_rows=20),
    structs.replace(_LEAN, failing="cut"),
)


def render(report: Report, options: RenderOptions) -> str:
    budget = options.budget
    text = ""
    for detail in _STEPS:
        text = _Rendering(report, options, detail).text()
        if budget is None or len(text) <= budget:
            return text
    # "cut": what the rest of the report leaves of the budget goes to names (what else is left is short: the
    # config differences, failing findings and engine events)
    room = max((budget or 0) - len(text) - 200, 0)
    return _Rendering(report, options, _STEPS[-1], room).text()


class _Rendering:
    """One rendering of a report at one level of detail, counting what that level leaves out."""

    def __init__(self, report: Report, options: RenderOptions, detail: Detail, room: int = 0) -> None:
        self.report, self.options, self.detail = report, options, detail
        self.room = room  # "cut": how many characters the Differences section may spend on names
        self.left_out: list[str] = []  # "14 matching tensors", in the order met
        shown = display_rows(report, replace(options, only_diffs=False))
        ordered = sorted(shown, key=difference_order)
        self.failing = [line for line in ordered if difference_order(line) == 0]
        if detail.failing != "table":  # the first rows of a cut table: layer 2 before layer 10
            self.failing.sort(key=_natural)
        self.passing = [line for line in ordered if difference_order(line) in (1, 2)]
        self.matches = [line for line in ordered if difference_order(line) == 3]

    def text(self) -> str:
        report = self.report
        body: list[str] = []
        if report.b is not None:
            body += self._differences()
            body += self._config()
        body += self._engines()
        body += self._findings()
        if report.b is not None:
            body += self._totals()
        if applied := rules_applied(report):
            body += ["### Policy rules applied", ""] + [f"- {escape(rule, code=True)}" for rule in applied] + [""]
        footer = f"_ckptdiff {escape(report.tool_version)}"
        if report.command:
            footer += f" — {escape(report.command, code=True)}"
        body.append(footer + "_")
        head = self._verdict() + self._cut_note() + self._sides()
        return "\n".join(head + body) + "\n"

    # --- the top: verdict, reasons, what was left out, the sides ---------------------------------------------

    def _verdict(self) -> list[str]:
        report = self.report
        out = [f"## ckptdiff: {report.verdict} {_MARK[report.verdict]}", ""]
        reasons = self._reasons()
        if not reasons:
            return out + [f"**{report.verdict}**: {escape(counts_line(report))}.", ""]
        out += [f"**{report.verdict}** — what fails the gate:", ""]
        shown = reasons[:NAMED_REASONS] if self.detail.failing == "table" else reasons
        out += shown
        if len(shown) < len(reasons):
            out.append(f"- and {len(reasons) - len(shown)} more, under [Differences](#differences)")
        return out + ["", escape(counts_line(report)) + ".", ""]

    def _reasons(self) -> list[str]:
        """One line per failing tensor or pattern (when the table lists them in full; else the Differences
        section names them), failing finding and failing engine event."""
        report = self.report
        out = []
        if self.detail.failing == "table":
            for line in self.failing:
                note = row_note(line.row, report)
                count = f" ({line.count} tensors)" if line.count > 1 else ""
                out.append(
                    f"- {escape(line.name, code=True, name=True)}{count}: **{line.row.status}**"
                    + (f" — {escape(note)}" if note else "")
                )
        elif self.failing:
            named = self._failing_names(self.failing, patterns=True, room=REASONS_ROOM)
            out += named[:NAMED_REASONS]
            if len(named) > NAMED_REASONS:
                out.append("- and more, under [Differences](#differences)")
        for finding in report.findings:
            if report.finding_fails(finding):
                subject = f" ({escape(finding.subject, code=True, name=True)})" if finding.subject else ""
                out.append(f"- finding {escape(finding.code, code=True)}{subject}: **{finding.severity}**")
        for result in report.engines:
            for event in failing_events(result):
                tensor = f" ({escape(event.tensor, code=True, name=True)})" if event.tensor else ""
                out.append(
                    f"- {escape(result.engine)} {result.side} **{result.outcome}**: "
                    f"{escape(event.code, code=True)}{tensor} ({event.severity})"
                )
        return out

    def _cut_note(self) -> list[str]:
        """Said before anything else is read, so that no one takes a cut report for the whole."""
        if not self.left_out:
            self._count_left_out()
        if not self.left_out:
            return []
        where = self.options.full_report
        full = (
            f"the full report is {escape(where, name=True)}"
            if where
            else "the full report is the JSON or HTML one (`--format json`, `--format html`)"
        )
        budget = self.options.budget or 0
        return [
            f"> **Shortened** to fit a PR comment ({budget:,} characters): left out "
            f"{', '.join(self.left_out)}; the verdict is the whole report's. {full[0].upper()}{full[1:]}.",
            "",
        ]

    def _count_left_out(self) -> None:
        detail, report = self.detail, self.report
        if not detail.matches and self.matches:
            self.left_out.append(plural(sum(line.count for line in self.matches), "matching tensor"))
        if not detail.passing_differences and self.passing:
            self.left_out.append(plural(sum(line.count for line in self.passing), "passing difference"))
        if not detail.info:
            infos = sum(1 for f in report.findings if f.severity == "info")
            events = sum(1 for r in report.engines for e in r.events if e.severity == "info")
            if infos:
                self.left_out.append(plural(infos, "info finding"))
            if events:
                self.left_out.append(plural(events, "info engine event"))
        if not detail.totals and report.b is not None:
            self.left_out.append("the totals per dtype")
        if detail.failing != "table" and len(self.failing) > detail.table_rows:
            first = f"all but the first {detail.table_rows} " if detail.table_rows else "the "
            self.left_out.append(f"the shapes and notes of {first}failing rows")

    def _sides(self) -> list[str]:
        report = self.report
        out = [_side("A", report.a)]
        if report.b is not None:
            out.append(_side("B", report.b))
        if report.base is not None:
            out.append(_side("base", report.base))
        if report.profile:
            out.append(f"- **profile**: {report.profile}")
        out += [f"- **variant** ({label}): {escape(words)}" for label, words in variant_lines(report)]
        return out + [""]

    # --- tensors ---------------------------------------------------------------------------------------------

    def _differences(self) -> list[str]:
        detail = self.detail
        passing = self.passing if detail.passing_differences else []
        count = sum(line.count for line in self.failing) + sum(line.count for line in passing)
        out = ["### Differences", ""]
        if count:
            verb = "differs" if count == 1 else "differ"
            out += [f"{plural(count, 'tensor')} {verb}" + (" (failing first):" if self.failing else ":"), ""]
        if detail.failing == "table" or not self.failing:
            lines = self.failing + passing
            out += [self._table(lines), ""] if lines else ["_No differing tensors._", ""]
        else:
            table = self.failing[: detail.table_rows]
            if table:
                out += [self._table(table), ""]
                out += [
                    f"The other {plural(sum(line.count for line in self.failing[len(table) :]), 'failing tensor')}:",
                    "",
                ]
            rest = self.failing[len(table) :]
            room = self.room if detail.failing == "cut" else None
            out += self._failing_names(rest, detail.failing != "names", room) + [""]
        if self.matches and detail.matches and not self.options.only_diffs:
            matching = sum(line.count for line in self.matches)
            out += _folded(f"{plural(matching, 'matching tensor')}", [self._table(self.matches)])
        elif self.matches and self.options.only_diffs and detail.matches:
            matching = sum(line.count for line in self.matches)
            out += [f"_{plural(matching, 'matching tensor')} not listed (--only-diffs)._", ""]
        return out

    def _table(self, lines: Sequence[DisplayRow]) -> str:
        report = self.report
        with_counts = any(line.count > 1 for line in lines)
        with_values = has_values(lines)
        table = []
        for line in lines:
            row = line.row
            status = f"{row.status} (allowed)" if row.allowed_by else row.status
            if not row.passes:
                status = f"**{status}** ❌"
            cells = [escape(line.name, code=True, table=True, name=True)] + ([str(line.count)] if with_counts else [])
            note = row_note(
                row, report, lambda text: escape(text, table=True), lambda rule: escape(rule, code=True, table=True)
            )
            values = value_cells(row) if with_values else []
            sides = [escape(shape_dtype(row.a), table=True), escape(shape_dtype(row.b), table=True)]
            table.append(cells + sides + [status] + values + [note])
        headers = ["tensor"] + (["count"] if with_counts else []) + ["A", "B", "status"]
        headers += ([h.replace("|", "\\|") for h in VALUE_HEADERS] if with_values else []) + ["note"]
        return str(tabulate(table, headers=headers, tablefmt="github", disable_numparse=True))

    def _failing_names(self, lines: Sequence[DisplayRow], patterns: bool, room: int | None = None) -> list[str]:
        """Failing tensors named by status: as the table would (one name or pattern a row), or collapsed into
        patterns whatever their shapes and notes (each still spells exactly its names); past ``room``
        characters of names, the rest of each status is counted."""
        if patterns:
            lines = collapse(
                structs.replace(line.row, name=name, a=None, b=None, notes=(), values=None)
                for line in lines
                for name in expand_pattern(line.name)
            )
        out: list[str] = []
        used = 0
        for status in STATUSES:
            group = [line for line in lines if line.row.status == status]
            if not group:
                continue
            names = []
            named = 0
            for line in group:
                name = escape(line.name, code=True, name=True)
                if room is not None and used + len(name) > room:
                    break
                names.append(name)
                named += line.count
                used += len(name) + 2
            tensors = sum(line.count for line in group)
            if not names:  # not one name fits: the count alone (the verdict above names the first ones)
                out.append(f"- **{status}** ({tensors:,})")
                continue
            rest = f", and {tensors - named:,} more" if named < tensors else ""
            out.append(f"- **{status}** ({tensors:,}): {', '.join(names)}{rest}")
        return out

    # --- config, engines, findings, totals -----------------------------------------------------------------

    def _config(self) -> list[str]:
        report = self.report
        out = ["### config.json differences", ""]
        if not report.config:
            return out + ["_None._", ""]
        table = [
            [
                escape(d.key, code=True, table=True, name=True),
                *(escape(c, code=True, table=True) for c in config_cells(d)),
                d.status,
            ]
            for d in report.config
        ]
        return out + [
            tabulate(table, headers=["key", "A", "B", "status"], tablefmt="github", disable_numparse=True),
            "",
        ]

    def _engines(self) -> list[str]:
        report = self.report
        if not report.engines:
            return []
        out = ["### Engines", ""]
        infos: list[str] = []
        for result in report.engines:
            out.append(f"- **{escape(headline(result))}** {_OUTCOME_MARK[result.outcome]}")
            for event in result.events:
                if shown_unfolded(event):
                    out.append(f"  - {self._event(event)}")
                else:
                    infos.append(f"- {escape(result.engine)} {result.side}: {self._event(event)}")
        out.append("")
        if infos and self.detail.info:
            out += _folded(plural(len(infos), "info event") + " (loaded as trained)", infos)
        return out

    def _event(self, event: EngineEvent) -> str:
        words, citation, allowed = event_parts(self.report, event)
        allowed_text = f" ({escape(allowed)})" if allowed else ""
        return f"**{event.severity}** {escape(event.code, code=True)}: {escape(words)}{allowed_text}{cite(citation)}"

    def _findings(self) -> list[str]:
        report = self.report
        out = ["### Findings", ""]
        if not report.findings:
            return out + ["_None._", ""]

        def line(f: Finding) -> str:
            return f"- **{f.severity}** {escape(f.code, code=True)}: {escape(finding_message(report, f))}"

        order = {"error": 0, "warning": 1, "info": 2}
        ranked = sorted(report.findings, key=lambda f: order[f.severity])
        shown = [line(f) for f in ranked if f.severity != "info"]
        infos = [line(f) for f in ranked if f.severity == "info"]
        out += shown + [""] if shown else ["_None that fail or warn._", ""]
        if infos and self.detail.info:
            out += _folded(plural(len(infos), "info finding"), infos)
        return out

    def _totals(self) -> list[str]:
        report = self.report
        assert report.b is not None
        if not self.detail.totals:
            return []
        dtypes = sorted(report.a.dtypes.keys() | report.b.dtypes.keys())
        if not dtypes:
            return []
        table = []
        for dtype in dtypes:
            da, db = report.a.dtypes.get(dtype), report.b.dtypes.get(dtype)
            pa, ba = (da.parameters, da.bytes) if da else (0, 0)
            pb, bb = (db.parameters, db.bytes) if db else (0, 0)
            table.append([escape(dtype, table=True), f"{pa:,}", human_bytes(ba), f"{pb:,}", human_bytes(bb)])
        headers = ["dtype", "A parameters", "A bytes", "B parameters", "B bytes"]
        return _folded(
            "Parameters per dtype", [tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)]
        )


def plural(n: int, word: str) -> str:
    """``1 tensor``, ``1,500 tensors``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _natural(line: DisplayRow) -> tuple[object, ...]:
    """Layer 2 before layer 10: a name's integer parts compared as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", line.name))


def _folded(summary: str, lines: list[str]) -> list[str]:
    """A ``<details>`` block: GitHub shows the summary and folds the rest (the blank lines let markdown inside)."""
    return [f"<details><summary>{escape(summary)}</summary>", "", *lines, "", "</details>", ""]


def _side(label: str, side: SideSummary) -> str:
    pinned = f" at commit {escape(side.revision, code=True)}" if side.revision else ""
    pinned += f" at version {escape(side.etag, code=True)}" if side.etag else ""
    layout = f" ({escape(side.layout.description)})" if side.layout is not None else ""
    return f"- **{label}**: {escape(side.spec, code=True, name=True)}{pinned}{layout} — {side_totals(side)}"
