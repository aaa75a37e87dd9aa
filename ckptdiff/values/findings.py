"""--values in the report: values on each row, and findings (identical files, largest changes, embeds vs base)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import msgspec

from ..checkpoint import Checkpoint
from .base import embed_pairs_for
from .compare import ValuesOptions, ValuesResult, compare_values
from .files import Notify
from .statistics import ValueStats

if TYPE_CHECKING:  # pragma: no cover
    from ..profiles import Profile
    from ..progress import Progress
    from ..report import Report, RowValues, Severity

#: How many rows the "largest changes" finding names.
TOP_CHANGES = 5


def attach_values(
    report: Report,
    a: Checkpoint,
    b: Checkpoint,
    *,
    base: Checkpoint | None = None,
    profile: Profile | None = None,
    offline: bool = False,
    progress: Progress | None = None,
    notify: Notify | None = None,
    options: ValuesOptions | None = None,
) -> Report:
    """The report with ``values`` on every row both sides store with equal shapes, and findings about them.
    ``options``: where the pass runs, and its progress hook (:class:`ckptdiff.values.compare.ValuesOptions`)."""
    from ..report import Finding

    names = [
        (row.name, row.a.name or row.name, row.b.name or row.name)
        for row in report.tensors
        if row.a is not None and row.b is not None and row.a.shape == row.b.shape
    ]
    pairs, unpaired = embed_pairs_for(profile, base, a, b) if base is not None else ([], [])
    result = compare_values(
        a, b, names, base=base, embed_pairs=pairs, offline=offline, progress=progress, notify=notify, options=options
    )
    rows = tuple(
        msgspec.structs.replace(row, values=_row_values(result.stats[row.name])) if row.name in result.stats else row
        for row in report.tensors
    )
    findings = list(report.findings) + [Finding(*f) for f in value_findings(result)]
    findings += [Finding("info", "base_pair_unavailable", why) for why in unpaired]
    return replace(report, tensors=rows, findings=tuple(findings))


def _row_values(stats: ValueStats) -> RowValues:
    from ..report import RowValues

    return RowValues.of(
        stats.equal, stats.max_abs, stats.mean_abs, stats.cosine, stats.rel_l2, stats.method, stats.note or None
    )


def value_findings(result: ValuesResult) -> list[tuple[Severity, str, str]]:
    """(severity, code, message) triples: identical files, the largest changes, embed checks against the base."""
    out: list[tuple[Severity, str, str]] = []
    for (file_a, file_b), digest in sorted(result.identical.items()):
        same = file_a if file_a == file_b else f"{file_a} (A) and {file_b} (B)"
        out.append(("info", "identical_file", f"{same}: same sha256 {digest[:12]}… on both sides; not read"))
    stats = result.stats
    changed = sorted((s.change, name) for name, s in stats.items() if not s.equal)
    changed.reverse()
    equal = sum(1 for s in stats.values() if s.equal)
    summary = f"{len(stats)} tensors compared by value: {equal} equal, {len(changed)} changed"
    if changed:
        top = ", ".join(f"{name} ({_describe(stats[name])})" for _, name in changed[:TOP_CHANGES])
        summary += f"; largest: {top}"
    out.append(("info", "values_changed" if changed else "values_equal", summary))
    for label, own, base_name, embed in result.embeds:
        if embed.equal:
            out.append(("info", "embed_matches_base", f"{label}'s {own} equals the base's {base_name}"))
            continue
        unrelated = embed.cosine is None or abs(embed.cosine) < 0.5
        severity: Severity = "error" if unrelated else "warning"
        why = "unrelated values (random or another model's?)" if unrelated else "trained away from the base"
        message = f"{label}'s {own} differs from the base's {base_name}: {_describe(embed)}; {why}"
        out.append((severity, "embed_differs_from_base", message))
    return out


def _describe(stats: ValueStats) -> str:
    parts = []
    if stats.rel_l2 is not None:
        parts.append(f"rel L2 {stats.rel_l2:.3g}")
    if stats.cosine is not None:
        parts.append(f"cos {stats.cosine:.6f}")
    if stats.max_abs is not None:
        parts.append(f"max |Δ| {stats.max_abs:.3g}")
    return ", ".join(parts) or (stats.note or "differs")
