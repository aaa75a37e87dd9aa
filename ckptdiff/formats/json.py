"""The machine report: ``Report.to_dict()`` as JSON, every tensor listed, byte-for-byte deterministic."""

from __future__ import annotations

import json
from typing import Any

from ..report import Report
from . import RenderOptions


def render(report: Report, options: RenderOptions) -> str:
    """Indented like ``json.dumps(indent=2)``, except that each tensor row is one line: a Kimi-K2 pair has 140 k
    rows, and json's indenting encoder is pure Python (~6x slower here than its C encoder)."""
    members = []
    for key, value in report.to_dict().items():
        if key == "tensors" and value:
            text = "[\n    " + _one_row_a_line(value) + "\n  ]"
        else:  # json.dumps escapes newlines inside strings, so every newline here is layout
            text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        members.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(members) + "\n}\n"


_ROW_BOUNDARY = '}, {"name": '


def _one_row_a_line(rows: list[dict[str, Any]]) -> str:
    """The rows, one a line. json's C encoder writes the whole list in one call, then each boundary between rows
    becomes a line break. The boundary text cannot occur inside a string (the encoder escapes quotes there); if it
    occurs anywhere else (a nested list of objects), the count shows it and each row is encoded on its own."""
    text = json.dumps(rows, ensure_ascii=False, check_circular=False)[1:-1]  # to_dict() is a tree
    if text.count(_ROW_BOUNDARY) == len(rows) - 1:
        return text.replace(_ROW_BOUNDARY, '},\n    {"name": ')
    return ",\n    ".join(map(json.JSONEncoder(ensure_ascii=False).encode, rows))
