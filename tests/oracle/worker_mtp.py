"""What both MTP drivers (worker_mtp_vllm.py, worker_mtp_sglang.py) share, inside an engine's environment.

Only the standard library, torch and worker.py's helpers; never ckptdiff.
"""

from __future__ import annotations

import json
import os
import sys
import types
from typing import Any

import worker


def widen_markers() -> None:
    """More distinct markers than worker.py's 72: an MTP target with three MoE MTP layers holds ~90 tensors. Each
    is +-(1 + m/4) * 2**e for e in -6..8, still exact in every float type down to FP8 (e4m3's normal range starts
    at 2**-6); worker.py's own list is unchanged (the EAGLE-3 drivers' results stay as cached)."""
    values = {sign * (1 + m / 4) * 2**e for e in range(-6, 9) for m in range(4) for sign in (1, -1)}
    worker.FLOAT_MARKERS = sorted(values, key=lambda v: (v != int(v), abs(v), v < 0))


def stand_ins(target_dir: str) -> tuple[Any, Any]:
    """Stand-ins of the target's embedding and head (``vocab_size`` x ``hidden_size`` of its config)."""
    import torch

    with open(os.path.join(target_dir, "config.json")) as handle:
        config = json.load(handle)
    text = config.get("text_config") or config
    shape = (text["vocab_size"], text["hidden_size"])
    return torch.nn.Embedding(*shape), torch.nn.Embedding(*shape)


def parameter_names(model: Any) -> list[str]:
    return [name for name, _ in model.named_parameters(remove_duplicate=False)]


def taken(model: Any, before: list[str], target_ids: set[int]) -> list[str]:
    """The drafter's parameters (as named before the share) that are now the target's own tensors."""
    now = dict(model.named_parameters(remove_duplicate=False))
    return sorted(name for name in before if name in now and id(now[name]) in target_ids)


def rotary_stand_in() -> None:
    """SGLang's rotary embedding imports this forward-time kernel at construction; the PyPI wheel's kernels need
    CUDA and no forward pass runs here, so a module that refuses to be called stands in for it (as worker_sglang.py
    does for EAGLE-3)."""
    if "vllm" in sys.modules:
        return
    package = types.ModuleType("vllm")
    package.__path__ = []  # type: ignore[attr-defined]
    ops = types.ModuleType("vllm._custom_ops")

    def rotary_embedding(*_: Any, **__: Any) -> None:
        raise RuntimeError("oracle: the rotary kernel is a stand-in; no forward pass runs here")

    ops.rotary_embedding = rotary_embedding  # type: ignore[attr-defined]
    sys.modules["vllm"], sys.modules["vllm._custom_ops"] = package, ops


def track(model: Any, result: dict[str, Any], markers: dict[float, list[str]], default_loader: Any) -> None:
    """Record in ``result["loading"]`` the checkpoint tensor a raise during the load is about: the one being
    handed over (the engine may gather them all first: then none once the iteration is over) and the one a
    parameter's weight loader is writing (cleared when it returns). A raise after the last tensor (a completeness
    check) is then about no tensor."""
    marked = worker._marked_name

    def wrap(loader: Any) -> Any:
        def load(param: Any, loaded_weight: Any, *args: Any, **kwargs: Any) -> Any:
            result["loading"] = marked(loaded_weight, markers)
            out = loader(param, loaded_weight, *args, **kwargs)
            result["loading"] = None
            return out

        return load

    for _, param in model.named_parameters():
        try:
            param.weight_loader = wrap(getattr(param, "weight_loader", default_loader))
        except AttributeError:  # a read-only property over the loader it was built with
            param._weight_loader = wrap(param._weight_loader)
    load_weights = model.load_weights

    def handed(weights: Any) -> Any:
        for name, tensor in weights:
            result["loading"] = marked(tensor, markers) or name
            yield name, tensor
        result["loading"] = None

    def load(weights: Any, *args: Any, **kwargs: Any) -> Any:
        return load_weights(handed(weights), *args, **kwargs)

    model.load_weights = load
