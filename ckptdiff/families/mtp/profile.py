"""MTP heads in a comparison: a side whose config announces MTP layers it does not store (an export or a
quantization that dropped them), or stores MTP layers it does not announce."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from ...checkpoint import Checkpoint
from ...report import Finding, TensorRow
from ..model import Config, Profile
from .detect import INDEXED_LAYOUTS, MTP_ARCHITECTURE_WORDS, detect
from .spec import MtpSpec, layer_index

#: A name with an ``mtp`` path component (``model.mtp.layers.0.``, ``model.mtp_block.0.``, ``mtp_norm``).
_MTP_NAMED = re.compile(r"(?:^|\.)mtp(?:[._]|$)")


def side_findings(checkpoint: Checkpoint, side: str) -> list[Finding]:
    """What one side's config says of its MTP layers against what it stores."""
    if checkpoint.config is None:
        return []
    spec = MtpSpec.of(checkpoint.config, checkpoint.tensors)
    if spec.layout == "mtp":
        if not spec.mtp_prefix_names:
            return [Finding("error", "mtp_layers_missing", subject="mtp.*", params={"side": side, "layout": "mtp"})]
        return []
    if spec.layout in INDEXED_LAYOUTS:
        stored_at = spec.indexed_stored
        absent = [index for index in range(spec.nextn or 0) if index not in stored_at]
        if absent:
            params = {"side": side, "nextn": spec.nextn, "missing": absent, "stored": list(stored_at)}
            params |= {"layout": spec.layout, "prefix": INDEXED_LAYOUTS[spec.layout][0][0]}
            return [Finding("error", "mtp_layers_missing", subject="num_nextn_predict_layers", params=params)]
        return []
    announced, stored = spec.announced, spec.stored_mtp
    missing = [layer for layer in announced if layer not in stored]
    elsewhere = _elsewhere(spec)
    if missing and elsewhere:
        # MTP tensors under names of a layout ckptdiff does not know (model.mtp.layers.0...): not "missing"
        unknown: dict[str, Any] = {"side": side, "nextn": spec.nextn, "hidden_layers": spec.hidden_layers}
        unknown |= {"missing": missing, "examples": elsewhere[:3], "count": len(elsewhere)}
        return [Finding("warning", "mtp_layout_unknown", subject="num_nextn_predict_layers", params=unknown)]
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


def _elsewhere(spec: MtpSpec) -> list[str]:
    """Names with an ``mtp`` path component outside the decoder layers (a layout ckptdiff does not know)."""
    return sorted(name for name in spec.names if _MTP_NAMED.search(name) and layer_index(name) is None)


def variants(config: Config | None, names: Collection[str]) -> tuple[str, ...]:
    """The MTP layout a side is (words in messages.VARIANTS): DeepSeek-V3/GLM-4.5 layers after the main ones,
    Qwen3-Next's ``mtp.*`` block, an indexed layout's (MiMo, ERNIE-4.5) or one it does not know, and whether it is
    a standalone export (its architecture names the MTP head)."""
    if config is None:
        return ()
    spec = MtpSpec.of(config, names)
    layout = {"mtp": "mtp_block", "deepseek": "nextn_layers"}.get(spec.layout, f"{spec.layout}_layers")
    if layout == "nextn_layers" and not spec.stored_mtp and _elsewhere(spec):
        layout = "unknown_layout"
    architecture = spec.architecture or ""
    export = any(word in architecture for word in MTP_ARCHITECTURE_WORDS)
    return (layout, "mtp_export") if export else (layout,)


PROFILE = Profile(name="mtp", detect=detect, review=review, variants=variants)
