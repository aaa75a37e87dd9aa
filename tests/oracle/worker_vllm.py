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
    stub_layers,
    stub_norm,
    target_config_json,
    target_embed_and_head,
    target_layers,
    traced_outputs,
    tracking,
    write_markers,
)


def setup(architectures: list[str]) -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # Otherwise vLLM's kernel registry starts background kernel builds at import that outlive each case.
    os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    import torch

    # The host's CPU features choose vLLM's CPU kernels: with AMX, small BF16 linears (and MoE experts, int8
    # scaled-mm) are packed by torch.ops._C.convert_weight_packed when the runner processes loaded weights
    # (model_executor/layers/utils.py check_cpu_sgl_kernel). The pinned wheel is vLLM's CUDA build, which has no
    # CPU `_C`, so on an AMX host every runner case would fail there, after the load the oracle observes. The
    # worker answers as a host without AMX does, so verdicts do not depend on which machine runs the job.
    torch.cpu._is_amx_tile_supported = lambda: False
    torch.cpu._is_amx_fp16_supported = lambda: False
    import vllm.distributed.parallel_state  # noqa: F401
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.model_executor.model_loader  # noqa: F401
    import vllm.model_executor.models.llama_eagle3  # noqa: F401
    import vllm.v1.spec_decode.llm_base_proposer  # noqa: F401
    from vllm.model_executor.models.registry import ModelRegistry

    ModelRegistry.get_supported_archs()  # the registry's lazy imports, before the fork
    for architecture in architectures:
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
        from vllm.model_executor.models import utils as model_utils

        model.load_weights = tracking(model.load_weights, result, markers)
        lazy = model_utils.AutoWeightsLoader.load_weights  # iterates the weights lazily: follows the raise
        model_utils.AutoWeightsLoader.load_weights = lambda self, *a, **k: tracking(
            lambda *b, **c: lazy(self, *b, **c), result, markers
        )(*a, **k)
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
            result["aux"] = {
                "runner": runner,
                "ids": list(ids) if ids else None,
                "fc_in": fc_in_width(inner),
                "uses_aux": bool(getattr(inner, "use_aux_hidden_state", True)),
                **safely(observe_capture, config, spec, runner, target_dir),
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


def safely(observe: Any, *args: Any) -> dict[str, Any]:
    """An observation that must not replace the load's own exception (it runs in a ``finally``)."""
    try:
        found: dict[str, Any] = observe(*args)
        return found
    except Exception as error:
        return {"capture_error": f"{type(error).__name__}: {error}"[:500]}


def _target_stub(config: Any, layers: int, hidden: int) -> tuple[Any, Any]:
    """The target's own model class (vLLM's registry, by its architecture), built without its modules: the outer
    class with its inner decoder (the class in its module that holds the aux layers), ``layers`` stub layers."""
    import importlib
    import sys

    import torch
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.model_executor.models.interfaces import EagleModelMixin

    cls, _ = get_model_architecture(config.model_config)
    inner_cls: type = torch.nn.Module
    for base in cls.__mro__:  # the decoder of this class or of the class it extends (DeepseekV3 → DeepseekV2Model)
        module = sys.modules.get(base.__module__) or importlib.import_module(base.__module__)
        wanted = base.__name__.replace("ForCausalLM", "Model")
        found = vars(module).get(wanted)
        mixins = [
            c
            for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, EagleModelMixin) and c.__module__ == base.__module__
        ]
        if isinstance(found, type) and issubclass(found, torch.nn.Module):
            inner_cls = found
            break
        if mixins:
            inner_cls = mixins[0]
            break
    outer = object.__new__(cls)
    torch.nn.Module.__init__(outer)
    inner = object.__new__(inner_cls)
    torch.nn.Module.__init__(inner)
    inner.config = config.model_config.hf_config
    inner.start_layer, inner.end_layer = 0, layers
    inner.layers = stub_layers(layers, hidden)
    inner.norm = stub_norm()
    inner.hidden_size = hidden
    inner.quant_config = None
    inner.aux_hidden_state_layers = ()
    outer.model = inner
    outer.config = config.model_config.hf_config
    return outer, inner


def observe_capture(config: Any, spec: Any, runner: str, target_dir: str) -> dict[str, Any]:
    """The target layers vLLM captures for this drafter on this target, from vLLM's own objects: the runner's
    set-up (V2: eagle3_utils.set_eagle3_aux_hidden_state_layers; V1: GPUModelRunner's, the config's ids else the
    class's default) on the target's class, then its inner model's forward over stub layers. Where that forward
    cannot run here, the convention is derived from the forward's code (llama.py and the classes like it:
    ``_maybe_add_hidden_state(aux, idx + 1, ...)`` after layer idx; deepseek_v2.py: ``if idx in
    aux_hidden_state_layers`` before layer idx): id j is the output of layer j-1, 0 <= j <= n."""
    import torch
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

    layers = target_layers(target_dir)
    hidden = int(target_config_json(target_dir)["hidden_size"])
    outer, inner = _target_stub(config, layers, hidden)
    out: dict[str, Any] = {"model_class": type(outer).__name__, "inner_class": type(inner).__name__}
    if runner == "v2":
        set_eagle3_aux_hidden_state_layers(outer, spec)
    else:
        ids = _v1_aux_ids(spec) or outer.get_eagle3_default_aux_hidden_state_layers()
        outer.set_aux_hidden_state_layers(ids)
    captured = [int(i) for i in inner.aux_hidden_state_layers]
    out["indices"] = captured
    try:
        with torch.no_grad():
            returned = inner.forward(
                input_ids=None,
                positions=torch.arange(2),
                intermediate_tensors=None,
                inputs_embeds=torch.zeros((2, hidden)),
            )
        aux_states = returned[1] if isinstance(returned, tuple) else []
        out["outputs"] = traced_outputs(aux_states)
        out["how"] = "traced: the target class's forward over stub layers"
    except Exception as error:  # the forward needs more than stubs here: derive from its code, and say so
        out["outputs"] = sorted({j - 1 for j in captured if 0 <= j <= layers})
        out["how"] = f"derived from the forward's code (the traced forward raised {type(error).__name__}: {error})"[
            :300
        ]
    return out
