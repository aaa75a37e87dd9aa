"""What a pinned engine's registries say, asked of the engine itself (runs inside its environment, never imports
ckptdiff); test_registry_facts.py holds ckptdiff's rules against it:

    ~/.cache/ckptdiff/oracle/vllm-0.33.0/bin/python tests/oracle/registry_facts.py vllm CONFIGS.json
    ~/.cache/ckptdiff/oracle/sglang-0.5.23/bin/python tests/oracle/registry_facts.py sglang

Prints a JSON object: ``architectures``, every architecture the engine registers; ``methods``, the speculative
methods it accepts (vLLM's ``SpeculativeMethod`` literal, SGLang's ``SpeculativeAlgorithm``). vLLM also:
``chosen``, per config.json document of CONFIGS.json, the ``architectures[0]`` that
``SpeculativeConfig.hf_config_override`` rewrites it to (or ``"raised: ..."``); ``transformers``, the target
architectures the Transformers modeling backend serves, by its class.
"""

from __future__ import annotations

import json
import os
import sys
import typing
from pathlib import Path
from typing import Any


def _as_config(document: dict[str, Any]) -> Any:
    from transformers import PretrainedConfig

    config = PretrainedConfig()
    for key, value in document.items():
        setattr(config, key, _as_config(value) if isinstance(value, dict) else value)
    return config


def _literals(kind: Any) -> list[str]:
    args = typing.get_args(kind)
    return [a for arg in args for a in (_literals(arg) if typing.get_args(arg) else [arg]) if isinstance(a, str)]


def vllm(configs: list[dict[str, Any]]) -> dict[str, Any]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
    from vllm.model_executor.models import registry

    chosen = []
    for document in configs:
        try:
            chosen.append(str(SpeculativeConfig.hf_config_override(_as_config(document)).architectures[0]))
        except Exception as error:  # the engine's own refusal (or a key these configs lack), as it said it
            chosen.append(f"raised: {type(error).__name__}: {error}"[:200])
    tables = [getattr(registry, n) for n in dir(registry) if n.startswith("_") and n.endswith("_MODELS")]
    backend: dict[str, list[str]] = {}
    for architecture, (_, cls) in registry._TRANSFORMERS_SUPPORTED_MODELS.items():
        if cls in ("TransformersForCausalLM", "TransformersMoEForCausalLM"):
            backend.setdefault(cls, []).append(architecture)
    return {
        "architectures": sorted({a for table in tables if isinstance(table, dict) for a in table}),
        "methods": sorted(set(_literals(SpeculativeMethod))),
        "chosen": chosen,
        "transformers": backend,
    }


def sglang() -> dict[str, Any]:
    from sglang.srt.models.registry import ModelRegistry
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    return {
        "architectures": sorted(ModelRegistry.get_supported_archs()),
        "methods": sorted(a.name.lower() for a in SpeculativeAlgorithm),
    }


if __name__ == "__main__":
    if sys.argv[1] == "vllm":
        print(json.dumps(vllm(json.loads(Path(sys.argv[2]).read_text()) if len(sys.argv) > 2 else [])))
    else:
        print(json.dumps(sglang()))
