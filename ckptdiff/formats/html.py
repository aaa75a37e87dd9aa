"""The HTML report: one self-contained file (inline style and script, nothing loaded at view time) with the
verdict and what fails it, a tensor table to filter whose pattern rows expand, and with ``--values`` per-layer
drift plots as inline SVG (:mod:`.drift`)."""

from __future__ import annotations

import re
from dataclasses import replace
from html import escape

from ..errors import printable_name
from ..report import STATUSES, EngineEvent, Report, SideSummary
from . import RenderOptions
from ._common import (
    VALUE_HEADERS,
    config_cells,
    counts_line,
    difference_order,
    display_rows,
    event_parts,
    failing_events,
    has_values,
    human_bytes,
    note_text,
    row_note,
    shape_dtype,
    shown_unfolded,
    side_totals,
    value_cells,
)
from .collapse import DisplayRow
from .drift import drift_section
from .messages import finding_message, headline, rules_applied, variant_lines

#: How many failing tensors or patterns the verdict names before "and N more".
NAMED_REASONS = 20
#: Nothing the page could load: no script, style, image, font or frame from anywhere (the inline ones excepted).
_POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_STYLE = """
:root { --fail: #cf222e; --pass: #1a7f37; --warn: #9a6700; --line: #d0d7de; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1f2328; }
main { max-width: 1240px; margin: 0 auto; padding: 16px 20px 40px; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
#verdict { border-left: 6px solid var(--pass); background: #dafbe1; padding: 10px 16px; margin-bottom: 12px; }
#verdict.incompatible { border-color: var(--fail); background: #ffebe9; }
#verdict h1 { margin: 0; font-size: 22px; }
#verdict ul { margin: 6px 0; padding-left: 20px; }
#verdict p { margin: 4px 0; }
.sides { margin: 0 0 12px; padding-left: 20px; }
h2 { font-size: 17px; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 24px; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); position: sticky; top: 0; }
tr.fails td.status { color: var(--fail); font-weight: 600; } td.status { white-space: nowrap; }
tr.member td { background: var(--soft); padding-left: 36px; }
td code { overflow-wrap: anywhere; } td.name { min-width: 14em; }
td:last-child, li, h3 { overflow-wrap: anywhere; }
.controls { display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 8px 0; }
.controls input[type=search] { width: 360px; padding: 4px 8px; font: inherit; }
button.expand { border: 0; background: none; cursor: pointer; width: 18px; padding: 0; font-size: 12px; }
.severity-error { color: var(--fail); font-weight: 600; }
.severity-warning { color: var(--warn); font-weight: 600; }
.severity-info { color: #57606a; }
figure.family { margin: 12px 0; }
figure.family figcaption { margin-bottom: 4px; }
svg.plot { margin-right: 12px; background: #fff; border: 1px solid var(--line); }
svg .axis { stroke: #57606a; } svg .grid { stroke: #eaeef2; } svg .title { font-size: 12px; font-weight: 600; }
svg .tick { font-size: 10px; fill: #57606a; } svg .trend { fill: none; stroke: #0969da; stroke-width: 1.5; }
svg .point { fill: #0969da; }
footer { margin-top: 28px; color: #57606a; font-size: 12px; }
"""

#: Filtering and pattern rows. A pattern row spells exactly the names it stands for (``{0..3,5}`` sets of
#: indices), so its names are expanded here, on demand, rather than written into the file.
_SCRIPT = r"""
(() => {
  const table = document.getElementById("tensors");
  if (!table) return;
  const rows = [...table.querySelectorAll("tbody tr.row")];
  const filter = document.getElementById("filter");
  const shownCount = document.getElementById("shown");
  const boxes = [...document.querySelectorAll("input.status")];
  const failingOnly = document.getElementById("failing-only");
  const expand = (pattern) => {
    let names = [""];
    for (const part of pattern.split(/(\{[0-9.,]+\})/)) {
      if (!part.startsWith("{")) { names = names.map((n) => n + part); continue; }
      const values = [];
      for (const piece of part.slice(1, -1).split(",")) {
        const [first, last] = piece.split("..").map(Number);
        for (let v = first; v <= (last ?? first); v++) values.push(String(v));
      }
      names = names.flatMap((n) => values.map((v) => n + v));
    }
    return names;
  };
  const membersOf = (row) => {
    const found = [];
    for (let m = row.nextElementSibling; m && m.classList.contains("member"); m = m.nextElementSibling) found.push(m);
    return found;
  };
  const names = new Map();
  const namesOf = (row) => {
    if (!names.has(row)) names.set(row, expand(row.dataset.name));
    return names.get(row);
  };
  const matcher = (text) => {
    if (!text) return () => true;
    if (!/[*?]/.test(text)) return (name) => name.includes(text);
    // a glob on the whole name, in which * also crosses dots
    const source = text.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
    const re = new RegExp("^" + source + "$");
    return (name) => re.test(name);
  };
  const apply = () => {
    const test = matcher(filter.value.trim());
    const statuses = new Set(boxes.filter((b) => b.checked).map((b) => b.value));
    let shown = 0;
    for (const row of rows) {
      const kept = statuses.has(row.dataset.status) && (!failingOnly.checked || row.dataset.fails === "1");
      const matching = !kept ? 0 : row.dataset.count === "1" ? Number(test(row.dataset.name))
        : namesOf(row).filter(test).length;
      const visible = matching > 0;
      row.hidden = !visible;
      for (const member of membersOf(row)) member.hidden = !visible || !test(member.dataset.name);
      shown += matching;
    }
    shownCount.textContent = shown.toLocaleString("en-US");
  };
  table.addEventListener("click", (event) => {
    const button = event.target.closest("button.expand");
    if (!button) return;
    const row = button.closest("tr");
    const open = button.getAttribute("aria-expanded") === "true";
    if (open) {
      for (const member of membersOf(row)) member.remove();
    } else {
      const test = matcher(filter.value.trim());
      const width = row.children.length;
      const members = namesOf(row).map((name) => {
        const member = document.createElement("tr");
        member.className = "member";
        member.dataset.name = name;
        const cell = document.createElement("td");
        cell.colSpan = width;
        const code = document.createElement("code");
        code.textContent = name;
        cell.append(code);
        member.append(cell);
        member.hidden = !test(name);
        return member;
      });
      row.after(...members);
    }
    button.setAttribute("aria-expanded", String(!open));
    button.textContent = open ? "▸" : "▾";
  });
  for (const control of [filter, failingOnly, ...boxes]) control.addEventListener("input", apply);
  apply();
})();
"""


def render(report: Report, options: RenderOptions) -> str:
    title = f"ckptdiff: {report.verdict} — {printable_name(report.a.spec)}"
    title += f" vs {printable_name(report.b.spec)}" if report.b else ""
    body = _verdict(report) + _sides(report)
    if report.b is not None:
        body += _tensors(report, options) + _config(report)
        body += drift_section(report.tensors)
    body += _engines(report) + _findings(report)
    if report.b is not None:
        body += _totals(report)
    if applied := rules_applied(report):
        body += ["<h2>Policy rules applied</h2><ul>"] + [f"<li><code>{escape(r)}</code></li>" for r in applied]
        body += ["</ul>"]
    footer = f"ckptdiff {escape(report.tool_version)}"
    if report.command:
        footer += f" — <code>{escape(report.command)}</code>"
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head>",
            f'<body><main data-verdict="{report.verdict}">',
            *body,
            f"<footer>{footer}</footer>",
            f"</main><script>{_SCRIPT}</script></body></html>",
            "",
        ]
    )


def _verdict(report: Report) -> list[str]:
    out = [f'<header id="verdict" class="{report.verdict}"><h1>ckptdiff: {report.verdict}</h1>']
    reasons = _reasons(report)
    if reasons:
        out += ['<p>What fails the gate:</p><ul id="reasons">', *reasons, "</ul>"]
    out.append(f'<p class="counts">{escape(counts_line(report))}</p></header>')
    return out


def _reasons(report: Report) -> list[str]:
    out = []
    if report.b is not None:
        failing = [line for line in display_rows(report, RenderOptions()) if not line.row.passes]
        for line in failing[:NAMED_REASONS]:
            note = note_text(line.row)
            count = f" ({line.count:,} tensors)" if line.count > 1 else ""
            out.append(
                f"<li><code>{breakable(printable_name(line.name))}</code>{count}: <strong>{line.row.status}</strong>"
                + (f" — {escape(note)}" if note else "")
                + "</li>"
            )
        if len(failing) > NAMED_REASONS:
            out.append(f"<li>and {len(failing) - NAMED_REASONS:,} more (tick “failing only” below)</li>")
    for finding in report.findings:
        if report.finding_fails(finding):
            out.append(
                f'<li>finding <code>{escape(finding.code)}</code>: <span class="severity-{finding.severity}">'
                f"{finding.severity}</span> — {escape(finding_message(report, finding))}</li>"
            )
    for result in report.engines:
        for event in failing_events(result):
            tensor = f" (<code>{escape(printable_name(event.tensor))}</code>)" if event.tensor else ""
            out.append(
                f"<li>{escape(result.engine)} {result.side} <strong>{result.outcome}</strong>: "
                f"<code>{escape(event.code)}</code>{tensor} ({event.severity})</li>"
            )
    return out


def _side(label: str, side: SideSummary) -> str:
    version = f" @ <code>{escape(side.version)}</code>" if side.version else ""
    layout = f" ({escape(side.layout.description)})" if side.layout is not None else ""
    spec = escape(printable_name(side.spec))
    return f"<li><strong>{label}</strong>: <code>{spec}</code>{version}{layout} — {side_totals(side)}</li>"


def _sides(report: Report) -> list[str]:
    out = ['<ul class="sides">', _side("A", report.a)]
    out += [_side("B", report.b)] if report.b is not None else []
    out += [_side("base", report.base)] if report.base is not None else []
    out += [f"<li><strong>profile</strong>: {escape(report.profile)}</li>"] if report.profile else []
    out += [f"<li><strong>variant</strong> ({label}): {escape(words)}</li>" for label, words in variant_lines(report)]
    return out + ["</ul>"]


def _tensors(report: Report, options: RenderOptions) -> list[str]:
    lines = sorted(display_rows(report, replace(options, color=False)), key=difference_order)
    statuses = [status for status in STATUSES if report.counts[status]]
    total = sum(line.count for line in lines)
    with_values, with_counts = has_values(lines), any(line.count > 1 for line in lines)
    out = ['<section id="tensor-table"><h2>Tensors</h2><div class="controls">']
    out.append(
        '<label>Filter <input id="filter" type="search" placeholder="a name, or a glob: *.mlp.*" '
        'autocomplete="off"></label>'
    )
    for status in statuses:
        out.append(
            f'<label><input class="status" type="checkbox" value="{status}" checked> {status} '
            f"({report.counts[status]:,})</label>"
        )
    out.append('<label><input id="failing-only" type="checkbox"> failing only</label>')
    out.append(f'<span><span id="shown">{total:,}</span> of {total:,} tensors shown</span></div>')
    headers = ["tensor"] + (["count"] if with_counts else []) + ["A", "B", "status"]
    headers += (VALUE_HEADERS if with_values else []) + ["note"]
    out.append('<table id="tensors"><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr></thead>")
    out.append("<tbody>")
    out += [_row(report, line, with_counts, with_values) for line in lines]
    out.append("</tbody></table></section>")
    return out


def _row(report: Report, line: DisplayRow, with_counts: bool, with_values: bool) -> str:
    row = line.row
    fails = not row.passes
    button = (
        f'<button class="expand" type="button" aria-expanded="false" title="list its {line.count:,} tensors">▸</button>'
        if line.count > 1
        else ""
    )
    note = row_note(row, report)  # the values' note too: the non-finite elements the numbers leave out
    status = f"{row.status} (allowed)" if row.allowed_by else row.status
    shown = printable_name(line.name)  # the filter and the expanded members read it as shown
    name = escape(shown)
    cells = [f'<td class="name">{button}<code>{breakable(shown)}</code></td>']
    cells += [f"<td>{line.count:,}</td>"] if with_counts else []
    cells += [f"<td>{escape(shape_dtype(row.a))}</td>", f"<td>{escape(shape_dtype(row.b))}</td>"]
    cells.append(f'<td class="status">{status}</td>')
    cells += [f"<td>{escape(cell)}</td>" for cell in value_cells(row)] if with_values else []
    cells.append(f"<td>{escape(note)}</td>")
    return (
        f'<tr class="row{" fails" if fails else ""}" data-status="{row.status}" data-fails="{int(fails)}" '
        f'data-count="{line.count}" data-name="{name}">' + "".join(cells) + "</tr>"
    )


#: Where a name or key may wrap: after each of these (a pattern's ``{1,3,5,…}`` has no other place).
_BREAK_AFTER = re.compile(r"(?<=[.,/])")


def breakable(name: str) -> str:
    """A tensor name or config key, escaped, that may wrap after its dots, commas and slashes (``<wbr>``: nothing
    a reader copies), so that a long one, a layer pattern above all, does not widen its table past the page."""
    return "<wbr>".join(escape(part) for part in _BREAK_AFTER.split(name))


def _config(report: Report) -> list[str]:
    out = ["<h2>config.json differences</h2>"]
    if not report.config:
        return out + ["<p>None.</p>"]
    out.append("<table><thead><tr><th>key</th><th>A</th><th>B</th><th>status</th></tr></thead><tbody>")
    for diff in report.config:
        a, b = config_cells(diff)
        key = breakable(printable_name(diff.key))
        out.append(
            f'<tr><td class="name"><code>{key}</code></td><td><code>{escape(a)}</code></td>'
            f'<td><code>{escape(b)}</code></td><td class="status">{diff.status}</td></tr>'
        )
    return out + ["</tbody></table>"]


def _event(report: Report, event: EngineEvent) -> str:
    words, citation, allowed = event_parts(report, event)
    text = f'<span class="severity-{event.severity}">{event.severity}</span> <code>{escape(event.code)}</code>: '
    text += escape(words) + (f" ({escape(allowed)})" if allowed else "")
    if citation is not None:
        text += f' — <a href="{escape(citation.url)}">{escape(citation.label)}</a>{escape(citation.detail)}'
    return f"<li>{text}</li>"


def _engines(report: Report) -> list[str]:
    if not report.engines:
        return []
    out = ['<section id="engines"><h2>Engines</h2>']
    for result in report.engines:
        out.append(f'<h3 class="outcome-{result.outcome}">{escape(headline(result))}</h3>')
        shown = [e for e in result.events if shown_unfolded(e)]
        infos = [e for e in result.events if not shown_unfolded(e)]
        if shown:
            out += ["<ul>", *(_event(report, e) for e in shown), "</ul>"]
        if infos:
            out.append(f"<details><summary>{len(infos)} info event{'s' if len(infos) != 1 else ''}</summary><ul>")
            out += [_event(report, e) for e in infos] + ["</ul></details>"]
    return out + ["</section>"]


def _findings(report: Report) -> list[str]:
    out = ['<section id="findings"><h2>Findings</h2>']
    if not report.findings:
        return out + ["<p>None.</p></section>"]

    def item(index: int) -> str:
        f = report.findings[index]
        return (
            f'<li><span class="severity-{f.severity}">{f.severity}</span> <code>{escape(f.code)}</code>: '
            f"{escape(finding_message(report, f))}</li>"
        )

    shown = [item(i) for i, f in enumerate(report.findings) if f.severity != "info"]
    infos = [item(i) for i, f in enumerate(report.findings) if f.severity == "info"]
    out += ["<ul>", *shown, "</ul>"] if shown else ["<p>None that fail or warn.</p>"]
    if infos:
        out += [f"<details><summary>{len(infos)} info finding{'s' if len(infos) != 1 else ''}</summary><ul>"]
        out += infos + ["</ul></details>"]
    return out + ["</section>"]


def _totals(report: Report) -> list[str]:
    assert report.b is not None
    dtypes = sorted(report.a.dtypes.keys() | report.b.dtypes.keys())
    if not dtypes:
        return []
    out = ["<details><summary>Parameters per dtype</summary><table><thead><tr><th>dtype</th>"]
    out.append("<th>A parameters</th><th>A bytes</th><th>B parameters</th><th>B bytes</th></tr></thead><tbody>")
    for dtype in dtypes:
        da, db = report.a.dtypes.get(dtype), report.b.dtypes.get(dtype)
        pa, ba = (da.parameters, da.bytes) if da else (0, 0)
        pb, bb = (db.parameters, db.bytes) if db else (0, 0)
        out.append(
            f"<tr><td>{escape(dtype)}</td><td>{pa:,}</td><td>{human_bytes(ba)}</td><td>{pb:,}</td>"
            f"<td>{human_bytes(bb)}</td></tr>"
        )
    return out + ["</tbody></table></details>"]
