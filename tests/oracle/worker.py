"""Runs inside one engine's virtual environment: each case through the engine's own EAGLE-3 drafter loader.

    <engine-venv>/bin/python worker.py ENGINE OUT_DIR CASE_DIR::TARGET_DIR...

How each engine is driven is in worker_<engine>.py (its setup() and case()). Imports the engine once, then
forks one child per case (so no state leaks between cases) and writes OUT_DIR/<case>.json. Only the standard
library, torch, safetensors and the engine are used here: this file never imports ckptdiff.

Per case: a marker copy of the checkpoint (floating tensor k filled with the k-th of FLOAT_MARKERS, integer
tensors with 1,000,000 + k), every parameter of the drafter the engine builds filled with NaN (integers with
a sentinel), then the engine's load path. Afterwards a parameter holding marker k was loaded from tensor k;
one still all NaN was never written; one partly NaN was partly written (one of q/k/v); one holding values
that are no tensor's marker was padded or converted with loss ("altered").
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
import traceback
from typing import Any

INT_SENTINEL = -7_777_777
INT_MARKER_BASE = 1_000_000
#: One distinct value per tensor, exact in every floating type a checkpoint may use (FP8 e5m2 and e4m3 too):
#: +-(1 + m/4) * 2**e, whole numbers first (so one cast into an integer parameter still shows). 72 a case.
FLOAT_MARKERS = sorted(
    (sign * (1 + m / 4) * 2**e for e in range(9) for m in range(4) for sign in (1, -1)),
    key=lambda v: (v != int(v), abs(v), v < 0),
)


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
            if k > len(FLOAT_MARKERS):
                raise ValueError(f"{case_dir} has more than {len(FLOAT_MARKERS)} tensors: too many to mark")
            dtype = dtypes[meta["dtype"]]
            if dtype == torch.bool:
                # A vocabulary mask (t2d): all True, so no engine rejects it; it carries no marker.
                tensors[name] = torch.ones(meta["shape"], dtype=dtype)
                continue
            value = FLOAT_MARKERS[k - 1] if dtype.is_floating_point else float(INT_MARKER_BASE + k)
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


def tracking(load_weights: Any, result: dict[str, Any], markers: dict[float, list[str]]) -> Any:
    """``load_weights`` that records in ``result["loading"]`` the checkpoint tensor it was handed last (the tensor a
    raise inside it is about), known by its marker value, so a loader that renames names on the way is followed
    too (wrap every level that iterates lazily: the innermost one sets it last)."""

    def track(weights: Any) -> Any:
        for name, tensor in weights:
            result["loading"] = _marked_name(tensor, markers) or name
            yield name, tensor

    def load(*args: Any, **kwargs: Any) -> Any:
        at = next((i for i, a in enumerate(args) if not isinstance(a, (str, bytes)) and hasattr(a, "__iter__")), None)
        if at is not None:
            args = (*args[:at], track(args[at]), *args[at + 1 :])
        return load_weights(*args, **kwargs)

    return load


def _marked_name(tensor: Any, markers: dict[float, list[str]]) -> str | None:
    try:
        if tensor.numel() == 0 or tensor.dtype.is_complex:
            return None
        names = markers.get(float(tensor.reshape(-1)[0].double()), [])
    except Exception:  # not a tensor this can read a marker from
        return None
    return names[0] if len(names) == 1 else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def describe(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error)[:2000]}


def target_layers(target_dir: str) -> int:
    with open(os.path.join(target_dir, "config.json")) as handle:
        return int(json.load(handle)["num_hidden_layers"])


def fc_in_width(inner: Any) -> int | None:
    fc = getattr(inner, "fc", None)
    weight = getattr(fc, "weight", None)
    return int(weight.shape[1]) if weight is not None and weight.dim() == 2 else None


def head_rows(model: Any) -> int | None:
    weight = getattr(getattr(model, "lm_head", None), "weight", None)
    return int(weight.shape[0]) if weight is not None else None


def embed_width(inner: Any) -> int | None:
    weight = getattr(getattr(inner, "embed_tokens", None), "weight", None)
    return int(weight.shape[-1]) if weight is not None else None


def target_embed_and_head(target_dir: str) -> tuple[Any, Any]:
    import torch

    with open(os.path.join(target_dir, "config.json")) as handle:
        config = json.load(handle)
    shape = (config["vocab_size"], config["hidden_size"])
    return torch.nn.Embedding(*shape), torch.nn.Embedding(*shape)


def run_child(run: Any, case_dir: str, target_dir: str, marked: str) -> dict[str, Any]:
    result: dict[str, Any] = {"raised": None, "stage": "start"}
    try:
        run(case_dir, target_dir, marked, result)
    except BaseException as error:  # the engine's own exception is the observation
        result["raised"] = describe(error)
        result["traceback"] = traceback.format_exc()[-3000:]
    return result


def main() -> None:
    engine, out_dir, *pairs = sys.argv[1:]
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    driver = importlib.import_module(f"worker_{engine}")
    setup, run = driver.setup, driver.case
    started = time.time()
    # The targets' own classes, imported once before the forks (else every case imports its target's module).
    setup(sorted({target_architecture(pair.split("::")[1]) for pair in pairs}))
    sys.stderr.write(f"oracle worker {engine}: engine imported in {time.time() - started:.1f}s\n")
    scratch = tempfile.mkdtemp(prefix=f"ckptdiff-oracle-{engine}-")
    try:
        for pair in pairs:
            case_dir, target_dir = pair.split("::")
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


def stub_layers(count: int, hidden: int) -> Any:
    """Stand-ins for a target's decoder layers: layer i returns hidden states of value i + 1 and a zero residual
    (whatever it is called with), so a captured state's value says after which layer it was taken (0: the
    embeddings, which the trace feeds as zeros)."""
    import torch

    class StubLayer(torch.nn.Module):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index
            self.use_sequence_parallel_moe = False

        def forward(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            tokens = next(
                (a.shape[0] for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.dim() >= 1), 2
            )
            return torch.full((tokens, hidden), float(self.index + 1)), torch.zeros((tokens, hidden))

    return torch.nn.ModuleList([StubLayer(i) for i in range(count)])


def stub_norm() -> Any:
    import torch

    class StubNorm(torch.nn.Module):
        def forward(self, hidden: Any, residual: Any = None, *_: Any, **__: Any) -> Any:
            return hidden if residual is None else (hidden, residual)

    return StubNorm()


def traced_outputs(aux_states: Any) -> list[int]:
    """The target layers whose outputs the captured states are (-1: the embeddings), from the stubs' values."""
    return sorted({int(round(float(state.reshape(-1)[0]))) - 1 for state in aux_states})


def target_architecture(target_dir: str) -> str:
    return str(target_config_json(target_dir)["architectures"][0])


def target_config_json(target_dir: str) -> dict[str, Any]:
    with open(os.path.join(target_dir, "config.json")) as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


if __name__ == "__main__":
    main()
