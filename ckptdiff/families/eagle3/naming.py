"""The EAGLE-3 drafter's naming conventions: which tool wrote a checkpoint's names, and SpecForge's canonical name
for any of them (vLLM renames ``midlayer.`` to ``layers.0.`` and prefixes ``model.``; TensorRT-LLM keeps
``midlayer.`` and prefixes ``model.``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..model import Convention

SPECFORGE = Convention("specforge", "SpecForge/EAGLE (midlayer.*, no prefix)")
SPECULATORS = Convention("speculators", "speculators (layers.0.*, no prefix)")
VLLM = Convention("vllm", "vLLM (model.layers.0.*, model. prefix)")
TENSORRT_LLM = Convention("tensorrt_llm", "TensorRT-LLM (model.midlayer.*, model. prefix)")
#: (prefix, decoder-layer prefix) → convention.
CONVENTIONS: dict[tuple[str, str], Convention] = {
    ("", "midlayer."): SPECFORGE,
    ("", "layers.0."): SPECULATORS,
    ("model.", "layers.0."): VLLM,
    ("model.", "midlayer."): TENSORRT_LLM,
}
#: Names engines give a tensor in memory → the name checkpoints store it under.
ALIASES = {"draft_id_to_target_id": "d2t"}


def canonical_name(name: str) -> str:
    """Any convention's name → SpecForge's: drop ``model.``, ``layers.0.`` → ``midlayer.``."""
    if name.startswith("model."):
        name = name[len("model.") :]
    if name.startswith("layers.0."):
        name = "midlayer." + name[len("layers.0.") :]
    return ALIASES.get(name, name)


def naming_convention(names: Iterable[str]) -> Convention | None:
    """The convention of a drafter's decoder-layer names, or None (no layer tensors, a mix, or many layers)."""
    found: set[tuple[str, str]] = set()
    for name in names:
        prefix = "model." if name.startswith("model.") else ""
        rest = name[len(prefix) :]
        if rest.startswith("layers.") and not rest.startswith("layers.0."):
            return None  # a model with several decoder layers, e.g. a base model
        for layer in ("midlayer.", "layers.0."):
            if rest.startswith(layer):
                found.add((prefix, layer))
    return CONVENTIONS[found.pop()] if len(found) == 1 else None
