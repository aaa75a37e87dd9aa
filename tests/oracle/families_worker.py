"""Runs inside one engine's environment: a target checkpoint's MTP layers through the engine's own MTP loader.

    <engine-venv>/bin/python families_worker.py vllm|sglang CASE_DIR OUT_JSON

vLLM: ``speculative_config={"method": "mtp"}`` on the case as the target (DeepSeekMTP); SGLang: the NEXTN
algorithm with the case as target and draft (DeepseekV3ForCausalLMNextN). Every parameter is filled with NaN
before loading; the result names the class built, the error raised (if any) and the parameters left unwritten.
This file never imports ckptdiff.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import types
from typing import Any


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unwritten(model: Any) -> list[str]:
    import torch

    return sorted(
        n for n, p in model.named_parameters() if p.dtype.is_floating_point and bool(torch.isnan(p.data).all())
    )


def _poison(model: Any) -> None:
    for _, p in model.named_parameters():
        if p.dtype.is_floating_point:
            p.data.fill_(float("nan"))


def vllm_case(case_dir: str, out: dict[str, Any]) -> None:
    os.environ.update(VLLM_TARGET_DEVICE="cpu", VLLM_LOGGING_LEVEL="ERROR", HUMMING_DISABLE_PARALLEL_BUILD="1")
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import get_draft_load_config
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    args = EngineArgs(
        model=case_dir,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        enforce_eager=True,
        max_model_len=256,
        speculative_config={"method": "mtp", "num_speculative_tokens": 1},
    )
    config = args.create_engine_config()
    spec = config.speculative_config
    proposer = object.__new__(SpecDecodeBaseProposer)
    proposer.vllm_config, proposer.speculative_config = config, spec
    draft = SpecDecodeBaseProposer._create_draft_vllm_config(proposer)
    out["stage"] = "construct"
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{_port()}", backend="gloo"
        )
        initialize_model_parallel(1, 1)
    with set_current_vllm_config(draft):
        loader = get_model_loader(get_draft_load_config(draft))
        with set_default_torch_dtype(spec.draft_model_config.dtype), torch.device("cpu"):
            model = loader.create_model(vllm_config=draft, model_config=spec.draft_model_config)
        out["class"] = type(model).__name__
        _poison(model)
        out["stage"] = "load"
        loader.load_weights(model, spec.draft_model_config)
        out["unwritten"] = _unwritten(model)


def sglang_case(case_dir: str, out: dict[str, Any]) -> None:
    package = types.ModuleType("vllm")
    package.__path__ = []  # type: ignore[attr-defined]
    ops = types.ModuleType("vllm._custom_ops")
    ops.rotary_embedding = lambda *a, **k: None  # type: ignore[attr-defined]
    sys.modules.setdefault("vllm", package)
    sys.modules.setdefault("vllm._custom_ops", ops)
    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.distributed import bootstrap
    from sglang.srt.model_loader.loader import DefaultModelLoader, _initialize_model
    from sglang.srt.model_loader.utils import set_default_torch_dtype
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(
        model_path=case_dir,
        speculative_algorithm="NEXTN",
        speculative_draft_model_path=case_dir,
        device="cpu",
        skip_tokenizer_init=True,
        dtype="bfloat16",
    )
    ranks = SpawnRanks(world_rank=spawn_world_rank(args, tp_rank=0, pp_rank=0), dp_rank=None, gpu_id=0)
    publish(args, role="scheduler", ranks=ranks)
    config = ModelConfig.from_server_args(args, model_path=case_dir, is_draft_model=True)
    bootstrap.init_parallel_runtime(server_args=args, device="cpu", dist_port=_port())
    out["stage"] = "construct"
    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    with set_default_torch_dtype(config.dtype), torch.device("cpu"):
        model = _initialize_model(config, loader.load_config)
    out["class"] = type(model).__name__
    _poison(model)
    out["stage"] = "load"
    DefaultModelLoader.load_weights_and_postprocess(model, loader._get_all_weights(config, model), torch.device("cpu"))
    out["unwritten"] = _unwritten(model)


def main() -> None:
    engine, case_dir, dest = sys.argv[1:4]
    pid = os.fork()
    if pid == 0:  # one child per case: no state leaks into the next
        out: dict[str, Any] = {"stage": "config"}
        try:
            (vllm_case if engine == "vllm" else sglang_case)(case_dir, out)
        except BaseException as err:  # noqa: BLE001 - the engine's refusal is the answer
            out["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        with open(dest, "w") as handle:
            json.dump(out, handle)
        os._exit(0)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
