"""How the oracle drives vLLM's V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``; imported by worker.py inside vLLM's
environment as engine ``v1_vllm``): the runner vLLM itself builds for the CPU under that setting,
``v1/worker/cpu_model_runner.py`` ``CPUModelRunner`` (a ``GPUModelRunner``), is constructed from the engine config
and its own ``load_model`` runs: the target, then ``drafter.load_model(target)`` (the V1 proposer,
``v1/spec_decode/llm_base_proposer.py``: the draft built and loaded by the model loader, then
``_maybe_share_embeddings`` and ``_maybe_share_lm_head``), then ``_setup_eagle3_aux_hidden_state_outputs`` (the aux
ids read by ``_get_eagle3_aux_layers_from_config``, else the target class's default). Nothing here decides what the
runner does; the worker only watches.

Stand-ins, as in worker_vllm.py: the target is its own class from vLLM's registry (by its architecture) with stub
decoder layers and a stand-in embedding and head of the target's sizes, handed to the runner in place of the loaded
target (``get_model`` of ``cpu_model_runner``, the target's load only); the drafter is the case's, loaded for real.
Around the model loader's ``load_weights`` the drafter's parameters are filled with NaN first and observed after
(worker.py), so a load that raises is seen as the EAGLE-3 job sees it. The capture is then traced through the
target's inner forward over the stubs, on the very object the runner set up.

Never imports ckptdiff; results are cached under results/v1_vllm-<version>/.
"""

from __future__ import annotations

import os
from typing import Any

import worker_vllm as eagle3
from worker import (
    embed_width,
    fc_in_width,
    free_port,
    head_rows,
    observe,
    poison,
    target_config_json,
    target_embed_and_head,
    target_layers,
    traced_outputs,
    tracking,
    write_markers,
)


def setup(architectures: list[str]) -> None:
    # The setting under test: read by vllm.envs when the engine config is made (config/vllm.py).
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    eagle3.setup(architectures)
    import vllm.v1.worker.cpu_model_runner  # noqa: F401


def _method(case_dir: str) -> str:
    """The speculative method a user names for this drafter: ``dflash`` for a DFlash drafter, else ``eagle3``."""
    config = target_config_json(case_dir)
    dflash = "dflash_config" in config or any("DFlash" in a for a in config.get("architectures") or [])
    return "dflash" if dflash else "eagle3"


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    from vllm.model_executor.models import utils as model_utils
    from vllm.v1.worker import cpu_model_runner

    markers = write_markers(case_dir, marked)
    result["stage"] = "config"
    method = _method(case_dir)
    tokens = 4 if method == "dflash" else 2
    args = EngineArgs(
        model=target_dir,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        enforce_eager=True,
        max_model_len=256,
        speculative_config={"method": method, "model": marked, "num_speculative_tokens": tokens},
    )
    config = args.create_engine_config()
    result["method"] = method
    # What the setting selected (config/vllm.py use_v2_model_runner); the run is only about V1 if this is False.
    result["use_v2_model_runner"] = bool(config.use_v2_model_runner)
    if config.use_v2_model_runner:
        raise RuntimeError("VLLM_USE_V2_MODEL_RUNNER=0 did not select the V1 model runner")
    spec = config.speculative_config
    result["architecture"] = list(spec.draft_model_config.hf_config.architectures or [])
    result["stage"] = "distributed"
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo"
        )
        initialize_model_parallel(1, 1)
        # The runner and its proposer read the drafter's config here (EagleProposer / DFlashProposer.__init__).
        result["stage"] = "config"
        runner = cpu_model_runner.CPUModelRunner(config, torch.device("cpu"))
    result["runner_class"] = type(runner).__name__
    result["proposer_class"] = type(runner.drafter).__name__
    result["runner_uses_aux"] = bool(runner.use_aux_hidden_state_outputs)

    layers = target_layers(target_dir)
    hidden = int(target_config_json(target_dir)["hidden_size"])
    target, inner = eagle3._target_stub(config, layers, hidden)
    embed, head = target_embed_and_head(target_dir)
    inner.embed_tokens = embed
    target.lm_head = head
    drafter: dict[str, Any] = {}

    lazy = model_utils.AutoWeightsLoader.load_weights  # iterates the weights lazily: follows the raise
    model_utils.AutoWeightsLoader.load_weights = lambda self, *a, **k: tracking(
        lambda *b, **c: lazy(self, *b, **c), result, markers
    )(*a, **k)
    real_load = DefaultModelLoader.load_weights

    def watched_load(loader: Any, model: Any, model_config: Any) -> Any:
        """The drafter's load, watched: its parameters poisoned before, observed after (the runner does the rest)."""
        drafter["model"] = model
        result["model_class"] = type(model).__name__
        built = poison(model)
        model.load_weights = tracking(model.load_weights, result, markers)
        result["stage"] = "load"
        try:
            return real_load(loader, model, model_config)
        finally:
            result.update(observe(model, markers, built))
            # The width the drafter built its embedding with, before the target's may replace it.
            result["embed_width"] = embed_width(getattr(model, "model", None))
            result["head_rows"] = head_rows(model)

    DefaultModelLoader.load_weights = watched_load  # the draft's loader (load_format auto)
    cpu_model_runner.get_model = lambda **_: target  # the target's load: its class with stand-ins (above)
    setup = runner._setup_eagle3_aux_hidden_state_outputs

    def watched_setup() -> None:
        result["stage"] = "capture"  # the drafter is loaded and has taken what it takes from the target
        setup()

    runner._setup_eagle3_aux_hidden_state_outputs = watched_setup
    result["stage"] = "construct"
    with set_current_vllm_config(config):
        try:
            runner.load_model()
        except Exception as error:
            if result["stage"] != "capture":
                raise
            # The capture set-up refused the target (a class without SupportsEagle3): recorded as the EAGLE-3 job
            # records it, a failure of the first forward (compare.py).
            result["aux"] = {"capture_error": f"{type(error).__name__}: {error}"[:500]}
    model = drafter.get("model")
    result["from_target"] = _taken(model, embed, head)
    inner_drafter = getattr(model, "model", None)
    aux = result.setdefault("aux", {})
    aux.update(
        runner="v1",
        ids=_list(runner._get_eagle3_aux_layers_from_config()),
        fc_in=fc_in_width(inner_drafter),
        uses_aux=bool(getattr(inner_drafter, "use_aux_hidden_state", True)),
        runner_uses_aux=bool(runner.use_aux_hidden_state_outputs),
        model_class=type(target).__name__,
        inner_class=type(inner).__name__,
    )
    if "capture_error" not in aux:
        aux.update(_traced(inner, layers, hidden))
    result["stage"] = "done"


def _taken(model: Any, embed: Any, head: Any) -> list[str]:
    """What the drafter holds of the target's after the runner's load: the stand-ins themselves."""
    if model is None:
        return []
    taken = (
        ["model.embed_tokens.weight"] if getattr(getattr(model, "model", None), "embed_tokens", None) is embed else []
    )
    if getattr(model, "lm_head", None) is head:
        taken.append("lm_head.weight")
    return taken


def _list(ids: Any) -> list[int] | None:
    return [int(i) for i in ids] if ids else None


def _traced(inner: Any, layers: int, hidden: int) -> dict[str, Any]:
    """The target layers whose outputs the runner's set-up captures: the inner model's forward over the stub layers
    (worker.stub_layers), on the object the runner configured; derived from its indices where that forward cannot
    run here (worker_vllm.observe_capture's convention), and said so."""
    import torch

    captured = [int(i) for i in getattr(inner, "aux_hidden_state_layers", ())]
    out: dict[str, Any] = {"indices": captured}
    try:
        with torch.no_grad():
            returned = inner.forward(
                input_ids=None,
                positions=torch.arange(2),
                intermediate_tensors=None,
                inputs_embeds=torch.zeros((2, hidden)),
            )
        out["outputs"] = traced_outputs(returned[1] if isinstance(returned, tuple) else [])
        out["how"] = "traced: the V1 runner's set-up, then the target class's forward over stub layers"
    except Exception as error:
        out["outputs"] = sorted({j - 1 for j in captured if 0 <= j <= layers})
        out["how"] = f"derived from the forward's code (the traced forward raised {type(error).__name__}: {error})"[
            :300
        ]
    return out
