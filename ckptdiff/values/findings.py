"""--values in the report: values on each row, and findings (identical files, largest changes, embeds vs base)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import msgspec

from ..checkpoint import Checkpoint
from ..errors import CkptdiffError
from .base import embed_pairs_for
from .compare import ValuesOptions, ValuesResult, compare_values
from .files import HUB_LFS, Notify
from .statistics import ValueStats

if TYPE_CHECKING:  # pragma: no cover
    from ..families.model import Profile
    from ..progress import Progress
    from ..report import Finding, Report, RowValues

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
    only: Sequence[str] = (),
) -> Report:
    """The report with ``values`` on every row both sides store with equal shapes, and findings about them.
    ``options``: where the pass runs, and its progress hook (:class:`ckptdiff.values.compare.ValuesOptions`).
    ``only`` (``--values-only``): globs on the full tensor name (``*`` crosses dots); only the rows, and the
    embeddings checked against the base, that one matches are compared, each read by its byte range."""
    from ..report import Finding

    names = [
        (row.name, row.a.name or row.name, row.b.name or row.name)
        for row in report.tensors
        if row.a is not None and row.b is not None and row.a.shape == row.b.shape
    ]
    pairs, unpaired = embed_pairs_for(profile, base, a, b) if base is not None else ([], [])
    if only:
        names = [triple for triple in names if any(_matches(name, only) for name in triple)]
        pairs = [(own, base_name) for own, base_name in pairs if _matches(own, only)]
        if not names and not pairs:
            patterns = " ".join(shlex.quote(pattern) for pattern in only)
            raise CkptdiffError(
                "--values-only", f"{patterns} matches no tensor both sides store with one shape", "check the names"
            )
    result = compare_values(
        a,
        b,
        names,
        base=base,
        embed_pairs=pairs,
        offline=offline,
        progress=progress,
        notify=notify,
        options=options,
        by_tensor=bool(only),
    )
    rows = tuple(
        msgspec.structs.replace(row, values=_row_values(result.stats[row.name])) if row.name in result.stats else row
        for row in report.tensors
    )
    findings = list(report.findings) + value_findings(result)
    findings += [Finding("info", "base_pair_unavailable", params=why) for why in unpaired]
    return replace(report, tensors=rows, findings=tuple(findings))


def _matches(name: str, patterns: Sequence[str]) -> bool:
    """A glob on the whole name, in which ``*`` crosses dots (``model.*.q_proj.weight``)."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def _row_values(stats: ValueStats) -> RowValues:
    from ..report import RowValues

    return RowValues.of(
        stats.equal, stats.max_abs, stats.mean_abs, stats.cosine, stats.rel_l2, stats.method, stats.note
    )


def value_findings(result: ValuesResult) -> list[Finding]:
    """Identical files, the largest changes, embed checks against the base: codes and params, which the formats
    word (:mod:`ckptdiff.formats.values_messages`)."""
    from ..report import Finding

    out: list[Finding] = []
    for (file_a, file_b), digest in sorted(result.identical.items()):
        hashed: dict[str, str | None] = {"file_a": file_a, "file_b": file_b, "sha256": digest, "hash_source": HUB_LFS}
        hashed |= {"revision_a": result.revisions[0], "revision_b": result.revisions[1]}
        out.append(Finding("info", "identical_file", params=hashed))
    stats = result.stats
    changed = [name for name, s in stats.items() if not s.equal]
    # ranked by size: a change seen only in the bytes (F4, F6) has none, so it is named apart, not first
    measured = sorted((stats[name].change_order, name) for name in changed if stats[name].measured)
    unmeasured = sorted(name for name in changed if not stats[name].measured)
    summary = {
        "compared": len(stats),
        "equal": sum(1 for s in stats.values() if s.equal),
        "changed": len(changed),
        "largest": [{"tensor": name, **_numbers(stats[name])} for _, name in measured[:TOP_CHANGES]],
        "unmeasured": [{"tensor": name, **_numbers(stats[name])} for name in unmeasured[:TOP_CHANGES]],
        "unmeasured_count": len(unmeasured),
    }
    out.append(Finding("info", "values_changed" if changed else "values_equal", params=summary))
    for label, own, base_name, embed in result.embeds:
        pair = {"side": label, "tensor": own, "base_name": base_name}
        if embed.equal:
            out.append(Finding("info", "embed_matches_base", params=pair))
            continue
        unrelated = embed.cosine is None or abs(embed.cosine) < 0.5
        params = {**pair, **_numbers(embed), "unrelated": unrelated}
        out.append(Finding("error" if unrelated else "warning", "embed_differs_from_base", params=params))
    return out


def _numbers(stats: ValueStats) -> dict[str, Any]:
    """How a tensor differs, for a finding: relative L2, cosine, max |b−a| (None when undefined), and the note."""
    numbers: dict[str, Any] = {"rel_l2": stats.rel_l2, "cosine": stats.cosine, "max_abs": stats.max_abs}
    return {**numbers, "note": msgspec.to_builtins(stats.note)} if stats.note is not None else numbers
