"""The words of --values findings (:mod:`ckptdiff.values.findings`), each from its params alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ..report import ValueNote

Params = Mapping[str, Any]


def shape(dims: Any) -> str:
    return f"[{', '.join(map(str, dims))}]"


def value_note_text(note: ValueNote) -> str:
    """What a row's value statistics leave out or approximate, in words: ``BF16 vs F32, compared as float32``."""
    parts = []
    if note.widened is not None:
        parts.append(f"{note.widened[0]} vs {note.widened[1]}, compared as float32")
    if note.not_widened is not None:
        parts.append(f"dtype {note.not_widened} is not widened to float32")
    if note.bytes_compared:
        parts.append("bytes compared")
    if note.nonfinite:
        parts.append(nonfinite_text(note))
    return "; ".join(parts)


def nonfinite_text(note: ValueNote | None) -> str:
    """``3 non-finite element(s) left out of the statistics``, or "" when none were: said wherever the numbers are,
    since a tensor gone NaN where the other is finite would otherwise read max |Δ| 0, cos 1."""
    return f"{note.nonfinite:,} non-finite element(s) left out of the statistics" if note and note.nonfinite else ""


def describe(numbers: Params) -> str:
    """How a tensor differs: ``rel L2 0.0123, cos 0.999876, max |Δ| 0.5``, else its note, else "differs"."""
    parts = []
    if numbers["rel_l2"] is not None:
        parts.append(f"rel L2 {numbers['rel_l2']:.3g}")
    if numbers["cosine"] is not None:
        parts.append(f"cos {numbers['cosine']:.6f}")
    if numbers["max_abs"] is not None:
        parts.append(f"max |Δ| {numbers['max_abs']:.3g}")
    note = msgspec.convert(numbers["note"], ValueNote) if numbers.get("note") else None
    if parts and nonfinite_text(note):
        parts.append(nonfinite_text(note))
    return ", ".join(parts) or (value_note_text(note) if note is not None else "differs")


def _identical_file(params: Params) -> str:
    file_a, file_b = params["file_a"], params["file_b"]
    same = file_a if file_a == file_b else f"{file_a} (A) and {file_b} (B)"
    source = ""
    if params.get("hash_source") == "hub_lfs":
        commits = {params.get("revision_a"), params.get("revision_b")} - {None}
        at = " and ".join(sorted(str(commit)[:12] for commit in commits))
        source = f" (the Hub's LFS metadata at {at})" if at else " (the Hub's LFS metadata)"
    return f"{same}: same sha256 {params['sha256'][:12]}… on both sides{source}; not read"


def _values_summary(params: Params) -> str:
    text = f"{params['compared']} tensors compared by value: {params['equal']} equal, {params['changed']} changed"
    if params["largest"]:
        text += "; largest: " + ", ".join(f"{one['tensor']} ({describe(one)})" for one in params["largest"])
    if unmeasured := params.get("unmeasured"):
        more = params["unmeasured_count"] - len(unmeasured)
        named = [f"{one['tensor']} ({describe(one)})" for one in unmeasured] + ([f"+{more} more"] if more else [])
        text += "; changed, not measured: " + ", ".join(named)
    return text


def _embed_matches_base(params: Params) -> str:
    return f"{params['side']}'s {params['tensor']} equals the base's {params['base_name']}"


def _embed_differs_from_base(params: Params) -> str:
    why = "unrelated values (random or another model's?)" if params["unrelated"] else "trained away from the base"
    return (
        f"{params['side']}'s {params['tensor']} differs from the base's {params['base_name']}: "
        f"{describe(params)}; {why}"
    )


def _base_pair_unavailable(params: Params) -> str:
    side, tensor = params["side"], params["tensor"]
    if params["reason"] == "shapes_differ":
        return (
            f"{side}'s {tensor} {shape(params['shape'])} is not compared by value with the base's "
            f"{params['base_name']} {shape(params['base_shape'])}: the shapes differ"
        )
    return (
        f"{side}'s {tensor} is not compared by value: the base ({params['layout']} layout) stores no "
        f"{params['role']} ({' or '.join(params['looked_for'])}) among the tensors read"
    )


#: --values finding code → its text from its params.
VALUES: dict[str, Callable[[Params], str]] = {
    "identical_file": _identical_file,
    "values_changed": _values_summary,
    "values_equal": _values_summary,
    "embed_matches_base": _embed_matches_base,
    "embed_differs_from_base": _embed_differs_from_base,
    "base_pair_unavailable": _base_pair_unavailable,
}
