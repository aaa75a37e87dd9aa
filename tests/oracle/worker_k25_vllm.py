"""How the oracle drives vLLM against a Kimi-K2.5 target (KimiK25ForConditionalGeneration): worker_vllm.py's run,
reading the target's sizes from its text_config, and observing the capture on the wrapper itself, whose
set_aux_hidden_state_layers and get_eagle3_default_aux_hidden_state_layers go to its language_model (the
DeepSeek-V3 text model)."""

from __future__ import annotations

from typing import Any

import worker_vllm as base
from k25_target import text_config_of, text_embed_and_head, text_layers

setup = base.setup
case = base.case
base.target_layers = text_layers
base.target_embed_and_head = text_embed_and_head
base.target_config_json = text_config_of
_text_model_stub = base._target_stub


def _wrapped_stub(config: Any, layers: int, hidden: int) -> tuple[Any, Any]:
    """The wrapper class (vLLM's registry, by the target's architecture) around a stub of its language_model: the
    text config's class built as worker_vllm builds a target (its decoder with stand-in layers)."""
    import torch
    from vllm.model_executor.model_loader import utils as loader_utils
    from vllm.model_executor.models.registry import ModelRegistry

    outer_cls, _ = loader_utils.get_model_architecture(config.model_config)
    text_architectures = list(text_config_of_hf(config)["architectures"])
    text_cls, _ = ModelRegistry.resolve_model_cls(text_architectures, config.model_config)
    resolved = loader_utils.get_model_architecture
    loader_utils.get_model_architecture = lambda model_config: (text_cls, text_architectures[0])
    try:
        language_model, inner = _text_model_stub(config, layers, hidden)
    finally:
        loader_utils.get_model_architecture = resolved
    outer = object.__new__(outer_cls)
    torch.nn.Module.__init__(outer)
    outer.language_model = language_model
    outer.config = config.model_config.hf_config
    return outer, inner


def text_config_of_hf(config: Any) -> dict[str, Any]:
    text = getattr(config.model_config.hf_config, "text_config", None)
    architectures = getattr(text, "architectures", None)
    if not architectures:
        raise ValueError("the target's text_config names no architecture")
    return {"architectures": list(architectures)}


base._target_stub = _wrapped_stub
