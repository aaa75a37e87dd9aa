"""The machine report: the :mod:`.document` encoded by msgspec, every tensor listed, byte-for-byte deterministic."""

from __future__ import annotations

import json

import msgspec

from ..report import Report
from . import RenderOptions
from .document import document, row_documents

_encode = msgspec.json.Encoder().encode
#: Between two rows of the compact rows list; inside a string every quote is escaped, and no other object in
#: a row starts with "name", so this text is a row boundary and nothing else.
_BOUNDARY = b'}, {"name": '


def render(report: Report, options: RenderOptions) -> str:
    """Indented like ``json.dumps(indent=2)``, except that each tensor row is one line: a Kimi-K2 pair has
    140 k rows. The head is indented by msgspec; the rows are encoded as one list and split at row boundaries.
    Each intermediate copy of the rows (~27 MB for Kimi-K2) is dropped as soon as the next one exists."""
    try:
        head = msgspec.json.format(_encode(document(report, tensors=False)), indent=2)
        if not report.tensors:
            return head.decode() + "\n"
        rows = msgspec.json.format(_encode(row_documents(report)), indent=0)
    except UnicodeEncodeError:  # a lone surrogate in a name (pickle keys may hold one): escaped as \\udXXX
        return _escaped(report)
    lines = rows.replace(_BOUNDARY, b'},\n    {"name": ')
    del rows
    before, after = head.split(b'\n  "tensors": []', 1)
    text = b"".join((before, b'\n  "tensors": [\n    ', memoryview(lines)[1:-1], b"\n  ]", after, b"\n"))
    del lines
    return text.decode()


def _escaped(report: Report) -> str:
    """The same document through the standard library, with everything outside ASCII escaped."""
    return json.dumps(msgspec.to_builtins(document(report)), indent=2) + "\n"
