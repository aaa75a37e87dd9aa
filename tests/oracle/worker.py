"""Runs inside one engine's virtual environment: each case through the engine's own EAGLE-3 drafter loader.

    <engine-venv>/bin/python worker.py ENGINE TARGET_DIR OUT_DIR CASE_DIR...

Imports the engine once, then forks one child per case (so no state leaks between cases) and writes
OUT_DIR/<case>.json. Only the standard library, torch, safetensors and the engine are used here: this file
never imports ckptdiff.

Per case: a marker copy of the checkpoint (floating tensor k filled with the value k, integer tensors with
1,000,000 + k), every parameter of the drafter the engine builds filled with NaN (integers with a sentinel),
then the engine's load path. Afterwards a parameter holding marker k was loaded from tensor k; one still all
NaN was never written; one partly NaN was partly written (one of q/k/v); one holding values that are no
tensor's marker was padded or converted with loss ("altered").
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
import traceback
import types
from typing import Any

INT_SENTINEL = -7_777_777
INT_MARKER_BASE = 1_000_000


# ---------------------------------------------------------------- markers and observation


def _header(path: str) -> dict[str, Any]:
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    return header


def write_markers(case_dir: str, out_dir: str) -> dict[float, list[str]]:
    """A copy of ``case_dir`` whose tensors carry their markers; returns marker value → tensor names."""
    import torch
    from safetensors.torch import save_file

    dtypes = {
        "BF16": torch.bfloat16,
        "F16": torch.float16,
        "F32": torch.float32,
        "F64": torch.float64,
        "I64": torch.int64,
        "I32": torch.int32,
        "I16": torch.int16,
        "I8": torch.int8,
        "U8": torch.uint8,
        "BOOL": torch.bool,
        "F8_E4M3": torch.float8_e4m3fn,
        "F8_E5M2": torch.float8_e5m2,
    }
    os.makedirs(out_dir, exist_ok=True)
    markers: dict[float, list[str]] = {}
    k = 0
    for file_name in sorted(os.listdir(case_dir)):
        path = os.path.join(case_dir, file_name)
        if not file_name.endswith(".safetensors"):
            shutil.copy(path, os.path.join(out_dir, file_name))
            continue
        tensors = {}
        for name, meta in _header(path).items():
            k += 1
            dtype = dtypes[meta["dtype"]]
            if dtype == torch.bool:
                # A vocabulary mask (t2d): all True, so no engine rejects it; it carries no marker.
                tensors[name] = torch.ones(meta["shape"], dtype=dtype)
                continue
            value = float(k) if dtype.is_floating_point else float(INT_MARKER_BASE + k)
            tensor = torch.full(meta["shape"], value, dtype=torch.float64).to(dtype)
            stored = float(tensor.reshape(-1)[0].double()) if tensor.numel() else value
            markers.setdefault(stored, []).append(name)
            tensors[name] = tensor
        save_file(tensors, os.path.join(out_dir, file_name), metadata={"format": "pt"})
    return markers


def poison(model: Any) -> dict[str, list[int]]:
    """Every parameter to NaN (integers to a sentinel); returns their shapes as built."""
    import torch

    with torch.no_grad():
        for _, param in model.named_parameters():
            if param.dtype.is_floating_point:
                param.data.fill_(float("nan"))
            elif param.dtype != torch.bool:
                param.data.fill_(INT_SENTINEL)
    return {name: list(param.shape) for name, param in model.named_parameters()}


def observe(model: Any, markers: dict[float, list[str]], built: dict[str, list[int]]) -> dict[str, Any]:
    """Which tensors' markers reached a parameter, which parameters stayed (partly) unwritten, and which a
    loader replaced by a tensor of another shape than the one it was built with."""
    import torch

    loaded: set[str] = set()
    params: dict[str, str] = {}
    float_into_int: list[str] = []
    seen: set[int] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen or param.dtype == torch.bool:
            continue
        seen.add(id(param))
        data = param.detach().cpu()
        if data.dtype.is_floating_point:
            data = data.double()
            unwritten = torch.isnan(data)
        else:
            unwritten = data == INT_SENTINEL
        foreign = False  # a written value that is no tensor's marker: padding, or a lossy conversion
        for value in torch.unique(data[~unwritten]).tolist():
            names = markers.get(float(value), [])
            loaded.update(names)
            foreign = foreign or not names
            if not param.dtype.is_floating_point and float(value) < INT_MARKER_BASE and names:
                float_into_int.append(name)
        if bool(unwritten.all()):
            params[name] = "unwritten"
        else:
            params[name] = "partial" if bool(unwritten.any()) else "altered" if foreign else "loaded"
    reshaped = {
        name: [built[name], list(param.shape)]
        for name, param in model.named_parameters()
        if name in built and list(param.shape) != built[name]
    }
    return {"loaded": sorted(loaded), "params": params, "float_into_int": sorted(float_into_int), "reshaped": reshaped}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def describe(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error)[:2000]}


# ---------------------------------------------------------------- vLLM


def vllm_setup() -> None:
    import torch  # noqa: F401
    import vllm.distributed.parallel_state  # noqa: F401
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.model_executor.model_loader  # noqa: F401
    import vllm.model_executor.models.llama_eagle3  # noqa: F401
    import vllm.v1.spec_decode.llm_base_proposer  # noqa: F401
    from vllm.model_executor.models.registry import ModelRegistry

    ModelRegistry.get_supported_archs()  # the registry's lazy imports, before the fork


def vllm_case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
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
            result["from_target"] = vllm_share_from_target(model, target_dir)
            # Two model runners read aux ids differently; config/vllm.py picks V2 for EAGLE-3 on a GPU unless a
            # feature it lacks is asked for (V1: top level, then eagle_config; V2: top level only).
            runner = "v1" if _v2_unsupported(config) else "v2"
            ids = get_eagle3_aux_layers_from_config(spec) if runner == "v2" else _v1_aux_ids(spec)
            inner = getattr(model, "model", None)
            layers = _target_layers(target_dir)
            # models/llama.py + interfaces.py: id j is captured after target layer j-1 (0: the embeddings, shown
            # as -1), for 0 <= j <= n, once each; without ids the default (2, n//2, n-3).
            chosen = ids if ids else (2, layers // 2, layers - 3)
            result["aux"] = {
                "runner": runner,
                "ids": list(ids) if ids else None,
                "outputs": sorted({j - 1 for j in chosen if 0 <= j <= layers}),
                "fc_in": _fc_in(inner),
                "uses_aux": bool(getattr(inner, "use_aux_hidden_state", True)),
            }
            result["embed_width"] = _embed_width(inner)
            result["head_rows"] = _head_rows(model)
        result["stage"] = "done"


def vllm_share_from_target(model: Any, target_dir: str) -> list[str]:
    """What the drafter takes from the target after loading: vLLM's own decision (v1/worker/gpu/spec_decode/
    eagle/utils.py, load_eagle_model), run against stand-ins of the target's embedding and head."""
    from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle_utils

    embed, head = _target_embed_and_head(target_dir)
    eagle_utils.maybe_share_target_embed(model, model.model, types.SimpleNamespace(embed_tokens=embed))
    taken = ["model.embed_tokens.weight"] if getattr(model.model, "embed_tokens", None) is embed else []
    if eagle_utils._should_share(model, "has_own_lm_head", getattr(model, "lm_head", None), head):
        taken.append("lm_head.weight")
    return taken


def _target_embed_and_head(target_dir: str) -> tuple[Any, Any]:
    import torch

    with open(os.path.join(target_dir, "config.json")) as handle:
        config = json.load(handle)
    shape = (config["vocab_size"], config["hidden_size"])
    return torch.nn.Embedding(*shape), torch.nn.Embedding(*shape)


def _v2_unsupported(config: Any) -> list[str]:
    """What the V2 model runner lacks for this configuration (config/vllm.py), device checks aside."""
    return list(config._get_v2_model_runner_unsupported_features())


def _v1_aux_ids(spec: Any) -> Any:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    runner = object.__new__(GPUModelRunner)
    runner.speculative_config = spec
    return GPUModelRunner._get_eagle3_aux_layers_from_config(runner)


# ---------------------------------------------------------------- SGLang


def sglang_setup() -> None:
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


def sglang_case(case_dir: str, target_dir: str, marked: str, result: dict[str, Any]) -> None:
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
    try:
        DefaultModelLoader.load_weights_and_postprocess(
            model, loader._get_all_weights(model_config, model), torch.device("cpu")
        )
    finally:
        observed = observe(model, markers, built)
        hot = getattr(model, "hot_token_id", None)
        head_rows = _head_rows(model)
        vocab = getattr(hf_config, "vocab_size", None)
        if hot is not None or (head_rows is not None and head_rows != vocab):
            # d2t is consumed into this attribute (hot_token_id = d2t + arange), not a parameter.
            observed["params"]["hot_token_id"] = "loaded" if hot is not None else "unwritten"
        if hot is not None:
            observed["consumed"] = sorted({n for names in markers.values() for n in names if "d2t" in n})
            observed["hot_token_id"] = {"length": int(hot.shape[0]), "dtype": str(hot.dtype), "rows": head_rows}
            if hot.dtype.is_floating_point:
                observed["float_into_int"] = sorted({*observed["float_into_int"], "hot_token_id"})
        result.update(observed)
        result["from_target"] = sglang_share_from_target(model, target_dir)
        inner = getattr(model, "model", None)
        # spec_aux_hidden_state.py: aux ids only from eagle_config.
        eagle_config = getattr(hf_config, "eagle_config", None)
        ids = eagle_config.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle_config, dict) else None
        layers = _target_layers(target_dir)
        # models/llama.py: the capture happens at loop index id + 1 < n and holds the output of layer id; the
        # default loop indices are [2, n//2, n-3].
        indices = [i + 1 for i in ids] if ids else [2, layers // 2, layers - 3]
        result["aux"] = {
            "ids": list(ids) if ids else None,
            "outputs": sorted({i - 1 for i in indices if 0 <= i < layers}),
            "fc_in": _fc_in(inner),
            "uses_aux": True,
        }
        result["embed_width"] = _embed_width(inner)
        result["head_rows"] = head_rows
    result["stage"] = "done"


def sglang_share_from_target(model: Any, target_dir: str) -> list[str]:
    """What the drafter takes from the target after loading: the EAGLE-3 branch of speculative/
    eagle_worker_v2.py, calling the drafter's own set_embed / set_embed_and_head with stand-ins of the target's."""
    embed, head = (module.weight for module in _target_embed_and_head(target_dir))
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


# ---------------------------------------------------------------- shared facts


def _target_layers(target_dir: str) -> int:
    with open(os.path.join(target_dir, "config.json")) as handle:
        return int(json.load(handle)["num_hidden_layers"])


def _fc_in(inner: Any) -> int | None:
    fc = getattr(inner, "fc", None)
    weight = getattr(fc, "weight", None)
    return int(weight.shape[1]) if weight is not None and weight.dim() == 2 else None


def _head_rows(model: Any) -> int | None:
    weight = getattr(getattr(model, "lm_head", None), "weight", None)
    return int(weight.shape[0]) if weight is not None else None


def _embed_width(inner: Any) -> int | None:
    weight = getattr(getattr(inner, "embed_tokens", None), "weight", None)
    return int(weight.shape[-1]) if weight is not None else None


ENGINES = {"vllm": (vllm_setup, vllm_case), "sglang": (sglang_setup, sglang_case)}


def run_child(run: Any, case_dir: str, target_dir: str, marked: str) -> dict[str, Any]:
    result: dict[str, Any] = {"raised": None, "stage": "start"}
    try:
        run(case_dir, target_dir, marked, result)
    except BaseException as error:  # the engine's own exception is the observation
        result["raised"] = describe(error)
        result["traceback"] = traceback.format_exc()[-3000:]
    return result


def main() -> None:
    engine, target_dir, out_dir, *cases = sys.argv[1:]
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    if engine == "vllm":
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        # Otherwise vLLM's kernel registry starts background kernel builds at import that outlive each case.
        os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
    setup, run = ENGINES[engine]
    started = time.time()
    setup()
    sys.stderr.write(f"oracle worker {engine}: engine imported in {time.time() - started:.1f}s\n")
    scratch = tempfile.mkdtemp(prefix=f"ckptdiff-oracle-{engine}-")
    try:
        for case_dir in cases:
            name = os.path.basename(case_dir.rstrip("/"))
            marked = os.path.join(scratch, name)
            started = time.time()
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                payload = json.dumps(run_child(run, case_dir, target_dir, marked), default=str).encode()
                with os.fdopen(write, "wb") as pipe:
                    pipe.write(payload)
                os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            result = json.loads(data) if data else {"raised": {"type": "WorkerDied", "message": f"status {status}"}}
            result["seconds"] = round(time.time() - started, 2)
            with open(os.path.join(out_dir, name + ".json"), "w") as handle:
                json.dump(result, handle, indent=1, sort_keys=True)
            sys.stderr.write(f"oracle worker {engine}: {name} {result['seconds']}s\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
