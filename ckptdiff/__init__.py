"""ckptdiff: are two model checkpoints drop-in compatible? Reads only safetensors headers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .report import Report

__all__ = ["__version__", "compare"]


def compare(a: str, b: str, **options: Any) -> Report:
    """Compare two checkpoint specs (paths or ``org/name[@revision]``) and return the Report.

    Keyword options are those of :func:`ckptdiff.compare.compare_specs`.
    """
    from .compare import compare_specs

    return compare_specs(a, b, **options)
