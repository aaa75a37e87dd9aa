"""The machine report: ``Report.to_dict()`` as JSON, every tensor listed, byte-for-byte deterministic."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from ..report import Report, TensorRow
from . import RenderOptions


def render(report: Report, options: RenderOptions) -> str:
    """Indented like ``json.dumps(indent=2)``, except that each tensor row is one line: a Kimi-K2 pair has 140 k
    rows, and json's indenting encoder is pure Python (~6x slower here than its C encoder). The text is joined
    once from its parts: every concatenation of a 27 MB report would copy it."""
    parts = ["{\n"]
    for key, value in report.to_dict(tensors=False).items():
        parts += [",\n"] if len(parts) > 1 else []
        parts.append(f"  {json.dumps(key)}: ")
        if key == "tensors" and report.tensors:
            parts += ["[\n    ", *_rows_one_a_line(report.tensors), "\n  ]"]
        else:  # json.dumps escapes newlines inside strings, so every newline here is layout
            parts.append(json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  "))
    parts.append("\n}\n")
    return "".join(parts)


_ROW_BOUNDARY = '}, {"name": '
#: Rows turned into dicts at a time: all 140 k at once would hold ~100 MB of dicts.
_CHUNK = 8192


def _rows_one_a_line(rows: Sequence[TensorRow]) -> Iterator[str]:
    """The rows, one a line, in pieces. json's C encoder writes a chunk of rows in one call, then each boundary
    between rows becomes a line break. The boundary text cannot occur inside a string (the encoder escapes quotes
    there); if it occurs anywhere else (a nested list of objects), the count shows it and each row is encoded on
    its own."""
    for start in range(0, len(rows), _CHUNK):
        dicts = [row.to_dict() for row in rows[start : start + _CHUNK]]
        text = json.dumps(dicts, ensure_ascii=False, check_circular=False)[1:-1]  # to_dict() is a tree
        if start:
            yield ",\n    "
        if text.count(_ROW_BOUNDARY) == len(dicts) - 1:
            yield text.replace(_ROW_BOUNDARY, '},\n    {"name": ')
        else:
            yield ",\n    ".join(map(json.JSONEncoder(ensure_ascii=False).encode, dicts))
