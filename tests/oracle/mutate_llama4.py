"""The mutations of the Llama-4 capture rules (mutate.py runs them with the others): one plausible mistake each in
the ``Llama-4`` class of ckptdiff/families/eagle3/engines/vllm.py and sglang.py ``CAPTURES``, judged on the
oracle's eagle3_llama4 cases (llama4_cases.py) against the engines' cached results."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

FAMILY = "eagle3_llama4"
LABEL = "Llama-4"


def _change(engine: str, **fields: Any) -> Callable[[], None]:
    def change() -> None:
        module = importlib.import_module(f"ckptdiff.families.eagle3.engines.{engine}")
        aux = module.ENGINE.aux_ids
        classes = tuple(dataclasses.replace(c, **fields) if c.label == LABEL else c for c in aux.classes)
        module.ENGINE = dataclasses.replace(module.ENGINE, aux_ids=dataclasses.replace(aux, classes=classes))

    return change


def _forgotten(engine: str) -> Callable[[], None]:
    """The engine's Llama-4 class is not in its capture table (the wrapper's capture left unknown, as before)."""

    def change() -> None:
        module = importlib.import_module(f"ckptdiff.families.eagle3.engines.{engine}")
        aux = module.ENGINE.aux_ids
        classes = tuple(c for c in aux.classes if c.label != LABEL)
        module.ENGINE = dataclasses.replace(module.ENGINE, aux_ids=dataclasses.replace(aux, classes=classes))

    return change


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "sglang.llama4.capture_as_given": (
        "SGLang's Llama-4 class takes the ids as the indices (no + 1), as its DeepSeek-V2 class does",
        _change("sglang", indices=lambda ids, n: tuple(ids)),
    ),
    "sglang.llama4.reaches_last": (
        "SGLang's Llama-4 forward also captures after the last layer (index n), as its GPT-OSS class does",
        _change("sglang", reached=lambda n: range(0, n + 1)),
    ),
    "vllm.llama4.default_shifted": (
        "vLLM's Llama-4 default is (1, n//2-1, n-4), the layers' outputs, not their inputs' indices",
        _change("vllm", default=lambda n: (1, n // 2 - 1, n - 4)),
    ),
    "vllm.llama4.forgotten": ("vLLM's Llama-4 class is left out of its capture table", _forgotten("vllm")),
    "sglang.llama4.forgotten": ("SGLang's Llama-4 class is left out of its capture table", _forgotten("sglang")),
}
