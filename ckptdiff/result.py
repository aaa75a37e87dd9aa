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
        # the whole HTML report in a frame of its own: its style and script cannot touch the notebook's page; the
        # page fits the frame to itself (640 px where its script cannot run)
        page, body_end, rest = self.render("html").rpartition("</body>")
        page += f"<script>{_FIT_FRAME}</script>" + body_end + rest
        return (
            f'<iframe srcdoc="{escape(page)}" style="display: block; width: 100%; height: 640px; '
            f'border: 1px solid #d0d7de" title="ckptdiff report"></iframe>'
        )


#: The report page's frame as tall as the report, up to most of the window (a longer report scrolls in its frame),
#: following it as filters and expanded rows change its height. ``frameElement`` is the notebook's frame: a frame
#: of ``srcdoc`` is of its page's origin; elsewhere (a report opened as a file) it is null and nothing happens.
_FIT_FRAME = """
(() => {
  const frame = window.frameElement;
  if (!frame) return;
  let view = 0;
  try {
    view = window.top.innerHeight;  // the notebook's window
  } catch (error) {}  // of another origin (a notebook whose outputs are frames of their own): the screen's
  const room = Math.max(400, Math.round(0.8 * (view || screen.availHeight || 800)));
  const fit = () => {
    // the report and the scroll bar under a table too wide for the frame, if there is one (the frame's border is
    // outside its height)
    const bar = window.innerHeight - document.documentElement.clientHeight;
    const tall = Math.ceil(document.body.getBoundingClientRect().height) + bar;
    frame.style.height = Math.min(tall, room) + "px";
  };
  // after the report's own listeners (filters, expanded rows, opened details), and whenever its size changes
  for (const event of ["input", "click", "toggle"]) document.addEventListener(event, fit, event === "toggle");
  window.addEventListener("resize", fit);
  new ResizeObserver(fit).observe(document.body);
  fit();
})();
"""
