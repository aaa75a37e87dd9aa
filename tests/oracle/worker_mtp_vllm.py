"""How the oracle drives vLLM's MTP drafters (``worker.py mtp_vllm ...``, inside vLLM's environment).

The case is the checkpoint vLLM serves MTP from: the target itself (``speculative_config={"method": "mtp"}``), or
a standalone export named as the draft model (``"model": EXPORT``) beside its target. The drafter is built and
loaded as the proposer does (``_create_draft_vllm_config``, the model loader's ``create_model`` and
``load_weights``), then what it takes from the target is decided by vLLM's own ``load_eagle_model``
(v1/worker/gpu/spec_decode/eagle/utils.py, the V2 runner's; the V1 runner's ``_maybe_share_*`` share both for
MTP too) run on the loaded drafter and stand-ins of the target's embedding and head.
"""

from __future__ import annotations

import os
from typing import Any

import worker_mtp
from worker import free_port, observe, poison, write_markers


def setup(architectures: list[str]) -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    import torch  # noqa: F401
    import vllm.distributed.parallel_state  # noqa: F401
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.model_executor.model_loader  # noqa: F401
    import vllm.v1.spec_decode.llm_base_proposer  # noqa: F401
    from vllm.model_executor.models.registry import ModelRegistry

    worker_mtp.widen_markers()
    ModelRegistry.get_supported_archs()
    for architecture in ("DeepSeekMTPModel", "Glm4MoeMTPModel", "Qwen3NextMTP", *architectures):
        ModelRegistry._try_load_model_cls(architecture)


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import get_draft_load_config
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    inside = os.path.realpath(case_dir) == os.path.realpath(target_dir)
    speculative: dict[str, Any] = {"method": "mtp", "num_speculative_tokens": 1}
    if not inside:
        speculative["model"] = marked
    args = EngineArgs(
        model=marked if inside else target_dir,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        enforce_eager=True,
        max_model_len=256,
        speculative_config=speculative,
    )
    config = args.create_engine_config()
    spec = config.speculative_config
    result["architecture"] = list(spec.draft_model_config.hf_config.architectures or [])
    proposer = object.__new__(SpecDecodeBaseProposer)
    proposer.vllm_config, proposer.speculative_config = config, spec
    draft_config = SpecDecodeBaseProposer._create_draft_vllm_config(proposer)
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
        built = poison(model)
        result["stage"] = "load"
        from vllm.model_executor.model_loader.weight_utils import default_weight_loader

        worker_mtp.track(model, result, markers, default_weight_loader)
        try:
            loader.load_weights(model, model_config)
        finally:
            result.update(observe(model, markers, built))
            result["aux"] = {"uses_aux": False}  # an MTP drafter reads the target's last hidden state only
        result["stage"] = "share"
        result["from_target"] = share_from_target(model, config, target_dir)
    result["stage"] = "done"


def share_from_target(model: Any, config: Any, target_dir: str) -> list[str]:
    """vLLM's own load_eagle_model on the loaded drafter (its get_model returns it) and a stand-in target holding
    the target's embedding and head: the drafter's parameters that are the target's afterwards."""
    import torch
    from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle_utils

    before = worker_mtp.parameter_names(model)
    embed, head = worker_mtp.stand_ins(target_dir)
    target = torch.nn.Module()
    target.model = torch.nn.Module()
    target.model.embed_tokens = embed
    target.lm_head = head
    original = eagle_utils.get_model
    eagle_utils.get_model = lambda **_: model
    try:
        eagle_utils.load_eagle_model(target, config)
    finally:
        eagle_utils.get_model = original
    return worker_mtp.taken(model, before, {id(embed.weight), id(head.weight)})
