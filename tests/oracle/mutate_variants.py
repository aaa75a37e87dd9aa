"""mutate.py's mutations of the eagle3 family's variants (issue #27): multi-layer norms, EAGLE 3.1 keys, the MLA
loaders; each one plausible mistake, named by the rule it changes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mutate_rules import change_loader, change_params, engine_module, place


def _swap_unread(engine: str, architecture: str) -> None:
    """In the layers after the first, hidden_norm and input_layernorm trade rules: the norm said to be read is
    taken as unread, and the other way round."""
    import re as _re

    later = _re.compile(r"^model\.layers\.[1-9]\d*\.(hidden_norm|input_layernorm)\.weight$")
    module = engine_module(engine)
    loader = next(lo for lo in module.ENGINE.loaders if architecture in lo.architectures)
    by_name = {p.name: p for p in loader.params}
    swapped = {}
    for name, param in by_name.items():
        if later.match(name):
            other = "input_layernorm" if "hidden_norm" in name else "hidden_norm"
            twin = by_name[_re.sub(r"(hidden_norm|input_layernorm)", other, name)]
            swapped[name] = dataclasses.replace(param, absent=twin.absent, loaded=twin.loaded)
    change_params(engine, architecture, lambda p: swapped.get(p.name, p))


def _vllm_later_layers_read_hidden_norm() -> None:
    _swap_unread("vllm", "LlamaForCausalLMEagle3")


def _sglang_later_layers_read_input_layernorm() -> None:
    _swap_unread("sglang", "LlamaForCausalLMEagle3")


def _vllm_mla_later_layers_read_hidden_norm() -> None:
    _swap_unread("vllm", "Eagle3DeepseekV2ForCausalLM")


def _fc_norm_read_from_eagle_config() -> None:
    drafter = place("spec")
    original = drafter.DrafterSpec.of

    def of(config: Any) -> Any:
        spec = original(config)
        eagle = config.get("eagle_config") if isinstance(config, dict) else None
        nested = isinstance(eagle, dict) and bool(eagle.get("fc_norm"))
        if nested:
            spec = dataclasses.replace(spec, fc_norm=True, fc_norm_key=True)
        return spec

    drafter.DrafterSpec.of = classmethod(lambda cls, config: of(config))


def _vllm_reads_use_aux_norm() -> None:
    drafter = place("spec")
    original = drafter.DrafterSpec.of
    drafter.DrafterSpec.of = classmethod(
        lambda cls, config: (lambda spec: dataclasses.replace(spec, fc_norm_key=spec.fc_norm))(original(config))
    )


def _norm_before_fc_top_level_first() -> None:
    drafter = place("spec")

    def top_level_first(config: Any) -> bool:
        eagle = config.get("eagle_config")
        if "norm_before_fc" in config:
            return bool(config["norm_before_fc"])
        return bool(isinstance(eagle, dict) and eagle.get("norm_before_fc"))

    drafter._norm_before_fc = top_level_first


def _vllm_mla_fc_needs_aux() -> None:
    def change(param: Any) -> Any:
        if param.name not in ("model.fc.weight", "model.fc.bias"):
            return param
        built = param.exists
        return dataclasses.replace(param, exists=lambda d: d.use_aux and built(d))

    change_params("vllm", "Eagle3DeepseekV2ForCausalLM", change)


def _sglang_legacy_aux_norm_not_renamed() -> None:
    change_loader(
        "sglang",
        "LlamaForCausalLMEagle3",
        lambda lo: dataclasses.replace(lo, renames=tuple(r for r in lo.renames if "aux_norm" not in r.pattern)),
    )


VARIANT_MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "vllm.llama.later_layers.hidden_norm_unread": (
        "vLLM's Llama layers after the first read hidden_norm and leave input_layernorm unread",
        _vllm_later_layers_read_hidden_norm,
    ),
    "sglang.llama.later_layers.input_layernorm_unread": (
        "SGLang's layers after the first read input_layernorm and leave hidden_norm unread",
        _sglang_later_layers_read_input_layernorm,
    ),
    "vllm.mla.later_layers.hidden_norm_unread": (
        "vLLM's MLA layers after the first read hidden_norm and leave input_layernorm unread",
        _vllm_mla_later_layers_read_hidden_norm,
    ),
    "spec.fc_norm.top_level_only": ("fc_norm is also read inside eagle_config", _fc_norm_read_from_eagle_config),
    "vllm.fc_norm.no_use_aux_norm": ("vLLM builds fc_norm for the legacy use_aux_norm too", _vllm_reads_use_aux_norm),
    "spec.norm_before_fc.eagle_config_first": (
        "the top-level norm_before_fc wins over eagle_config's",
        _norm_before_fc_top_level_first,
    ),
    "vllm.mla.fc_built_without_aux": (
        "vLLM's MLA drafter builds fc only when use_aux_hidden_state is not false",
        _vllm_mla_fc_needs_aux,
    ),
    "sglang.llama.legacy_aux_norm_names": (
        "SGLang's Llama drafter does not rename aux_norm_low/mid/high to fc_norm.{0,1,2}",
        _sglang_legacy_aux_norm_not_renamed,
    ),
}
