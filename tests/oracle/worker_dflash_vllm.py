"""How the oracle drives vLLM's DFlash loader (imported by worker.py inside vLLM's environment, as engine
``dflash_vllm``): ``speculative_config={"method": "dflash"}`` with the case as the draft and a tiny target, the
draft built and loaded as DFlashProposer does, then what it takes from the target. Never imports ckptdiff."""

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
    target_config_json,
    target_embed_and_head,
    tracking,
    write_markers,
)
from worker_vllm import _v1_aux_ids, observe_capture, safely


def setup(architectures: list[str]) -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    import torch  # noqa: F401
    import vllm.distributed.parallel_state  # noqa: F401
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.model_executor.model_loader  # noqa: F401
    import vllm.model_executor.models.qwen3_dflash  # noqa: F401
    import vllm.v1.spec_decode.dflash  # noqa: F401
    from vllm.model_executor.models.registry import ModelRegistry

    ModelRegistry.get_supported_archs()
    for architecture in [*architectures, "DFlashDraftModel"]:
        ModelRegistry._try_load_model_cls(architecture)
        ModelRegistry._try_inspect_model_cls(architecture)


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import get_draft_load_config
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.spec_decode.dflash import DFlashProposer
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    args = EngineArgs(
        model=target_dir,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        enforce_eager=True,
        max_model_len=256,
        speculative_config={"method": "dflash", "model": marked, "num_speculative_tokens": 4},
    )
    config = args.create_engine_config()
    spec = config.speculative_config
    # The V2 model runner's DFlash speculator resolves its mask token as it is built, before the drafter is
    # (v1/worker/gpu/spec_decode/dflash/speculator.py:67): its own lookup, run on the draft's config.
    from vllm.v1.worker.gpu.spec_decode.utils import get_parallel_drafting_token_id

    result["mask_token_id"] = get_parallel_drafting_token_id(spec.draft_model_config.hf_config)
    result["architecture"] = list(spec.draft_model_config.hf_config.architectures or [])
    # The draft's own config as DFlashProposer derives it (_create_draft_vllm_config: its causality too).
    proposer = object.__new__(DFlashProposer)
    proposer.vllm_config, proposer.speculative_config = config, spec
    proposer.draft_model_config = spec.draft_model_config
    from vllm.model_executor.models.qwen3_dflash import dflash_has_any_non_causal

    proposer.dflash_causal = not dflash_has_any_non_causal(spec.draft_model_config.hf_config)
    draft_config = DFlashProposer._create_draft_vllm_config(proposer)
    refuse_uncapturable_target(config, spec)
    result["stage"] = "distributed"
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo"
        )
        initialize_model_parallel(1, 1)
    with set_current_vllm_config(draft_config):
        result["stage"] = "construct"
        loader = get_model_loader(get_draft_load_config(draft_config))
        model_config = spec.draft_model_config
        with set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
            model = loader.create_model(vllm_config=draft_config, model_config=model_config)
        result["model_class"] = type(model).__name__
        # parameters built at -inf (make_attention_sink's attention sinks): a value of their own when nothing fills them
        result["built_fill"] = sorted(
            name
            for name, param in model.named_parameters()
            if param.dtype.is_floating_point and param.numel() and bool(torch.isneginf(param.detach()).all())
        )
        built = poison(model)
        result["stage"] = "load"
        from vllm.model_executor.models import utils as model_utils

        model.load_weights = tracking(model.load_weights, result, markers)
        lazy = model_utils.AutoWeightsLoader.load_weights
        model_utils.AutoWeightsLoader.load_weights = lambda self, *a, **k: tracking(
            lambda *b, **c: lazy(self, *b, **c), result, markers
        )(*a, **k)
        try:
            loader.load_weights(model, model_config)
        finally:
            result.update(observe(model, markers, built))
            result["embed_width"] = embed_width(getattr(model, "model", None))
            result["from_target"] = share_from_target(model, target_dir)
            ids = get_eagle3_aux_layers_from_config(spec)
            inner = getattr(model, "model", None)
            result["aux"] = {
                "ids": list(ids) if ids else None,
                "fc_in": fc_in_width(inner),
                "uses_aux": bool(getattr(inner, "use_aux_hidden_state", True)),
                # The target's capture as the V2 model runner sets it up for this drafter (model_runner.py:414,
                # set_eagle3_aux_hidden_state_layers), traced on the target's own class over stub layers.
                **safely(observe_capture, config, spec, "v2", target_dir),
                # The ids the V1 model runner would capture at (VLLM_USE_V2_MODEL_RUNNER=0), read by its own method.
                "v1_ids": safely(lambda: {"ids": _v1_aux_ids(spec)}).get("ids"),
            }
            result["head_rows"] = head_rows(model)
        # Reached only when the load succeeded: what the speculator makes of the states captured above.
        result["aux"]["handover"] = safely(observe_handover, model, spec, result["aux"].get("outputs"), target_dir)
        result["stage"] = "kv"
        result["kv"] = kv_cache_groups(config, target_dir)
        result["stage"] = "done"


def observe_handover(model: Any, spec: Any, outputs: list[int] | None, target_dir: str) -> dict[str, Any]:
    """What the V2 DFlash speculator makes of the target states captured for this drafter: its own
    ``_store_hidden_states`` (v1/worker/gpu/spec_decode/dflash/speculator.py:397), on the loaded drafter, with one
    state per captured output (the target's hidden size wide, as the target's forward returns them) into its
    hidden-state buffer (the drafter's hidden size wide, speculator.py:57 and spec_decode/speculator.py:124). The
    start-up's profiling run (model_runner.py:964, the dummy propose) takes this path first. ``error``: it raised."""
    import torch
    from vllm.v1.worker.gpu.spec_decode.dflash.speculator import DFlashSpeculator

    if outputs is None:
        return {"unobserved": "no captured outputs were observed"}
    fc = getattr(model.model, "fc", None)
    if fc is not None:  # fc as the loader leaves it for the runtime (utils.py:139, process_weights_after_loading)
        try:
            fc.quant_method.process_weights_after_loading(fc)
        except Exception as error:  # this machine's, not the pair's: no observation
            return {"unobserved": f"fc's post-load step raised {type(error).__name__}: {error}"[:500]}
    tokens, dtype = 2, torch.bfloat16
    hidden = int(target_config_json(target_dir)["hidden_size"])
    width = int(spec.draft_model_config.get_hidden_size())
    states = [torch.zeros((tokens, hidden), dtype=dtype) for _ in outputs]
    speculator = types.SimpleNamespace(
        model=model, _aux_staging=None, hidden_states=torch.zeros((tokens, width), dtype=dtype)
    )
    out: dict[str, Any] = {"states": len(states), "buffer_width": width, "uses_fc": fc is not None}
    try:
        with torch.no_grad():
            last = torch.zeros((tokens, hidden), dtype=dtype)
            DFlashSpeculator._store_hidden_states(speculator, tokens, last, states)
    except Exception as error:  # the engine's own raise on this pair
        out["error"] = {"type": type(error).__name__, "message": str(error)[:500]}
    return out


def kv_cache_groups(config: Any, target_dir: str) -> dict[str, Any]:
    """How vLLM's start-up groups the KV caches of the drafter's attention layers (registered by its construction)
    with the target's: the target's own class built on the CPU under the engine config (its attention layers join
    the same forward context), then vLLM's own get_kv_cache_spec and get_kv_cache_groups over every layer. A raise
    building the target is no observation (``unobserved``); one in the grouping is the engine's (``error``)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.core.kv_cache_planning import get_kv_cache_groups
    from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

    with set_current_vllm_config(config):
        try:
            loader = get_model_loader(config.load_config)
            with set_default_torch_dtype(config.model_config.dtype), torch.device("cpu"):
                loader.create_model(vllm_config=config, model_config=config.model_config)
            specs = get_kv_cache_spec(config)
        except Exception as error:  # the target's class on this machine, not the drafter
            return {"unobserved": f"{type(error).__name__}: {error}"[:500]}
        layers = {name: [type(spec).__name__, spec.num_kv_heads, spec.head_size, spec.page_size_bytes]
                  for name, spec in specs.items()}  # fmt: skip
        try:
            groups = get_kv_cache_groups(config, specs)
        except Exception as error:  # the engine refuses to start
            return {"layers": layers, "error": {"type": type(error).__name__, "message": str(error)[:1000]}}
    return {"layers": layers, "groups": [[type(g.kv_cache_spec).__name__, len(g.layer_names)] for g in groups]}


def refuse_uncapturable_target(config: Any, spec: Any) -> None:
    """The V2 model runner's start-up on the target (model_runner.py:414, set_eagle3_aux_hidden_state_layers): its
    first check refuses a target class without the EAGLE-3 interface. Run on the target's own class (the registry's,
    by its architecture) only where that check refuses, so nothing past it runs on a class never built."""
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

    cls, _ = get_model_architecture(config.model_config)
    if not supports_eagle3(cls):
        set_eagle3_aux_hidden_state_layers(object.__new__(cls), spec)


def share_from_target(model: Any, target_dir: str) -> list[str]:
    """What the drafter takes from the target after loading: vLLM's own decision (v1/worker/gpu/spec_decode/eagle/
    utils.py, maybe_share_target_embed and _should_share, as the DFlash speculator's load calls them), run against
    stand-ins of the target's embedding and head."""
    from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle_utils

    embed, head = target_embed_and_head(target_dir)
    eagle_utils.maybe_share_target_embed(model, model.model, types.SimpleNamespace(embed_tokens=embed))
    taken = ["model.embed_tokens.weight"] if getattr(model.model, "embed_tokens", None) is embed else []
    if eagle_utils._should_share(model, "has_own_lm_head", getattr(model, "lm_head", None), head):
        taken.append("lm_head.weight")
    return taken
