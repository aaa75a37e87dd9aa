"""How the oracle drives SGLang (imported by worker.py inside SGLang's environment)."""

from __future__ import annotations

import sys
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
    # SGLang's rotary embedding imports this forward-time kernel at construction; the PyPI wheel's kernels
    # need CUDA, and no forward pass runs here, so a module that refuses to be called stands in for it.
    if "vllm" not in sys.modules:
        package = types.ModuleType("vllm")
        package.__path__ = []  # type: ignore[attr-defined]
        ops = types.ModuleType("vllm._custom_ops")

        def rotary_embedding(*_: Any, **__: Any) -> None:
            raise RuntimeError("oracle: the rotary kernel is a stand-in; no forward pass runs here")

        ops.rotary_embedding = rotary_embedding  # type: ignore[attr-defined]
        sys.modules["vllm"], sys.modules["vllm._custom_ops"] = package, ops
    import sglang.srt.configs.model_config  # noqa: F401
    import sglang.srt.distributed.bootstrap  # noqa: F401
    import sglang.srt.model_loader.loader  # noqa: F401
    import sglang.srt.models.llama_eagle3  # noqa: F401
    import sglang.srt.models.registry  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    import torch  # noqa: F401


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.distributed import bootstrap
    from sglang.srt.model_loader.loader import DefaultModelLoader, _initialize_model
    from sglang.srt.model_loader.utils import set_default_torch_dtype
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank
    from sglang.srt.server_args import ServerArgs

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    args = ServerArgs(
        model_path=target_dir,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path=marked,
        device="cpu",
        skip_tokenizer_init=True,
        dtype="bfloat16",
    )
    # The scheduler's start-up (managers/scheduler.py run_scheduler_process, tp_rank 0, pp_rank 0).
    publish(
        args,
        role="scheduler",
        ranks=SpawnRanks(world_rank=spawn_world_rank(args, tp_rank=0, pp_rank=0), dp_rank=None, gpu_id=0),
    )
    model_config = ModelConfig.from_server_args(args, model_path=marked, is_draft_model=True)
    hf_config = model_config.hf_config
    result["architecture"] = list(getattr(hf_config, "architectures", None) or [])
    result["stage"] = "distributed"
    bootstrap.init_parallel_runtime(server_args=args, device="cpu", dist_port=free_port())
    result["stage"] = "construct"
    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    with set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
        model = _initialize_model(model_config, loader.load_config)
    result["model_class"] = type(model).__name__
    built = poison(model)
    result["stage"] = "load"
    # Observed right after the drafter's load_weights, before the quantization post-processing (which
    # requantizes and merges scales, so markers no longer show); the load path itself is unchanged.
    snapshot: dict[str, Any] = {}
    load_weights = model.load_weights

    def load_then_observe(weights: Any) -> Any:
        try:
            return load_weights(weights)
        finally:
            snapshot.update(observe(model, markers, built))

    model.load_weights = load_then_observe
    try:
        DefaultModelLoader.load_weights_and_postprocess(
            model, loader._get_all_weights(model_config, model), torch.device("cpu")
        )
    finally:
        observed = snapshot or observe(model, markers, built)
        hot = getattr(model, "hot_token_id", None)
        rows = head_rows(model)
        vocab = getattr(hf_config, "vocab_size", None)
        if hot is not None or (rows is not None and rows != vocab):
            # d2t is consumed into this attribute (hot_token_id = d2t + arange), not a parameter.
            observed["params"]["hot_token_id"] = "loaded" if hot is not None else "unwritten"
        if hot is not None:
            observed["consumed"] = sorted({n for names in markers.values() for n in names if "d2t" in n})
            observed["hot_token_id"] = {"length": int(hot.shape[0]), "dtype": str(hot.dtype), "rows": rows}
            if hot.dtype.is_floating_point:
                observed["float_into_int"] = sorted({*observed["float_into_int"], "hot_token_id"})
        result.update(observed)
        # The width the drafter built its embedding with, before the target's may replace it.
        result["embed_width"] = embed_width(getattr(model, "model", None))
        result["from_target"] = sglang_share_from_target(model, target_dir)
        inner = getattr(model, "model", None)
        # spec_aux_hidden_state.py: aux ids only from eagle_config.
        eagle_config = getattr(hf_config, "eagle_config", None)
        ids = eagle_config.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle_config, dict) else None
        layers = target_layers(target_dir)
        # models/llama.py: the capture happens at loop index id + 1 < n and holds the output of layer id; the
        # default loop indices are [2, n//2, n-3].
        indices = [i + 1 for i in ids] if ids else [2, layers // 2, layers - 3]
        result["aux"] = {
            "ids": list(ids) if ids else None,
            "outputs": sorted({i - 1 for i in indices if 0 <= i < layers}),
            "fc_in": fc_in_width(inner),
            "uses_aux": True,
        }
        result["head_rows"] = rows
    result["stage"] = "done"


def sglang_share_from_target(model: Any, target_dir: str) -> list[str]:
    """What the drafter takes from the target after loading: the EAGLE-3 branch of speculative/
    eagle_worker_v2.py, calling the drafter's own set_embed / set_embed_and_head with stand-ins of the target's."""
    embed, head = (module.weight for module in target_embed_and_head(target_dir))
    try:
        if getattr(model, "load_lm_head_from_target", False):
            model.set_embed_and_head(embed, head)
        else:
            model.set_embed(embed)
    except RuntimeError:
        pass  # the cache flush after the swap needs a device; the swap itself has happened
    taken = []
    if getattr(getattr(model.model, "embed_tokens", None), "weight", None) is embed:
        taken.append("model.embed_tokens.weight")
    if getattr(getattr(model, "lm_head", None), "weight", None) is head:
        taken.append("lm_head.weight")
    return taken
