"""What ``ckptdiff.compare()`` returns: the :class:`~ckptdiff.report.Report` with the conveniences of a notebook —
a short repr, rendered markdown and HTML, ``to_dict()`` (the JSON report) and each finding in words. It belongs
to the package's API, above the formats it uses, so that the report model itself stays words-free."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields
from html import escape
from typing import Any

from msgspec import structs

from .errors import printable_name
from .report import Report

#: How many failing tensors, findings and engine events the repr names before "+N more".
_NAMED = 3


@dataclass(frozen=True, repr=False, eq=False)
class Result(Report):
    """A :class:`Report` (every field, property and method of one), whose findings carry their words in
    ``message``, with a short ``repr``, ``_repr_markdown_``/``_repr_html_`` for Jupyter and ``to_dict()``."""

    @classmethod
    def of(cls, report: Report) -> Result:
        """The report as a Result, each finding's ``message`` worded by the message catalogue."""
        from .formats.messages import finding_message

        given = {field.name: getattr(report, field.name) for field in fields(Report) if field.init}
        given["findings"] = tuple(
            structs.replace(finding, message=finding_message(report, finding)) for finding in report.findings
        )
        return cls(**given)

    def __repr__(self) -> str:
        sides = printable_name(self.a.spec) + (f" vs {printable_name(self.b.spec)}" if self.b is not None else "")
        counts = ", ".join(f"{n} {status}" for status, n in self.counts.items() if n)
        failing = self.failing()
        groups = list(Counter(failing).items())[:_NAMED]  # a name met again (an event per tensor) counted once
        left = len(failing) - sum(n for _, n in groups)
        named = ", ".join(name if n == 1 else f"{name} ×{n}" for name, n in groups) + (
            f", +{left} more" if left else ""
        )
        return (
            f"<ckptdiff {self.verdict}: {sides}"
            + (f"; {counts}" if counts else "")
            + (f"; failing: {named}>" if failing else ">")
        )

    def failing(self) -> list[str]:
        """What fails the gate, one short line each: ``fc.weight shape_mismatch``, ``finding nothing_compared``,
        ``vllm B aux_count_mismatch``."""
        out = [f"{printable_name(row.name)} {row.status}" for row in self.tensors if not row.passes]
        out += [f"finding {f.code}" for f in self.findings if self.finding_fails(f)]
        for result in self.engines:
            out += [
                f"{result.engine} {result.side} {event.code}"
                for event in result.events
                if event.severity != "info" and event.allowed_by is None
            ]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as Python objects: ``json.dumps(result.to_dict())`` is the ``--format json`` report's
        data (non-finite numbers spelled "NaN", "Infinity", as there)."""
        import msgspec

        from .formats.document import document

        data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(document(self)))  # lists, as JSON has
        return data

    def render(self, fmt: str = "table", **options: Any) -> str:
        """The report in a format (table, markdown, json, junit, github, html), as the command writes it."""
        from .formats import render

        return render(self, fmt, **options)

    def _repr_markdown_(self) -> str:
        return self.render("markdown")

    def _repr_html_(self) -> str:
        # the whole HTML report in a frame of its own: its style and script cannot touch the notebook's page
        page = self.render("html")
        return (
            f'<iframe srcdoc="{escape(page)}" style="width: 100%; height: 640px; border: 1px solid #d0d7de" '
            f'title="ckptdiff report"></iframe>'
        )
