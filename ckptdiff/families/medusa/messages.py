"""The words of Medusa's findings: it has none of its own yet."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

FINDINGS: dict[str, Callable[[Mapping[str, Any]], str]] = {}
