"""Torch checkpoints as ``torch.save`` writes them (zip archive, protocol-2 ``data.pkl``), written without torch.

``write_torch_file(path, {"fc.weight": ("BF16", [64, 192], None)})`` writes the state dict: an OrderedDict of
tensors rebuilt by ``torch._utils._rebuild_tensor_v2`` from one storage each (``archive/data/<key>``), the layout
``torch.save`` uses since 1.6. ``tests/test_torch_files.py`` checks that torch loads what this writes and that it
reads like what torch writes, so the rest of the suite needs no torch to build ``.bin``/``.pt`` inputs.
"""

from __future__ import annotations

import math
import pickle
import struct
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

#: safetensors dtype → (torch's storage class, bytes per element).
STORAGES: dict[str, tuple[str, int]] = {
    "F64": ("DoubleStorage", 8),
    "F32": ("FloatStorage", 4),
    "F16": ("HalfStorage", 2),
    "BF16": ("BFloat16Storage", 2),
    "I64": ("LongStorage", 8),
    "I32": ("IntStorage", 4),
    "I16": ("ShortStorage", 2),
    "I8": ("CharStorage", 1),
    "U8": ("ByteStorage", 1),
    "BOOL": ("BoolStorage", 1),
}

#: name → (dtype, shape, the storage's bytes or None for zeros).
TensorSpec = tuple[str, Sequence[int], "bytes | None"]


def _global(module: str, name: str) -> bytes:
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def _text(value: str) -> bytes:
    raw = value.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def _int(value: int) -> bytes:
    if 0 <= value < 256:
        return pickle.BININT1 + bytes([value])
    if -(2**31) <= value < 2**31:
        return pickle.BININT + struct.pack("<i", value)
    encoded = pickle.encode_long(value)
    return pickle.LONG1 + bytes([len(encoded)]) + encoded


def _tuple(items: Sequence[bytes]) -> bytes:
    return pickle.MARK + b"".join(items) + pickle.TUPLE


def _ordered_dict() -> bytes:
    return _global("collections", "OrderedDict") + pickle.EMPTY_TUPLE + pickle.REDUCE


def _strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def state_dict_pickle(tensors: Mapping[str, tuple[str, Sequence[int]]]) -> bytes:
    """``data.pkl``: the OrderedDict of tensors; tensor number ``i`` lives in storage ``str(i)``."""
    out = [pickle.PROTO + b"\x02", _ordered_dict(), pickle.MARK]
    for key, (name, (dtype, shape)) in enumerate(tensors.items()):
        storage = _tuple(
            [
                _text("storage"),
                _global("torch", STORAGES[dtype][0]),
                _text(str(key)),
                _text("cpu"),
                _int(math.prod(shape)),
            ]
        )
        out += [
            _text(name),
            _global("torch._utils", "_rebuild_tensor_v2"),
            pickle.MARK,
            storage + pickle.BINPERSID,
            _int(0),
            _tuple([_int(size) for size in shape]),
            _tuple([_int(stride) for stride in _strides(shape)]),
            pickle.NEWFALSE,
            _ordered_dict(),
            pickle.TUPLE,
            pickle.REDUCE,
        ]
    return b"".join([*out, pickle.SETITEMS, pickle.STOP])


def write_torch_file(path: Path, tensors: Mapping[str, TensorSpec]) -> Path:
    """A torch zip checkpoint at ``path`` holding these tensors (zeros where no bytes are given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    root = path.stem  # torch names the archive's folder after the file
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{root}/data.pkl", state_dict_pickle({n: (d, s) for n, (d, s, _) in tensors.items()}))
        archive.writestr(f"{root}/byteorder", "little")
        for key, (dtype, shape, data) in enumerate(tensors.values()):
            size = math.prod(shape) * STORAGES[dtype][1]
            if data is not None and len(data) != size:
                raise ValueError(f"tensor {key}: {len(data)} bytes for {size}")
            archive.writestr(f"{root}/data/{key}", data if data is not None else bytes(size))
        archive.writestr(f"{root}/version", "3\n")
    return path
