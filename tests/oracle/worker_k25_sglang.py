"""How the oracle drives SGLang against a Kimi-K2.5 target (KimiK25ForConditionalGeneration): worker_sglang.py's
run, reading the target's sizes from its text_config, and observing the capture on the wrapper itself, whose
set_eagle3_layers_to_capture hands the ids to its language_model (the DeepSeek-V3 text model)."""

from __future__ import annotations

import types
from typing import Any

import worker_sglang as base
from k25_target import text_config_of, text_embed_and_head, text_layers

setup = base.setup
case = base.case
base.target_layers = text_layers
base.target_embed_and_head = text_embed_and_head


def observe_capture(args: Any, draft_hf_config: Any, target_dir: str) -> dict[str, Any]:
    """worker_sglang.observe_capture with the wrapper built as SGLang builds it around its text model: the outer
    class (KimiK25ForConditionalGeneration, from the registry) holds a ``language_model`` of the text config's
    class (DeepseekV3ForCausalLM), whose decoder's layers are stand-ins; SGLang's own set-up is then run on the
    outer class, as the EAGLE-3 worker runs it on the target."""
    import importlib
    import inspect
    import sys

    import torch
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_executor.model_runner_components.attention_backend_setup import (
        configure_aux_hidden_state_capture,
    )
    from sglang.srt.models.registry import ModelRegistry

    target_config = ModelConfig.from_server_args(args, model_path=target_dir).hf_config
    cls, _ = ModelRegistry.resolve_model_cls(list(target_config.architectures))
    text = text_config_of(target_dir)
    text_cls, _ = ModelRegistry.resolve_model_cls(list(text["architectures"]))
    inner_cls: type = torch.nn.Module
    for klass in text_cls.__mro__:  # the decoder of this class or of the class it extends (DeepseekV2Model)
        module = sys.modules.get(klass.__module__) or importlib.import_module(klass.__module__)
        found = vars(module).get(klass.__name__.replace("ForCausalLM", "Model"))
        if isinstance(found, type) and issubclass(found, torch.nn.Module):
            inner_cls = found
            break
    layers = text_layers(target_dir)
    language_model = object.__new__(text_cls)
    torch.nn.Module.__init__(language_model)
    inner = object.__new__(inner_cls)
    torch.nn.Module.__init__(inner)
    inner.layers = torch.nn.ModuleList([torch.nn.Module() for _ in range(layers)])
    inner.layers_to_capture, inner.start_layer, inner.end_layer = [], 0, layers
    language_model.model, language_model.config = inner, target_config.text_config
    language_model.pp_group = types.SimpleNamespace(is_last_rank=True, is_first_rank=True)
    outer = object.__new__(cls)
    torch.nn.Module.__init__(outer)
    outer.language_model, outer.config = language_model, target_config
    outer.pp_group = language_model.pp_group
    eagle_config = getattr(draft_hf_config, "eagle_config", None)
    try:  # as _resolve_eagle_aux_hidden_state reads them
        use_aux = eagle_config.get("use_aux_hidden_state", True)
        ids = eagle_config["eagle_aux_hidden_state_layer_ids"]
    except Exception:
        use_aux, ids = True, None
    out: dict[str, Any] = {
        "ids": list(ids) if ids else None,
        "model_class": cls.__name__,
        "inner_class": inner_cls.__name__,
        "use_aux": bool(use_aux),
    }
    try:
        configure_aux_hidden_state_capture(
            model=outer,
            eagle_use_aux_hidden_state=use_aux,
            eagle_aux_hidden_state_layer_ids=ids,
            dflash_use_aux_hidden_state=False,
            dflash_target_layer_ids=None,
            is_dspark=False,
        )
    except Exception as error:
        out.update(outputs=[], setup_raised=f"{type(error).__name__}: {error}"[:300], how="set-up raised")
        return out
    indices = [int(i) for i in inner.layers_to_capture]
    last = "self.end_layer in self.layers_to_capture" in inspect.getsource(type(inner).forward)
    out["indices"] = indices
    out["outputs"] = sorted({i - 1 for i in indices if 0 <= i < layers or (last and i == layers)})
    out["how"] = (
        f"indices observed ({cls.__name__}.set_eagle3_layers_to_capture, through its language_model "
        f"{text_cls.__name__}); the layer's input at each index derived from its decoder layer's forward; index n "
        f"{'reached' if last else 'not reached'} per {inner_cls.__name__}.forward"
    )
    return out


base.observe_capture = observe_capture
