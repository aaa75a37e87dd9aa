"""The machine report: the :mod:`.document` encoded by msgspec, every tensor listed, byte-for-byte deterministic."""

from __future__ import annotations

import json
from collections.abc import Sequence

import msgspec

from ..report import Report, TensorRow, TensorSide
from . import RenderOptions
from .document import document, row_document, row_documents

_encode = msgspec.json.Encoder().encode
#: Between two rows of the compact rows list; inside a string every quote is escaped, and no other object in
#: a row starts with "name", so this text is a row boundary and nothing else.
_BOUNDARY = b'}, {"name": '
#: Between two rows of the report, each on its own line.
_ROW_SEPARATOR = ',\n    {"name": '


def render(report: Report, options: RenderOptions) -> str:
    """Indented like ``json.dumps(indent=2)``, except that each tensor row is one line: a Kimi-K2 pair has
    140 k rows. The head is indented by msgspec; the rows are written from a template (:func:`_rows_text`), or
    encoded as one list by msgspec and split at row boundaries when a name needs escaping. Each intermediate
    copy of the rows (~27 MB for Kimi-K2) is dropped as soon as the next one exists."""
    try:
        head = msgspec.json.format(_encode(document(report, tensors=False)), indent=2).decode()
        if not report.tensors:
            return head + "\n"
        rows = _rows_text(report.tensors)
        if rows is None:
            rows = _rows_encoded(report)
    except UnicodeEncodeError:  # a lone surrogate in a name (pickle keys may hold one): escaped as \\udXXX
        return _escaped(report)
    before, after = head.split('\n  "tensors": []', 1)
    return "".join((before, '\n  "tensors": [\n    {"name": ', rows, "\n  ]", after, "\n"))


def _rows_encoded(report: Report) -> str:
    """The rows, less the first one's opening ``{"name": ``, as msgspec encodes and indents them."""
    encoded = msgspec.json.format(_encode(row_documents(report)), indent=0)
    lines = encoded.replace(_BOUNDARY, b"}" + _ROW_SEPARATOR.encode())
    del encoded
    return memoryview(lines)[len(b'[{"name": ') : -1].tobytes().decode()


def _rows_text(rows: Sequence[TensorRow]) -> str | None:
    """The rows, less the first one's opening ``{"name": ``, written from a template: the text msgspec gives
    (:func:`_rows_encoded`), in one pass that encodes each distinct side once. None when a name is not plain
    printable ASCII without quotes or backslashes (it would need escaping): msgspec writes those.

    A row with a note, value statistics or a rule is encoded on its own by msgspec.
    """
    sides: dict[TensorSide, str] = {}
    names: list[str] = []
    lines: list[str] = []
    add_name, append = names.append, lines.append
    for row in rows:
        name, a, b = row.name, row.a, row.b
        add_name(name)
        if row.notes or row.values is not None or row.allowed_by is not None:
            append(_row_encoded(row))
            continue
        side_a = "null" if a is None else sides.get(a) or sides.setdefault(a, _side_text(a))
        side_b = side_a if b is a else "null" if b is None else sides.get(b) or sides.setdefault(b, _side_text(b))
        append(f'"{name}", "status": "{row.status}", "a": {side_a}, "b": {side_b}, "note": null}}')
    every_name = "".join(names)
    if not (every_name.isascii() and every_name.isprintable()) or '"' in every_name or "\\" in every_name:
        return None
    del names, every_name
    return _ROW_SEPARATOR.join(lines)


def _side_text(side: TensorSide) -> str:
    return msgspec.json.format(_encode(side), indent=0).decode()


def _row_encoded(row: TensorRow) -> str:
    """One row as msgspec encodes it in the list, less its opening ``{"name": ``."""
    return msgspec.json.format(_encode(row_document(row)), indent=0).decode()[len('{"name": ') :]


def _escaped(report: Report) -> str:
    """The same document through the standard library, with everything outside ASCII escaped."""
    return json.dumps(msgspec.to_builtins(document(report)), indent=2) + "\n"
