"""How the oracle drives vLLM's default (V2) model runner itself (imported by worker.py inside vLLM's environment as
engine ``v2_vllm``): the runner vLLM builds for the CPU when ``use_v2_model_runner`` holds, ``v1/worker/cpu/
model_runner.py`` ``CPUModelRunner`` (the V2 ``v1/worker/gpu/model_runner.py`` ``GPUModelRunner``, after
``v1/worker/cpu/shm.py``'s stand-ins for the CUDA streams and events, which ``cpu_worker.py`` imports first), is
constructed from the engine config, and its own ``load_model`` runs:

- ``__init__`` decides whether the target captures at all: ``use_aux_hidden_state_outputs`` from
  ``eagle3_utils.requires_aux_hidden_states`` (model_runner.py:306);
- ``load_model`` sets the capture up only when that holds (model_runner.py:412:
  ``set_eagle3_aux_hidden_state_layers``, the ids read else the class's default, the class's ``SupportsEagle3``
  check), then loads the drafter (``DraftModelSpeculator.load_model``: ``load_eagle_model``, the draft built and
  loaded by the model loader, then the target's embedding and head shared).

Nothing here decides what the runner does; the worker only watches: whether the runner called the set-up (the
module's ``set_eagle3_aux_hidden_state_layers`` wrapped, called through), the drafter's parameters poisoned and
observed around the model loader's ``load_weights`` (worker.py), and the capture traced through the target's inner
forward over stub layers on the very object the runner set up. A set-up that raises (a class without
``SupportsEagle3``) ends vLLM's start-up there; the worker records the raise as the capture's error (compare.py: the
forward defect ``target_class``, as the EAGLE-3 job records it) and lets ``load_model`` go on, so the drafter's own
load is observed as in the EAGLE-3 job. The target is its own class from vLLM's registry with stub decoder layers
and a stand-in embedding and head, handed to ``load_model`` as its ``model`` (the runner's parameter for a model
already built). What happens after the drafter's load (``init_model_state`` and the rest, which need the real
target) is not this observation's: a raise there, after the load, is recorded as ``after_load`` and ignored.

Never imports ckptdiff; results are cached under results/v2_vllm-<version>/.
"""

from __future__ import annotations

from typing import Any

import worker_v1_vllm as v1
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
    tracking,
    write_markers,
)


def setup(architectures: list[str]) -> None:
    import importlib

    eagle3.setup(architectures)
    # cpu_worker.py imports it first (its CUDA streams and events stood in for torch's), then the V2 CPU runner.
    importlib.import_module("vllm.v1.worker.cpu.shm")
    importlib.import_module("vllm.v1.worker.cpu.model_runner")


def case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    from vllm.model_executor.models import utils as model_utils
    from vllm.v1.worker.cpu import model_runner as cpu_runner
    from vllm.v1.worker.gpu import model_runner as v2_runner
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
    # What vLLM selected (config/vllm.py use_v2_model_runner); the run is only about V2 if this holds.
    result["use_v2_model_runner"] = bool(config.use_v2_model_runner)
    if not config.use_v2_model_runner:
        raise RuntimeError(f"vLLM did not select the V2 model runner here: {eagle3._v2_unsupported(config)}")
    spec = config.speculative_config
    result["architecture"] = list(spec.draft_model_config.hf_config.architectures or [])
    result["stage"] = "distributed"
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo"
        )
        initialize_model_parallel(1, 1)
        result["stage"] = "config"  # the runner reads the drafter's config here (requires_aux_hidden_states)
        runner = cpu_runner.CPUModelRunner(config, torch.device("cpu"))
    result["runner_class"] = f"{type(runner).__module__}.{type(runner).__name__}"
    result["speculator_class"] = type(runner.speculator).__name__
    result["runner_uses_aux"] = bool(runner.use_aux_hidden_state_outputs)

    layers = target_layers(target_dir)
    hidden = int(target_config_json(target_dir)["hidden_size"])
    target, inner = eagle3._target_stub(config, layers, hidden)
    embed, head = target_embed_and_head(target_dir)
    inner.embed_tokens = embed
    target.lm_head = head
    drafter: dict[str, Any] = {}
    aux: dict[str, Any] = {}

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
            loaded = real_load(loader, model, model_config)
            drafter["loaded"] = True
            return loaded
        finally:
            result.update(observe(model, markers, built))
            # The width the drafter built its embedding with, before the target's may replace it.
            result["embed_width"] = embed_width(getattr(model, "model", None))
            result["head_rows"] = head_rows(model)

    set_up = v2_runner.set_eagle3_aux_hidden_state_layers

    def watched_set_up(model: Any, spec_config: Any, use_pp: bool = False) -> None:
        """The runner's capture set-up (model_runner.py:412), called through; its raise is recorded (above)."""
        aux["set_up_called"] = True
        result["stage"] = "capture"
        try:
            set_up(model, spec_config, use_pp)
        except Exception as error:
            aux["capture_error"] = f"{type(error).__name__}: {error}"[:500]
        result["stage"] = "construct"

    DefaultModelLoader.load_weights = watched_load  # the draft's loader (load_format auto)
    v2_runner.set_eagle3_aux_hidden_state_layers = watched_set_up
    result["stage"] = "construct"
    with set_current_vllm_config(config):
        try:
            runner.load_model(model=target)
        except Exception as error:
            if not drafter.get("loaded"):
                raise
            # After the drafter's load: the runner's state for serving, which needs the real target.
            result["after_load"] = f"{type(error).__name__}: {error}"[:300]
    model = drafter.get("model")
    result["from_target"] = v1._taken(model, embed, head)
    inner_drafter = getattr(model, "model", None)
    aux.update(
        runner="v2",
        set_up_called=bool(aux.get("set_up_called")),
        ids=v1._list(get_eagle3_aux_layers_from_config(spec)),
        fc_in=fc_in_width(inner_drafter),
        uses_aux=bool(getattr(inner_drafter, "use_aux_hidden_state", True)),
        runner_uses_aux=bool(runner.use_aux_hidden_state_outputs),
        model_class=type(target).__name__,
        inner_class=type(inner).__name__,
    )
    if "capture_error" not in aux:
        aux.update(v1._traced(inner, layers, hidden))
        aux["how"] = str(aux["how"]).replace("the V1 runner's set-up", "the V2 runner's load_model")
    result["aux"] = aux
    result["stage"] = "done"
