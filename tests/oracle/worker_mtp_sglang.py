"""How the oracle drives SGLang's MTP (NextN) drafters (``worker.py mtp_sglang ...``, inside SGLang's environment).

The NEXTN algorithm with the case as draft model path beside its target (the target itself for a checkpoint that
carries its MTP layers): the scheduler's start-up steps, the draft ``ModelConfig`` (which swaps the architecture
for its NextN class), ``_initialize_model``, ``load_weights_and_postprocess``; then what it takes from the target
is the drafter's own ``set_embed_and_head`` as speculative/eagle_worker_v2.py calls it for NEXTN, with stand-ins
of the target's embedding and head.

Qwen3-Next is a hybrid (gated delta-net) model: SGLang's start-up validates its Mamba radix cache strategy and
refuses the CPU there (arg_groups/mamba_hook.py ``validate_mamba_extra_buffer``: "extra_buffer requires platform
support for Mamba cache state snapshots"). That check is about the machine's cache, not the checkpoint, so the
worker answers it (as worker_dflash_sglang.py answers DFLASH's device check): while that validator runs, its
platform says it supports the snapshots, through the out-of-tree platform interface SGLang asks, as the CUDA
platform does; every other check runs as shipped.
"""

from __future__ import annotations

import re
from typing import Any

import worker_mtp
from worker import free_port, observe, poison, write_markers


def setup(architectures: list[str]) -> None:
    worker_mtp.widen_markers()
    worker_mtp.rotary_stand_in()
    answer_mamba_snapshot_check()
    import sglang.srt.configs.model_config  # noqa: F401
    import sglang.srt.distributed.bootstrap  # noqa: F401
    import sglang.srt.model_loader.loader  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    import torch  # noqa: F401
    from sglang.srt.models.registry import ModelRegistry

    for architecture in (
        "DeepseekV3ForCausalLMNextN",
        "Glm4MoeForCausalLMNextN",
        "Qwen3NextForCausalLMMTP",
        *architectures,
    ):
        try:
            ModelRegistry.resolve_model_cls([architecture])
        except Exception:  # not in this version's registry: the case says so when it asks
            pass


def answer_mamba_snapshot_check() -> None:
    """mamba_hook's platform, while ``validate_mamba_extra_buffer`` runs, answers that it supports Mamba cache
    state snapshots (``support_mamba_cache_extra_buffer``, asked of an out-of-tree platform); anything else as the
    platform says."""
    import sglang.srt.arg_groups.mamba_hook as hook

    platform = hook.current_platform

    class AnswersSnapshots:
        def is_out_of_tree(self) -> bool:
            return True

        def support_mamba_cache_extra_buffer(self) -> bool:
            return True

        def __getattr__(self, name: str) -> Any:
            return getattr(platform, name)

    validate = hook.validate_mamba_extra_buffer

    def validate_mamba_extra_buffer(*args: Any, **kwargs: Any) -> Any:
        hook.current_platform = AnswersSnapshots()
        try:
            return validate(*args, **kwargs)
        finally:
            hook.current_platform = platform

    hook.validate_mamba_extra_buffer = validate_mamba_extra_buffer


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import os

    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.distributed import bootstrap
    from sglang.srt.model_loader.loader import DefaultModelLoader, _get_quantization_config, _initialize_model
    from sglang.srt.model_loader.utils import get_model_architecture, set_default_torch_dtype
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank
    from sglang.srt.server_args import ServerArgs

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    inside = os.path.realpath(case_dir) == os.path.realpath(target_dir)
    args = ServerArgs(
        model_path=marked if inside else target_dir,
        speculative_algorithm="NEXTN",
        speculative_draft_model_path=marked,
        device="cpu",
        skip_tokenizer_init=True,
        dtype="bfloat16",
    )
    publish(
        args,
        role="scheduler",
        ranks=SpawnRanks(world_rank=spawn_world_rank(args, tp_rank=0, pp_rank=0), dp_rank=None, gpu_id=0),
    )
    model_config = ModelConfig.from_server_args(args, model_path=marked, is_draft_model=True)
    result["architecture"] = list(getattr(model_config.hf_config, "architectures", None) or [])
    get_model_architecture(model_config)
    result["stage"] = "distributed"
    bootstrap.init_parallel_runtime(server_args=args, device="cpu", dist_port=free_port())
    result["stage"] = "construct"
    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    with set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
        # with the quantization config, as DefaultModelLoader.load_model builds it (loader.py:837-843)
        quant_config = _get_quantization_config(model_config, loader.load_config)
        model = _initialize_model(model_config, loader.load_config, quant_config)
    result["model_class"] = type(model).__name__
    built = poison_but_engine_defaults(model)
    result["stage"] = "load"
    snapshot: dict[str, Any] = {}
    from sglang.srt.model_loader.weight_utils import default_weight_loader

    worker_mtp.track(model, result, markers, default_weight_loader)
    load_weights = model.load_weights

    def load_then_observe(weights: Any) -> Any:
        try:
            return load_weights(weights)
        finally:
            snapshot.update(observe(WithoutEngineDefaults(model), markers, built))

    model.load_weights = load_then_observe
    try:
        DefaultModelLoader.load_weights_and_postprocess(
            model, loader._get_all_weights(model_config, model), torch.device("cpu")
        )
    finally:
        result.update(snapshot or observe(WithoutEngineDefaults(model), markers, built))
        result["aux"] = {"uses_aux": False}  # a NextN drafter reads the target's last hidden state only
    result["stage"] = "share"
    result["from_target"] = share_from_target(model, target_dir)
    result["stage"] = "done"


#: The attention's KV-cache quantization scales, which the engine sets itself when the checkpoint has none
#: (compare.ENGINE_DEFAULTS: never compared); the FP8 post-processing asserts them positive.
ENGINE_DEFAULTS = re.compile(r"\.attn(_mha|_mqa)?\.(k|v|q|prob)_(scale|zero_point)$")


def poison_but_engine_defaults(model: Any) -> dict[str, list[int]]:
    """worker.poison, then the engine-set KV-cache scales back to the values the engine built them with: NaN there
    fails kv_cache.py's ``assert layer.k_scale > 0.0`` after the load, a raise about the harness, not the
    checkpoint."""
    kept = {name: param.detach().clone() for name, param in model.named_parameters() if ENGINE_DEFAULTS.search(name)}
    built = poison(model)
    for name, param in model.named_parameters():
        if name in kept:
            param.data.copy_(kept[name])
    return built


class WithoutEngineDefaults:
    """The model as ``worker.observe`` sees it: without the engine-set KV-cache scales. They hold the 1.0 they were
    built with, which is also the first tensor's marker: observed, they would make that tensor (the target's
    embed_tokens) look loaded. They are compared on neither side (compare.ENGINE_DEFAULTS)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def named_parameters(self, *args: Any, **kwargs: Any) -> Any:
        for name, param in self.model.named_parameters(*args, **kwargs):
            if not ENGINE_DEFAULTS.search(name):
                yield name, param


def share_from_target(model: Any, target_dir: str) -> list[str]:
    """The NEXTN branch of eagle_worker_v2.py: ``set_embed_and_head(embed, head)`` with the target's (stand-ins)."""
    before = worker_mtp.parameter_names(model)
    embed, head = worker_mtp.stand_ins(target_dir)
    try:
        model.set_embed_and_head(embed.weight, head.weight)
    except RuntimeError:
        pass  # the cache flush after the swap needs a device; the swap itself has happened
    return worker_mtp.taken(model, before, {id(embed.weight), id(head.weight)})
