"""vLLM's V1 model runner on DFlash drafters (worker.py engine ``v1dflash_vllm``): worker_v1_vllm.py's run, which
picks ``method="dflash"`` for a DFlash drafter (the runner then builds ``DFlashProposer``); its own module so that
DFlash's results are cached apart from EAGLE-3's (results/v1dflash_vllm-<version>/), as case names repeat."""

from __future__ import annotations

from worker_v1_vllm import case, setup

__all__ = ["case", "setup"]
