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
#: What a name may hold to be written as it is: printable ASCII but the quote and the backslash (deleted from a
#: name's bytes, these leave nothing: ten times faster than ``str.isprintable`` over 140 k names).
_PLAIN_NAME_BYTES = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\')
#: The end of a row's line and the next row's opening, up to the first character of its name.
_NEXT_ROW = _ROW_SEPARATOR + '"'


def render(report: Report, options: RenderOptions) -> str:
    """Indented like ``json.dumps(indent=2)``, except that each tensor row is one line: a Kimi-K2 pair has
    140 k rows. The head is indented by msgspec; the rows are written from templates (:func:`_row_parts`), or
    encoded as one list by msgspec and split at row boundaries when a name needs escaping. The report is joined
    once, from pieces that are mostly shared: ~27 MB for Kimi-K2, and no second copy of it."""
    try:
        head = msgspec.json.format(_encode(document(report, tensors=False)), indent=2).decode()
        if not report.tensors:
            return head + "\n"
        parts = _row_parts(report.tensors)
        if parts is None:
            parts = [_rows_encoded(report)]
    except UnicodeEncodeError:  # a lone surrogate in a name (pickle keys may hold one): escaped as \\udXXX
        return _escaped(report)
    before, after = head.split('\n  "tensors": []', 1)
    return "".join((before, '\n  "tensors": [\n    {"name": "', *parts, "\n  ]", after, "\n"))


def _rows_encoded(report: Report) -> str:
    """The rows, less the first one's opening ``{"name": "``, as msgspec encodes and indents them."""
    encoded = msgspec.json.format(_encode(row_documents(report)), indent=0)
    lines = encoded.replace(_BOUNDARY, b"}" + _ROW_SEPARATOR.encode())
    del encoded
    return memoryview(lines)[len(b'[{"name": "') : -1].tobytes().decode()


def _row_parts(rows: Sequence[TensorRow]) -> list[str] | None:
    """The rows, less the first one's opening ``{"name": "``, as pieces whose concatenation is the text msgspec
    gives (:func:`_rows_encoded`): each row's name, then the rest of its line and the next row's opening, shared
    by every row of the same status and sides (one piece for 140 k matching rows of a few shapes). None when a
    name is not plain printable ASCII without quotes or backslashes (it would need escaping): msgspec writes those.

    A row with a note, value statistics or a rule is encoded on its own by msgspec.
    """
    sides: dict[TensorSide, str] = {}
    tails: dict[tuple[str, TensorSide | None, TensorSide | None], str] = {}
    match_tails: dict[TensorSide, str] = {}  # most rows: a match whose one side object is A's and B's
    parts: list[str] = []  # a name, then the rest of its row: names are at even places
    add = parts.append
    for row in rows:
        if row.notes or row.values is not None or row.allowed_by is not None:
            add("")  # no name to check: msgspec escapes what it writes
            add(_row_encoded(row) + _NEXT_ROW)
            continue
        a, b = row.a, row.b
        if b is a and a is not None and row.status == "match":
            tail = match_tails.get(a)
            if tail is None:
                tail = match_tails[a] = _tail(row.status, a, b, sides)
        else:
            key = (row.status, a, b)
            tail = tails.get(key)
            if tail is None:
                tail = tails[key] = _tail(row.status, a, b, sides)
        add(row.name)
        add(tail)
    every_name = "".join(parts[::2])
    if not every_name.isascii() or every_name.encode().translate(None, _PLAIN_NAME_BYTES):
        return None
    parts[-1] = parts[-1].removesuffix(_NEXT_ROW)
    return parts


def _tail(status: str, a: TensorSide | None, b: TensorSide | None, sides: dict[TensorSide, str]) -> str:
    """The end of a row's line after its name, and the next row's opening; each side encoded once (``sides``)."""
    side_a = "null" if a is None else sides.get(a) or sides.setdefault(a, _side_text(a))
    side_b = "null" if b is None else sides.get(b) or sides.setdefault(b, _side_text(b))
    return f'", "status": "{status}", "a": {side_a}, "b": {side_b}, "note": null}}' + _NEXT_ROW


def _side_text(side: TensorSide) -> str:
    return msgspec.json.format(_encode(side), indent=0).decode()


def _row_encoded(row: TensorRow) -> str:
    """One row as msgspec encodes it in the list, less its opening ``{"name": "``."""
    return msgspec.json.format(_encode(row_document(row)), indent=0).decode()[len('{"name": "') :]


def _escaped(report: Report) -> str:
    """The same document through the standard library, with everything outside ASCII escaped."""
    return json.dumps(msgspec.to_builtins(document(report)), indent=2) + "\n"
