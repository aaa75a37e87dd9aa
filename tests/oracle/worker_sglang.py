"""How the oracle drives SGLang (imported by worker.py inside SGLang's environment)."""

from __future__ import annotations

import re
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
    tracking,
    write_markers,
)


def setup(architectures: list[str]) -> None:
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
    from sglang.srt.models.registry import ModelRegistry

    for architecture in architectures:  # the targets' own classes, imported once before the forks
        ModelRegistry.resolve_model_cls([architecture])


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.distributed import bootstrap
    from sglang.srt.model_loader.loader import DefaultModelLoader, _get_quantization_config, _initialize_model
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
    # The registry lookup _initialize_model starts with: an architecture SGLang does not serve is refused here.
    from sglang.srt.model_loader.utils import get_model_architecture

    get_model_architecture(model_config)
    result["stage"] = "distributed"
    bootstrap.init_parallel_runtime(server_args=args, device="cpu", dist_port=free_port())
    result["stage"] = "construct"
    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    with set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
        # with the quantization config, as DefaultModelLoader builds the model (loader.py:837-843)
        quant_config = _get_quantization_config(model_config, loader.load_config)
        model = _initialize_model(model_config, loader.load_config, quant_config)
    result["model_class"] = type(model).__name__
    built = poison_but_engine_defaults(model)
    result["stage"] = "load"
    # Observed right after the drafter's load_weights, before the quantization post-processing (which
    # requantizes and merges scales, so markers no longer show); the load path itself is unchanged.
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
        captured = safely(observe_capture, args, hf_config, target_dir)
        # eagle_config.use_aux_hidden_state false: nothing is captured, and the drafter reads the last hidden state
        # (its fc applies only to a wider input, llama_eagle3.py forward)
        result["aux"] = {"fc_in": fc_in_width(inner), "uses_aux": captured.pop("use_aux", True), **captured}
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


def safely(observe: Any, *args: Any) -> dict[str, Any]:
    """An observation that must not replace the load's own exception (it runs in a ``finally``)."""
    try:
        found: dict[str, Any] = observe(*args)
        return found
    except Exception as error:
        return {"capture_error": f"{type(error).__name__}: {error}"[:500]}


def observe_capture(args: Any, draft_hf_config: Any, target_dir: str) -> dict[str, Any]:
    """The target layers SGLang captures for this drafter on this target, from SGLang's own objects: the ids as
    spec_aux_hidden_state.py's _resolve_eagle_aux_hidden_state reads them (eagle_config's only), handed to
    attention_backend_setup.configure_aux_hidden_state_capture with the target's own class (registry, by its
    architecture; built without its modules, its decoder's layers stand-ins), which calls the class's
    set_eagle3_layers_to_capture. The indices are observed; that the state at an index is the input of that
    layer is derived from the decoder layers' forward (``attn_boundary.prepare(hidden_states, forward_batch,
    capture=capture_output)`` before the attention), and index n (after the last layer) is reached only where the
    model's forward says ``self.end_layer in self.layers_to_capture`` (read from its source here)."""
    import importlib
    import inspect
    import sys

    import torch
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_executor.model_runner_components.attention_backend_setup import (
        configure_aux_hidden_state_capture,
    )
    from sglang.srt.models.registry import ModelRegistry

    target_config = ModelConfig.from_server_args(args, model_path=target_dir).hf_config
    cls, _ = ModelRegistry.resolve_model_cls(list(target_config.architectures))
    inner_cls: type = torch.nn.Module
    for base in cls.__mro__:
        module = sys.modules.get(base.__module__) or importlib.import_module(base.__module__)
        found = vars(module).get(base.__name__.replace("ForCausalLM", "Model"))
        if isinstance(found, type) and issubclass(found, torch.nn.Module):
            inner_cls = found
            break
    layers = target_layers(target_dir)
    outer = object.__new__(cls)
    torch.nn.Module.__init__(outer)
    inner = object.__new__(inner_cls)
    torch.nn.Module.__init__(inner)
    inner.layers = torch.nn.ModuleList([torch.nn.Module() for _ in range(layers)])
    inner.layers_to_capture, inner.start_layer, inner.end_layer = [], 0, layers
    outer.model, outer.config = inner, target_config
    outer.pp_group = types.SimpleNamespace(is_last_rank=True, is_first_rank=True)
    eagle_config = getattr(draft_hf_config, "eagle_config", None)
    try:  # as _resolve_eagle_aux_hidden_state reads them
        use_aux = eagle_config.get("use_aux_hidden_state", True)
        ids = eagle_config["eagle_aux_hidden_state_layer_ids"]
    except Exception:
        use_aux, ids = True, None
    out: dict[str, Any] = {"ids": list(ids) if ids else None, "model_class": cls.__name__, "use_aux": bool(use_aux)}
    try:
        configure_aux_hidden_state_capture(
            model=outer,
            eagle_use_aux_hidden_state=use_aux,
            eagle_aux_hidden_state_layer_ids=ids,
            dflash_use_aux_hidden_state=False,
            dflash_target_layer_ids=None,
            is_dspark=False,
        )
    except Exception as error:  # the target's own set-up refuses these ids: the server does not start
        out.update(outputs=[], setup_raised=f"{type(error).__name__}: {error}"[:300], how="set-up raised")
        return out
    indices = [int(i) for i in inner.layers_to_capture]
    source = inspect.getsource(type(inner).forward)
    last = "self.end_layer in self.layers_to_capture" in source
    out["indices"] = indices
    out["outputs"] = sorted({i - 1 for i in indices if 0 <= i < layers or (last and i == layers)})
    out["how"] = (
        f"indices observed ({cls.__name__}.set_eagle3_layers_to_capture); the layer's input at each index derived "
        f"from its decoder layer's forward (attn_boundary.prepare(..., capture=...)); index n "
        f"{'reached' if last else 'not reached'} per {inner_cls.__name__}.forward"
    )
    return out


#: The attention's KV-cache quantization scales, which the engine sets itself when the checkpoint has none
#: (compare.ENGINE_DEFAULTS: never compared); the FP8 post-processing asserts them positive.
ENGINE_DEFAULTS = re.compile(r"\.attn(_mha|_mqa)?\.(k|v|q|prob)_(scale|zero_point)$")


def poison_but_engine_defaults(model: Any) -> dict[str, list[int]]:
    """worker.poison, then the engine-set KV-cache scales back to the values the engine built them with: NaN there
    fails kv_cache.py's ``assert layer.k_scale > 0.0`` after the load, a raise about the harness."""
    kept = {name: param.detach().clone() for name, param in model.named_parameters() if ENGINE_DEFAULTS.search(name)}
    built = poison(model)
    for name, param in model.named_parameters():
        if name in kept:
            param.data.copy_(kept[name])
    return built
