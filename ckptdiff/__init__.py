"""ckptdiff: are two model checkpoints drop-in compatible? Reads only safetensors headers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .report import Report

__all__ = ["__version__", "compare", "Report"]


def compare(a: str, b: str | None = None, **options: object) -> Report:
    """Compare two checkpoint specs (paths, ``org/name[@revision]``, store URLs) and return the Report.

    Keyword options are those of :func:`ckptdiff.comparison.compare_specs` (profile, policy, base,
    source_options, engines). With ``engines=("sglang",)`` and no ``b``, the one checkpoint is checked against
    those engines.
    """
    from .comparison import compare_specs

    return compare_specs(a, b, **options)  # type: ignore[arg-type]


def __getattr__(name: str) -> Any:
    # Report on demand: `import ckptdiff` (and so `ckptdiff --help`) loads none of the comparison machinery
    if name == "Report":
        from .report import Report

        return Report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
