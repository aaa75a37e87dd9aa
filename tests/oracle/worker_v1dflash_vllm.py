"""vLLM's V1 model runner on DFlash drafters (worker.py engine ``v1dflash_vllm``): worker_v1_vllm.py's run, which
picks ``method="dflash"`` for a DFlash drafter (the runner then builds ``DFlashProposer``); its own module so that
DFlash's results are cached apart from EAGLE-3's (results/v1dflash_vllm-<version>/), as case names repeat. Then
what the proposer makes of the target states the runner captured (``aux.handover``)."""

from __future__ import annotations

from typing import Any

from worker import target_config_json
from worker_v1_vllm import case as v1_case
from worker_v1_vllm import setup
from worker_vllm import safely

__all__ = ["case", "setup"]


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    from vllm.v1.spec_decode.dflash import DFlashProposer

    made: list[Any] = []
    real = DFlashProposer.load_model

    def watched(proposer: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(proposer)
        return real(proposer, *args, **kwargs)

    DFlashProposer.load_model = watched
    try:
        v1_case(case_dir, target_dir, marked, result)
    finally:
        DFlashProposer.load_model = real
    aux = result.get("aux") or {}
    if made and "capture_error" not in aux and getattr(made[-1], "model", None) is not None:
        aux["handover"] = safely(observe_handover, made[-1], aux.get("outputs"), target_dir)


def observe_handover(proposer: Any, outputs: list[int] | None, target_dir: str) -> dict[str, Any]:
    """The V1 runner hands the proposer the captured states concatenated (gpu_model_runner.py:4891); the proposer
    runs its drafter's own ``combine_hidden_states`` on them (llm_base_proposer.py:549, run here), then asserts the
    result is its ``hidden_size`` wide (:552; compared here, not run: the rest of ``propose`` needs the GPU's
    kernels). ``error``: the combine raised, or the width is not the one asserted."""
    import torch

    if outputs is None:
        return {"unobserved": "no captured outputs were observed"}
    tokens, dtype = 2, torch.bfloat16
    hidden = int(target_config_json(target_dir)["hidden_size"])
    states = torch.cat([torch.zeros((tokens, hidden), dtype=dtype) for _ in outputs], dim=-1)
    out: dict[str, Any] = {"states": len(outputs), "hidden_size": int(proposer.hidden_size)}
    try:
        with torch.no_grad():
            combined = proposer.model.combine_hidden_states(states)
    except Exception as error:  # the drafter's own raise on this pair
        out["error"] = {"type": type(error).__name__, "message": str(error)[:500]}
        return out
    out["width"] = int(combined.shape[-1])
    if out["width"] != out["hidden_size"]:
        out["error"] = {"type": "AssertionError", "message": "llm_base_proposer.py:552 asserts width == hidden_size"}
    return out
