"""ckptdiff: are two model checkpoints drop-in compatible? Reads only safetensors headers."""

from __future__ import annotations

__version__ = "0.1.0"

# Load the submodule first: importing ``ckptdiff.compare`` later would otherwise rebind the package
# attribute ``compare`` from the API function below to the module. It is light (no hub, no torch).
from . import compare as _compare_module  # noqa: E402
from .report import Report  # noqa: E402

__all__ = ["__version__", "compare", "Report"]


def compare(a: str, b: str | None = None, **options: object) -> Report:
    """Compare two checkpoint specs (paths or ``org/name[@revision]``) and return the Report.

    Keyword options are those of :func:`ckptdiff.compare.compare_specs` (profile, policy, base, source_options,
    engines). With ``engines=("sglang",)`` and no ``b``, the one checkpoint is checked against those engines.
    """
    return _compare_module.compare_specs(a, b, **options)  # type: ignore[arg-type]
