"""How the oracle drives vLLM (imported by worker.py inside vLLM's environment)."""

from __future__ import annotations

import os
import types
from typing import Any

from worker import (
    embed_width,
    fc_in_width,
    free_port,
    head_rows,
    observe,
    poison,
    target_embed_and_head,
    target_layers,
    write_markers,
)


def setup() -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # Otherwise vLLM's kernel registry starts background kernel builds at import that outlive each case.
    os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    import torch  # noqa: F401
    import vllm.distributed.parallel_state  # noqa: F401
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.model_executor.model_loader  # noqa: F401
    import vllm.model_executor.models.llama_eagle3  # noqa: F401
    import vllm.v1.spec_decode.llm_base_proposer  # noqa: F401
    from vllm.model_executor.models.registry import ModelRegistry

    ModelRegistry.get_supported_archs()  # the registry's lazy imports, before the fork


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import get_draft_load_config
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    args = EngineArgs(
        model=target_dir,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        enforce_eager=True,
        max_model_len=256,
        speculative_config={"method": "eagle3", "model": marked, "num_speculative_tokens": 2},
    )
    config = args.create_engine_config()
    spec = config.speculative_config
    result["architecture"] = list(spec.draft_model_config.hf_config.architectures or [])
    # The draft's own config, derived as the proposer does (_create_draft_vllm_config).
    proposer = object.__new__(SpecDecodeBaseProposer)
    proposer.vllm_config, proposer.speculative_config = config, spec
    draft_config = SpecDecodeBaseProposer._create_draft_vllm_config(proposer)
    result["stage"] = "distributed"
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{free_port()}",
            backend="gloo",
        )
        initialize_model_parallel(1, 1)
    with set_current_vllm_config(draft_config):
        result["stage"] = "construct"
        loader = get_model_loader(get_draft_load_config(draft_config))
        model_config = spec.draft_model_config
        with set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
            model = loader.create_model(vllm_config=draft_config, model_config=model_config)
        result["model_class"] = type(model).__name__
        built = poison(model)
        result["stage"] = "load"
        try:
            loader.load_weights(model, model_config)
        finally:
            result.update(observe(model, markers, built))
            # The width the drafter built its embedding with, before the target's may replace it.
            result["embed_width"] = embed_width(getattr(model, "model", None))
            result["from_target"] = vllm_share_from_target(model, target_dir)
            # Two model runners read aux ids differently; config/vllm.py picks V2 for EAGLE-3 on a GPU unless a
            # feature it lacks is asked for (V1: top level, then eagle_config; V2: top level only).
            runner = "v1" if _v2_unsupported(config) else "v2"
            ids = get_eagle3_aux_layers_from_config(spec) if runner == "v2" else _v1_aux_ids(spec)
            inner = getattr(model, "model", None)
            layers = target_layers(target_dir)
            # models/llama.py + interfaces.py: id j is captured after target layer j-1 (0: the embeddings, shown
            # as -1), for 0 <= j <= n, once each; without ids the default (2, n//2, n-3).
            chosen = ids if ids else (2, layers // 2, layers - 3)
            result["aux"] = {
                "runner": runner,
                "ids": list(ids) if ids else None,
                "outputs": sorted({j - 1 for j in chosen if 0 <= j <= layers}),
                "fc_in": fc_in_width(inner),
                "uses_aux": bool(getattr(inner, "use_aux_hidden_state", True)),
            }
            result["head_rows"] = head_rows(model)
        result["stage"] = "done"


def vllm_share_from_target(model: Any, target_dir: str) -> list[str]:
    """What the drafter takes from the target after loading: vLLM's own decision (v1/worker/gpu/spec_decode/
    eagle/utils.py, load_eagle_model), run against stand-ins of the target's embedding and head."""
    from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle_utils

    embed, head = target_embed_and_head(target_dir)
    eagle_utils.maybe_share_target_embed(model, model.model, types.SimpleNamespace(embed_tokens=embed))
    taken = ["model.embed_tokens.weight"] if getattr(model.model, "embed_tokens", None) is embed else []
    if eagle_utils._should_share(model, "has_own_lm_head", getattr(model, "lm_head", None), head):
        taken.append("lm_head.weight")
    return taken


def _v2_unsupported(config: Any) -> list[str]:
    """What the V2 model runner lacks for this configuration (config/vllm.py), device checks aside."""
    return list(config._get_v2_model_runner_unsupported_features())


def _v1_aux_ids(spec: Any) -> Any:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    runner = object.__new__(GPUModelRunner)
    runner.speculative_config = spec
    return GPUModelRunner._get_eagle3_aux_layers_from_config(runner)
