"""Output formats: one module per format, each a :class:`Format` (``render(report, options) -> str``).

Formats draw; they never recompute a verdict. Each owns its words (from :mod:`.messages`) and its escaping.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import CkptdiffError

if TYPE_CHECKING:
    from ..report import Report

FORMAT_NAMES: tuple[str, ...] = ("table", "markdown", "json", "junit", "github", "html")
#: Other spellings --format and the config file accept.
FORMAT_ALIASES: dict[str, str] = {"md": "markdown"}
#: The module that renders each format: a registry, so that a run loads only the format it writes.
FORMAT_MODULES: dict[str, str] = {
    "table": "ckptdiff.formats.table",
    "markdown": "ckptdiff.formats.markdown",
    "json": "ckptdiff.formats.json",
    "junit": "ckptdiff.formats.junit",
    "github": "ckptdiff.formats.github",
    "html": "ckptdiff.formats.html",
}
#: ``-o report.md`` picks markdown when --format is not given.
FORMAT_BY_EXTENSION: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".xml": "junit",
    ".txt": "table",
    ".html": "html",
    ".htm": "html",
}


@dataclass(frozen=True)
class RenderOptions:
    color: bool = False  # ANSI colours for statuses (terminal table only)
    expand: bool = False  # one row per tensor instead of collapsed layer patterns (table, markdown)
    only_diffs: bool = False  # hide rows whose status is match
    #: markdown: the most characters the report may take (a PR comment; GitHub refuses one over 65,536). Past it
    #: the report leaves detail out, naming every failing tensor still and counting what it left out. None: no limit.
    budget: int | None = 60_000
    #: markdown: where the full report is (a URL or a file), named when the budget cut the report.
    full_report: str | None = None

    def __post_init__(self) -> None:
        for name in ("color", "expand", "only_diffs"):
            if not isinstance(getattr(self, name), bool):
                raise CkptdiffError("options", f"{name}={getattr(self, name)!r} is not True or False")
        budget = self.budget
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise CkptdiffError("options", f"budget={budget!r} is not a positive number of characters, or None")
        if self.full_report is not None and not isinstance(self.full_report, str):
            raise CkptdiffError("options", f"full_report={self.full_report!r} is not a URL or a file's name")


class FormatError(CkptdiffError, ValueError):
    """A format name ckptdiff does not know."""


class Format(Protocol):
    """What every format module provides."""

    def render(self, report: Report, options: RenderOptions) -> str: ...


def get_format(fmt: str) -> Format:
    """The format module named ``fmt`` (``md`` is markdown, as ``--format md`` is); an unknown name is a
    :class:`FormatError` naming the choices."""
    fmt = FORMAT_ALIASES.get(fmt, fmt) if isinstance(fmt, str) else fmt
    if fmt not in FORMAT_MODULES:
        raise FormatError("format", f"unknown format {fmt!r}", f"choose from {', '.join(FORMAT_NAMES)}")
    return cast(Format, importlib.import_module(FORMAT_MODULES[fmt]))


def load_format(fmt: str) -> None:
    """Import what writing ``fmt`` takes, ahead of the report: its module, and the table's, which the command
    line's verdict and terminal output use (:func:`ckptdiff.cli_output.deliver`)."""
    get_format(fmt)
    get_format("table")


def render(report: Report, fmt: str = "table", options: RenderOptions | None = None, **overrides: Any) -> str:
    """``report`` in the format ``fmt``, drawn with ``options`` (default ``RenderOptions()``) with ``overrides``, its
    fields by name, replacing theirs. Anything but a report (its ``to_dict()``, None), options of another type and
    an option it does not have are refused with a :class:`~ckptdiff.errors.CkptdiffError`, as an unknown format is."""
    from ..report import Report

    if not isinstance(report, Report):
        hint = "give what ckptdiff.compare() returns"
        raise CkptdiffError("report", f"{type(report).__name__} is not a ckptdiff Report", hint)
    if options is not None and not isinstance(options, RenderOptions):
        hint = "give a ckptdiff.RenderOptions, or the options by name"
        raise CkptdiffError("options", f"{type(options).__name__} is not a RenderOptions", hint)
    known = [field.name for field in fields(RenderOptions)]
    for name in overrides:
        if name not in known:
            raise CkptdiffError("options", f"{name!r} is not a render option", f"choose from {', '.join(known)}")
    return get_format(fmt).render(report, replace(options or RenderOptions(), **overrides))
