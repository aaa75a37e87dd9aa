"""Helpers shared by the human-readable formats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..report import STATUSES, Report, TensorRow, TensorSide

if TYPE_CHECKING:
    from . import RenderOptions
    from .collapse import DisplayRow


def shape_dtype(side: TensorSide | None) -> str:
    if side is None:
        return "—"
    return f"[{', '.join(map(str, side.shape))}] {side.dtype}"


def human_count(n: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def counts_line(report: Report) -> str:
    parts = [f"{report.counts[status]} {status}" for status in STATUSES if report.counts[status]]
    text = ", ".join(parts) or "no tensors"
    allowed = sum(1 for row in report.tensors if row.allowed_by is not None)
    return f"{text} ({allowed} allowed by policy)" if allowed else text


def row_note(row: TensorRow) -> str:
    """The note column: the comparison's note, then the policy rule that accepts the row."""
    if row.allowed_by is None:
        return row.note or ""
    allowed = f"allowed by {row.allowed_by}"
    return f"{row.note}; {allowed}" if row.note else allowed


def display_rows(report: Report, options: RenderOptions) -> list[DisplayRow]:
    """The tensor rows a table shows: differing only (``only_diffs``), collapsed unless ``expand``."""
    from .collapse import collapse, expanded

    rows = visible_rows(report, options.only_diffs)
    return expanded(rows) if options.expand else collapse(rows)


def visible_rows(report: Report, only_diffs: bool) -> Sequence[TensorRow]:
    if only_diffs:
        return [row for row in report.tensors if row.status != "match"]
    return report.tensors


def config_value(value: object) -> str:
    import json

    return "—" if value is None else json.dumps(value, sort_keys=True)
