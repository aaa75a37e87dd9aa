"""DFlash in a comparison: each side's fc and layers against its own config, the DFlash settings that make two
drafters different drop-ins (target layers, block size, mask token), and, with ``--base``, the target the
drafter takes its embedding, head and hidden states from."""

from __future__ import annotations

from typing import Any

from ...checkpoint import Checkpoint
from ...report import Finding, TensorRow
from ..model import InjectedWeight, Profile
from .detect import detect
from .spec import DFlashSpec

#: What the engines take from the target when the drafter carries none (both engines: the embedding and head).
EMBED = InjectedWeight(name="embed_tokens.weight", base_name="model.embed_tokens.weight", how="embedding")
LM_HEAD = InjectedWeight(name="lm_head.weight", base_name="lm_head.weight", how="head", role="lm_head")
#: The settings two drafters must share to be drop-ins for each other.
SETTINGS = ("target_layer_ids", "block_size", "mask_token_id")


def _spec(checkpoint: Checkpoint) -> DFlashSpec | None:
    return DFlashSpec.of(checkpoint.config, checkpoint.tensors) if checkpoint.config is not None else None


def side_findings(checkpoint: Checkpoint, side: str) -> list[Finding]:
    """One side against its own config: fc's width, and the drafter layers stored against num_hidden_layers."""
    spec = _spec(checkpoint)
    if spec is None:
        return []
    out: list[Finding] = []
    ids = spec.target_layer_ids
    features = spec.features(ids.value)
    fc = checkpoint.tensors.get("fc.weight") or checkpoint.tensors.get("model.fc.weight")
    if fc is not None and features and spec.hidden:
        want = [spec.hidden, features * spec.hidden]
        if list(fc.shape) != want:
            params: dict[str, Any] = {"side": side, "got": list(fc.shape), "want": want, "features": features}
            params["key"] = ids.key
            out.append(Finding("error", "dflash_fc_width_mismatch", subject=fc.name, params=params))
    if spec.layers is not None:
        announced = list(range(spec.layers))
        stored = list(spec.stored_layers)
        if stored != announced:
            params = {"side": side, "layers": spec.layers, "stored": stored}
            params |= {
                "missing": [i for i in announced if i not in stored],
                "extra": [i for i in stored if i >= spec.layers],
            }
            out.append(Finding("error", "dflash_layers_mismatch", subject="num_hidden_layers", params=params))
    return out


def pair_findings(a: Checkpoint, b: Checkpoint) -> list[Finding]:
    """The DFlash settings that differ between A and B (each read where the engines read it)."""
    spec_a, spec_b = _spec(a), _spec(b)
    if spec_a is None or spec_b is None:
        return []
    out: list[Finding] = []
    for name in SETTINGS:
        got_a, got_b = getattr(spec_a, name), getattr(spec_b, name)
        value_a = list(got_a.value) if isinstance(got_a.value, tuple) else got_a.value
        value_b = list(got_b.value) if isinstance(got_b.value, tuple) else got_b.value
        if value_a != value_b:
            params = {"setting": name, "a": value_a, "b": value_b, "key_a": got_a.key, "key_b": got_b.key}
            out.append(Finding("warning", "dflash_setting_differs", subject=name, params=params))
    return out


def base_findings(checkpoint: Checkpoint, side: str, base: Checkpoint) -> list[Finding]:
    """One side against the target: its target layers within the target's depth, its hidden size the width of
    the target's embedding and head, its mask token inside the target's vocabulary."""
    spec = _spec(checkpoint)
    if spec is None or base.config is None:
        return []
    text = base.config.get("text_config")
    target = text if isinstance(text, dict) else base.config
    layers, hidden, vocab = (target.get(k) for k in ("num_hidden_layers", "hidden_size", "vocab_size"))
    out: list[Finding] = []
    ids = spec.target_layer_ids.value
    if ids and isinstance(layers, int) and any(i < 0 or i >= layers for i in ids):
        params = {"side": side, "ids": list(ids), "layers": layers, "key": spec.target_layer_ids.key}
        out.append(Finding("error", "dflash_target_layer_out_of_range", subject="target_layer_ids", params=params))
    if spec.hidden is not None and isinstance(hidden, int) and spec.hidden != hidden:
        params = {"side": side, "hidden": spec.hidden, "target_hidden": hidden}
        out.append(Finding("error", "dflash_hidden_mismatch", subject="hidden_size", params=params))
    mask = spec.mask_token_id
    if isinstance(mask.value, int) and isinstance(vocab, int) and mask.value >= vocab:
        params = {"side": side, "mask_token_id": mask.value, "vocab": vocab, "key": mask.key}
        out.append(Finding("error", "dflash_mask_token_out_of_vocab", subject="mask_token_id", params=params))
    return out


def review(
    a: Checkpoint, b: Checkpoint, rows: tuple[TensorRow, ...], base: Checkpoint | None = None
) -> tuple[tuple[TensorRow, ...], list[Finding]]:
    findings = [*side_findings(a, "A"), *side_findings(b, "B"), *pair_findings(a, b)]
    if base is not None:
        findings += [*base_findings(a, "A", base), *base_findings(b, "B", base)]
    return rows, findings


PROFILE = Profile(name="dflash", detect=detect, injected=(EMBED, LM_HEAD), review=review)
