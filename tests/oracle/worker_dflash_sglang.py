"""How the oracle drives SGLang's DFlash loader (imported by worker.py inside SGLang's environment, as engine
``dflash_sglang``): the DFLASH algorithm's start-up steps with the case as the draft and a tiny target, then the
draft's construction and load_weights as the model loader runs them. Never imports ckptdiff.

SGLang refuses DFLASH on the CPU at start-up (arg_groups/speculative_hook.py ``_handle_dflash``: the device must
be CUDA, NPU or XPU). That check is about the machine, not the drafter, so the worker answers it: while the hook
runs, its platform says it supports DFLASH and its draft attention backends as the in-tree CUDA platform does (the
out-of-tree platform interface SGLang asks), and every other check runs as shipped.
"""

from __future__ import annotations

import types
from typing import Any

from worker import (
    embed_width,
    free_port,
    observe,
    poison,
    target_embed_and_head,
    target_layers,
    tracking,
    write_markers,
)
from worker_sglang import setup as eagle3_setup


def setup(architectures: list[str]) -> None:
    eagle3_setup(architectures)
    import sglang.srt.arg_groups.speculative_hook as hook
    import sglang.srt.models.dflash  # noqa: F401
    import sglang.srt.speculative.dflash_utils  # noqa: F401

    platform = hook.current_platform

    class AnswersDFlash:
        """The platform as _handle_dflash asks it: DFLASH is supported here; anything else as the platform says."""

        def is_out_of_tree(self) -> bool:
            return True

        def supports_speculative_algorithm(self, algorithm: str) -> bool:
            return algorithm == "DFLASH" or bool(platform.supports_speculative_algorithm(algorithm))

        # The draft attention backend as the in-tree CUDA platform resolves it (_resolve_dflash_draft_attention_
        # backend): any of SGLang's draft backends, flashinfer by default. No attention runs here.
        def supports_speculative_draft_attention_backend(self, algorithm: str, backend: str) -> bool:
            return backend in hook.DRAFT_ATTENTION_BACKEND_CHOICES

        def get_default_speculative_draft_attention_backend(self, algorithm: str) -> str:
            return "flashinfer"

        def __getattr__(self, name: str) -> Any:
            return getattr(platform, name)

    handle = hook._handle_dflash

    def handle_dflash(server_args: Any) -> None:
        hook.current_platform = AnswersDFlash()
        try:
            handle(server_args)
        finally:
            hook.current_platform = platform

    hook._handle_dflash = handle_dflash


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.distributed import bootstrap
    from sglang.srt.model_loader.loader import DefaultModelLoader, _initialize_model
    from sglang.srt.model_loader.utils import get_model_architecture, set_default_torch_dtype
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    args = ServerArgs(
        model_path=target_dir,
        speculative_algorithm="DFLASH",
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
    hf_config = model_config.hf_config
    result["architecture"] = list(getattr(hf_config, "architectures", None) or [])
    get_model_architecture(model_config)
    # The target side's start-up (model_runner_components/spec_aux_hidden_state.py,
    # _resolve_dflash_aux_hidden_state): the target layers captured, checked against the target's depth.
    draft = parse_dflash_draft_config(draft_hf_config=hf_config)
    ids = draft.resolve_target_layer_ids(
        target_num_layers=target_layers(target_dir), draft_num_layers=draft.require_num_layers()
    )
    result["aux"] = {"ids": [int(i) for i in ids], "block_size": draft.resolve_block_size(default=16)}
    refuse_uncapturable_target(args, target_dir, ids)
    result["mask_token_id"] = draft.mask_token_id
    result["stage"] = "distributed"
    bootstrap.init_parallel_runtime(server_args=args, device="cpu", dist_port=free_port())
    result["stage"] = "construct"
    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    with set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
        model = _initialize_model(model_config, loader.load_config)
    result["model_class"] = type(model).__name__
    fc = getattr(model, "fc", None)
    result["aux"]["fc_in"] = int(getattr(fc, "in_features", getattr(fc, "input_size", 0)) or 0) or None
    built = poison(model)
    result["stage"] = "load"
    snapshot: dict[str, Any] = {}
    load_weights = tracking(model.load_weights, result, markers)

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
        result.update(snapshot or observe(model, markers, built))
        result["embed_width"] = embed_width(model)
        result["from_target"] = share_from_target(model, target_dir)
    result["stage"] = "worker"
    check_mask_token(draft, target_dir)
    result["draft_kv_bytes_per_token"] = draft_kv_bytes(model_config, draft.require_num_layers())
    result["stage"] = "done"


def draft_kv_bytes(model_config: Any, layers: int) -> int | None:
    """The bytes per token the DFLASH draft's own KV pool costs, as the target's pool configurator resolves it at
    start-up (mem_cache/draft_kv_budget.py, resolve_dflash_draft_cell_size: from the draft's own attention)."""
    from sglang.srt.mem_cache.draft_kv_budget import resolve_dflash_draft_cell_size

    found = resolve_dflash_draft_cell_size(draft_model_config=model_config, draft_num_layers=layers, attn_tp_size=1)
    return int(found) if found is not None else None


def check_mask_token(draft: Any, target_dir: str) -> None:
    """DFlashWorkerV2's start-up check of the mask token against the target's vocabulary (``_resolve_mask_token_id``,
    called on a stand-in of the worker holding the target's vocab size and no tokenizer, as skip_tokenizer_init)."""
    import json
    import os

    from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2

    with open(os.path.join(target_dir, "config.json")) as handle:
        vocab = json.load(handle)["vocab_size"]
    runner = types.SimpleNamespace(model_config=types.SimpleNamespace(vocab_size=vocab))
    worker = types.SimpleNamespace(target_worker=types.SimpleNamespace(model_runner=runner, tokenizer=None))
    DFlashWorkerV2._resolve_mask_token_id(worker, mask_token=draft.mask_token, mask_token_id=draft.mask_token_id)


def refuse_uncapturable_target(args: Any, target_dir: str, ids: Any) -> None:
    """The target's start-up (attention_backend_setup.py:62, configure_aux_hidden_state_capture): a target class with
    neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture is refused. Run with the target's own class
    (the registry's, by its architecture) only where it refuses, so nothing past that check runs on a class never
    built."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_executor.model_runner_components.attention_backend_setup import (
        configure_aux_hidden_state_capture,
    )
    from sglang.srt.models.registry import ModelRegistry

    target_config = ModelConfig.from_server_args(args, model_path=target_dir).hf_config
    cls, _ = ModelRegistry.resolve_model_cls(list(target_config.architectures))
    if not hasattr(cls, "set_dflash_layers_to_capture") and not hasattr(cls, "set_dspark_layers_to_capture"):
        configure_aux_hidden_state_capture(
            model=object.__new__(cls),
            eagle_use_aux_hidden_state=False,
            eagle_aux_hidden_state_layer_ids=None,
            dflash_use_aux_hidden_state=True,
            dflash_target_layer_ids=list(ids),
            is_dspark=False,
        )


def share_from_target(model: Any, target_dir: str) -> list[str]:
    """What the drafter takes from the target: DFlashWorkerV2 embeds with the drafter's own embedding only for a
    Nemotron 3.5 draft (``_resolve_dflash_embedding_module``), else with the target's, and always projects with
    the target's lm_head (the draft has none). Asked of the drafter as the worker asks it."""
    from sglang.srt.speculative import dflash_worker_v2

    embed, _ = target_embed_and_head(target_dir)
    target = types.SimpleNamespace(get_input_embeddings=lambda: embed)
    try:
        chosen = dflash_worker_v2._resolve_dflash_embedding_module(model, target)
    except RuntimeError:
        chosen = None
    taken = ["embed_tokens.weight"] if chosen is embed else []
    if getattr(model, "lm_head", None) is None:
        taken.append("lm_head.weight")
    return taken
