"""Output formats: one module per format, each with ``render(report, options) -> str``.

Formats draw; they never recompute a verdict.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

FORMAT_NAMES: tuple[str, ...] = ("table", "markdown", "json", "junit", "github")
#: Other spellings --format and the config file accept.
FORMAT_ALIASES: dict[str, str] = {"md": "markdown"}
#: ``-o report.md`` picks markdown when --format is not given.
FORMAT_BY_EXTENSION: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".xml": "junit",
    ".txt": "table",
}


@dataclass(frozen=True)
class RenderOptions:
    color: bool = False  # ANSI colours for statuses (terminal table only)
    expand: bool = False  # one row per tensor instead of collapsed layer patterns (table, markdown)
    only_diffs: bool = False  # hide rows whose status is match


def render(report: Any, fmt: str = "table", options: RenderOptions | None = None, **overrides: Any) -> str:
    if fmt not in FORMAT_NAMES:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMAT_NAMES)}")
    options = options or RenderOptions(**overrides)
    module = importlib.import_module(f"{__name__}.{fmt}")
    return module.render(report, options)
