"""JSON held to what the safetensors reference reads: no key named twice, no lone surrogate escape, bounded
nesting. Shared by the header parser and the index and config readers."""

from __future__ import annotations

import json
import re
from typing import Any

#: JSON nesting deeper than this is not a header or an index, whatever the parser could survive.
MAX_JSON_DEPTH = 64


class DuplicateKeyError(Exception):
    """Raised by :func:`reject_duplicate_keys`; callers turn it into their own CkptdiffError."""


def reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook: a JSON object naming a key twice is an error (json would silently keep the last)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return result


def nesting_depth(text: str) -> int:
    """Deepest bracket nesting outside strings: checked before json recursion can blow the stack."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def has_lone_surrogate(text: str, document: Any) -> bool:
    """Whether a decoded JSON document holds a lone surrogate (``"\\ud800"``), which no UTF-8 output can print.

    The reference implementation refuses these; only texts with a surrogate escape pay for the full check.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return False
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
