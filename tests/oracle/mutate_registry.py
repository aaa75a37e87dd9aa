"""The registry rules' mutations (mutate.py runs them with the others): one plausible mistake each in which class
ckptdiff says an engine builds, or whether a pinned engine has a loader for a family at all. Judged by
registry_check.py on the engines' cached registry answers (``REGISTRY``), not on the drafter cases."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any


def _vllm_mtp(change: Callable[[Any], Any]) -> Callable[[], None]:
    def apply() -> None:
        module = importlib.import_module("ckptdiff.families.mtp.engines.vllm")
        module.ENGINE = change(module.ENGINE)

    return apply


def _classes(engine: Any, change: Callable[[Any], Any | None]) -> Any:
    """``change(class)`` → the changed class, or None to drop it."""
    classes = tuple(c for c in (change(each) for each in engine.classes) if c is not None)
    return dataclasses.replace(engine, classes=classes)


def _v32_as_deepseek_mtp(engine: Any) -> Any:
    def change(cls: Any) -> Any | None:
        if cls.name == "DeepseekV32MTPModel":
            return None
        if cls.name == "DeepSeekMTPModel":
            return dataclasses.replace(cls, model_types=(*cls.model_types, "deepseek_v32", "glm_moe_dsa"))
        return cls

    return _classes(engine, change)


def _unconditional(name: str) -> Callable[[Any], Any]:
    return lambda engine: _classes(engine, lambda c: dataclasses.replace(c, when=None) if c.name == name else c)


def _transformers_moe_without(architecture: str) -> Callable[[Any], Any]:
    def change(cls: Any) -> Any:
        if cls.name != "TransformersMoEForMTP":
            return cls
        return dataclasses.replace(cls, architectures=tuple(a for a in cls.architectures if a != architecture))

    return lambda engine: _classes(engine, change)


def _medusa_loader(engine: str) -> None:
    families = importlib.import_module("ckptdiff.families")
    families.FAMILIES = tuple(
        dataclasses.replace(f, no_loader=tuple(e for e in f.no_loader if e != engine)) if f.name == "medusa" else f
        for f in families.FAMILIES
    )


def _sglang_mtp_without(name: str) -> None:
    module = importlib.import_module("ckptdiff.families.mtp.engines.sglang")
    module.ENGINE = _classes(module.ENGINE, lambda c: None if c.name == name else c)


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "mtp.sglang.nemotron_h": (
        "SGLang builds no MTP drafter for a Nemotron-H target (NemotronHForCausalLMMTP unknown)",
        lambda: _sglang_mtp_without("NemotronHForCausalLMMTP"),
    ),
    "mtp.vllm.deepseek_v32_class": (
        "vLLM serves DeepSeek-V3.2 and GLM-5 (DSA) targets with DeepSeekMTPModel, not DeepseekV32MTPModel",
        _vllm_mtp(_v32_as_deepseek_mtp),
    ),
    "mtp.vllm.by_own_name": (
        "a standalone export naming its vLLM MTP class (Glm4MoeMTPModel) is no class when no model-type rule serves it",
        _vllm_mtp(lambda engine: dataclasses.replace(engine, by_own_name=False)),
    ),
    "mtp.vllm.parse_aux.when": (
        "vLLM builds ParseAuxMTPModel for any RadioMBartPrefixForCausalLM, its causal vision prefix or not",
        _vllm_mtp(_unconditional("ParseAuxMTPModel")),
    ),
    "mtp.vllm.transformers.when": (
        "vLLM builds TransformersForMTP for a Transformers-backend target without num_mtp_layers",
        _vllm_mtp(_unconditional("TransformersForMTP")),
    ),
    "mtp.vllm.transformers.moe_targets": (
        "HunYuanMoEV1ForCausalLM left out of the Transformers backend's MoE targets",
        _vllm_mtp(_transformers_moe_without("HunYuanMoEV1ForCausalLM")),
    ),
    "families.medusa.no_loader.vllm": (
        "vLLM 0.33.0 said to be unmodelled for Medusa rather than to have no loader for it",
        lambda: _medusa_loader("vllm"),
    ),
    "families.medusa.no_loader.sglang": (
        "SGLang 0.5.23 said to be unmodelled for Medusa rather than to have no loader for it",
        lambda: _medusa_loader("sglang"),
    ),
}
