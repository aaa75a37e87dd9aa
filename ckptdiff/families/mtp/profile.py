"""MTP heads in a comparison: a side whose config announces MTP layers it does not store (an export or a
quantization that dropped them), or stores MTP layers it does not announce."""

from __future__ import annotations

from ...checkpoint import Checkpoint
from ...report import Finding, TensorRow
from ..model import Profile
from .detect import detect
from .spec import MtpSpec


def side_findings(checkpoint: Checkpoint, side: str) -> list[Finding]:
    """What one side's config says of its MTP layers against what it stores."""
    if checkpoint.config is None:
        return []
    spec = MtpSpec.of(checkpoint.config, checkpoint.tensors)
    if spec.layout == "mtp":
        if not spec.mtp_prefix_names:
            return [Finding("error", "mtp_layers_missing", subject="mtp.*", params={"side": side, "layout": "mtp"})]
        return []
    announced, stored = spec.announced, spec.stored_mtp
    missing = [layer for layer in announced if layer not in stored]
    if missing:
        params = {"side": side, "nextn": spec.nextn, "hidden_layers": spec.hidden_layers, "missing": missing}
        params |= {"stored": list(stored), "layout": "deepseek"}
        return [Finding("error", "mtp_layers_missing", subject="num_nextn_predict_layers", params=params)]
    extra = [layer for layer in stored if layer not in announced]
    if extra:
        params = {"side": side, "nextn": spec.nextn, "hidden_layers": spec.hidden_layers, "extra": extra}
        return [Finding("warning", "mtp_layers_unannounced", subject="num_nextn_predict_layers", params=params)]
    return []


def review(
    a: Checkpoint, b: Checkpoint, rows: tuple[TensorRow, ...], base: Checkpoint | None = None
) -> tuple[tuple[TensorRow, ...], list[Finding]]:
    return rows, [*side_findings(a, "A"), *side_findings(b, "B")]


PROFILE = Profile(name="mtp", detect=detect, review=review)
