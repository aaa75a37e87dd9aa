"""The machine report: ``Report.to_dict()`` as JSON, every tensor listed, byte-for-byte deterministic."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring  # json's own (C) string encoder, as json.dumps(ensure_ascii=False)
from operator import attrgetter

from ..report import Report, TensorRow
from . import RenderOptions


def render(report: Report, options: RenderOptions) -> str:
    """Indented like ``json.dumps(indent=2)``, except that each tensor row is one line: a Kimi-K2 pair has 140 k
    rows, and json's indenting encoder is pure Python. The text is joined once from its parts: every
    concatenation of a 27 MB report would copy it."""
    parts = ["{\n"]
    for key, value in report.to_dict(tensors=False).items():
        parts += [",\n"] if len(parts) > 1 else []
        parts.append(f"  {json.dumps(key)}: ")
        if key == "tensors" and report.tensors:
            parts += ["[\n    ", ",\n    ".join(_row_lines(report.tensors)), "\n  ]"]
        else:  # json.dumps escapes newlines inside strings, so every newline here is layout
            parts.append(json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  "))
    parts.append("\n}\n")
    return "".join(parts)


_ENCODE_ROW = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode  # to_dict() is a tree
_NAME, _STATUS, _A, _B = attrgetter("name"), attrgetter("status"), attrgetter("a"), attrgetter("b")
_NOTE, _VALUES, _ALLOWED_BY = attrgetter("note"), attrgetter("values"), attrgetter("allowed_by")


def _row_lines(rows: Sequence[TensorRow]) -> Iterator[str]:
    """Each row as json.dumps writes its ``to_dict()``, from a template: rows share their sides (~30 distinct
    in 140 k rows), so each side is encoded once; a row with values or a policy marker is encoded whole."""
    sides = list(map(_A, rows)) + list(map(_B, rows))
    encoded = {id(side): _ENCODE_ROW(side.to_dict()) for side in {id(side): side for side in sides}.values() if side}
    encoded[id(None)] = "null"
    notes = [encode_basestring(note) if note is not None else "null" for note in map(_NOTE, rows)]
    side_texts = list(map(encoded.__getitem__, map(id, sides)))
    a_texts, b_texts = side_texts[: len(rows)], side_texts[len(rows) :]
    columns = zip(map(encode_basestring, map(_NAME, rows)), map(_STATUS, rows), a_texts, b_texts)
    # a row without value statistics or policy marker, as json.dumps writes its to_dict(): the fields in order
    lines = [
        f'{{"name": {n}, "status": "{s}", "a": {a}, "b": {b}, "note": {note}}}'
        for (n, s, a, b), note in zip(columns, notes)
    ]
    plain = list(map(_VALUES, rows)).count(None) == len(rows) == list(map(_ALLOWED_BY, rows)).count(None)
    if plain:
        return lines
    return (
        line if row.values is None and row.allowed_by is None else _ENCODE_ROW(row.to_dict())
        for line, row in zip(lines, rows)
    )
