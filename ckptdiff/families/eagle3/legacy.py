"""EAGLE-1/2 drafters recognised by their names and shapes where no family claims their config (a plain Llama
config, as the EAGLE authors publish them): the EAGLE-3 replay says what the checkpoint is and where the engines
serve it, which ckptdiff has no rules for."""

from __future__ import annotations

from ...checkpoint import Checkpoint
from ...report import EngineEvent
from .detect import is_eagle3

#: The names an EAGLE-1/2 drafter's fc has (EAGLE's own checkpoints; vLLM-converted ones under ``model.``).
FC_NAMES = ("fc.weight", "model.fc.weight")
#: Names only an EAGLE-3 drafter holds: its vocabulary maps and SpecForge/speculators' ``midlayer.``.
EAGLE3_MARKS = ("d2t", "t2d")
EAGLE3_PREFIXES = ("midlayer.",)
#: engine → (how it is asked for EAGLE-1/2, the class it builds, where that was read).
SERVED: dict[str, tuple[str, str, str]] = {
    "vllm": (
        'speculative_config method "eagle"',
        "EagleLlamaForCausalLM",
        "vllm-project/vllm@v0.33.0 vllm/transformers_utils/configs/eagle.py (EAGLEConfig), "
        "vllm/model_executor/models/llama_eagle.py",
    ),
    "sglang": (
        "--speculative-algorithm EAGLE",
        "LlamaForCausalLMEagle",
        "sgl-project/sglang@v0.5.23 python/sglang/srt/models/llama_eagle.py",
    ),
}


def eagle1_fc(checkpoint: Checkpoint) -> tuple[str, list[int]] | None:
    """The fc name and shape when ``checkpoint`` is laid out as an EAGLE-1/2 drafter: its config claimed by no
    EAGLE-3 sign, an fc of [hidden_size, 2 x hidden_size] (over [embedding; hidden state]), no d2t, t2d or
    midlayer; else None."""
    config = checkpoint.config
    if config is None or is_eagle3(config):
        return None
    hidden = config.get("hidden_size")
    if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden <= 0:
        return None
    names = checkpoint.tensors
    if any(name in EAGLE3_MARKS or name.startswith(EAGLE3_PREFIXES) for name in names):
        return None
    for name in FC_NAMES:
        info = names.get(name)
        if info is not None and list(info.shape) == [hidden, 2 * hidden]:
            return name, list(info.shape)
    return None


def eagle1_event(checkpoint: Checkpoint, engine: str) -> EngineEvent | None:
    """A warning naming an EAGLE-1/2 drafter (:func:`eagle1_fc`) and where ``engine`` serves those; else None."""
    served = SERVED.get(engine)
    found = eagle1_fc(checkpoint) if served is not None else None
    if served is None or found is None:
        return None
    (name, shape), (how, cls, source) = found, served
    params = {"name": name, "shape": shape, "engine": engine, "how": how, "cls": cls}
    return EngineEvent("warning", "eagle1_drafter", name, "eagle3.eagle1_drafter", params, source)
