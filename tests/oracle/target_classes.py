"""Which target architectures a pinned engine refuses for EAGLE-3, read from its own registry and classes.

    ~/.cache/ckptdiff/oracle/vllm-0.33.0/bin/python tests/oracle/target_classes.py vllm
    ~/.cache/ckptdiff/oracle/sglang-0.5.23/bin/python tests/oracle/target_classes.py sglang

Runs inside the engine's environment (never imports ckptdiff) and prints the Python literal that
``ckptdiff/families/eagle3/engines/target_classes.py`` holds for that engine: every registered architecture whose
class lacks the EAGLE-3 capture the engine's runner requires (vLLM: ``supports_eagle3``, the ``SupportsEagle3``
protocol, checked by ``eagle3_utils.set_eagle3_aux_hidden_state_layers``; SGLang: a
``set_eagle3_layers_to_capture`` method, checked by ``attention_backend_setup.configure_aux_hidden_state_capture``),
and a count of those that support it and of those whose module does not import on this machine (left out).
"""

from __future__ import annotations

import importlib
import os
import sys


def vllm() -> tuple[list[str], list[str], list[str]]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.model_executor.models.registry import _VLLM_MODELS

    supports, refuses, broken = [], [], []
    for architecture, (module, name) in sorted(_VLLM_MODELS.items()):
        try:
            cls = getattr(importlib.import_module(f"vllm.model_executor.models.{module}"), name)
        except Exception:
            broken.append(architecture)
            continue
        (supports if supports_eagle3(cls) else refuses).append(architecture)
    return supports, refuses, broken


def sglang() -> tuple[list[str], list[str], list[str]]:
    from sglang.srt.models.registry import ModelRegistry

    supports, refuses = [], []
    for architecture in sorted(ModelRegistry.get_supported_archs()):
        cls = ModelRegistry.models[architecture]
        (supports if hasattr(cls, "set_eagle3_layers_to_capture") else refuses).append(architecture)
    return supports, refuses, []


if __name__ == "__main__":
    supports, refuses, broken = {"vllm": vllm, "sglang": sglang}[sys.argv[1]]()
    print(f"# {len(supports)} support EAGLE-3, {len(refuses)} refuse it, {len(broken)} do not import here")
    print("frozenset({")
    for architecture in refuses:
        print(f'    "{architecture}",')
    print("})")
