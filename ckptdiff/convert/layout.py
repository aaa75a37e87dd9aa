"""Where each output tensor goes: the shard files, each one's safetensors header, every tensor's byte offsets.

Shards are the source's (each tensor in the file its input tensor came from, under the same file names; a
grafted tensor joins the last), or, with ``--max-shard-size``, filled in order up to that size and named
``model-0000i-of-0000N.safetensors``. A header is the safetensors format's: an 8-byte little-endian length,
then JSON (``__metadata__`` first, tensors in data order, offsets relative to the data), padded with spaces
to a multiple of 8, as the reference writer does.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from ..dtypes import DTYPE_BITS
from ..errors import CkptdiffError


class Placed(Protocol):
    """What the layout needs of a planned tensor (:class:`.plan.Placed`)."""

    @property
    def name(self) -> str: ...

    @property
    def dtype(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def file(self) -> str: ...

    @property
    def nbytes(self) -> int: ...


SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
METADATA = {"format": "pt"}


@dataclass(frozen=True)
class Shard:
    file: str
    header: bytes  # the 8-byte length and the padded JSON
    names: tuple[str, ...]
    size: int  # the whole file's

    @property
    def data_start(self) -> int:
        return len(self.header)


@dataclass(frozen=True)
class ShardLayout:
    shards: tuple[Shard, ...]
    file_of: dict[str, str]
    #: Each tensor's [begin, end) in its file, absolute (as ckptdiff's TensorInfo keeps them).
    offsets: dict[str, tuple[int, int]]
    indexed: bool  # an index is written (more than one shard)

    def index(self) -> dict[str, Any]:
        total = sum(end - begin for begin, end in self.offsets.values())
        return {"metadata": {"total_size": total}, "weight_map": dict(sorted(self.file_of.items()))}


def parse_size(text: str) -> int:
    """``--max-shard-size``: bytes, or a number with KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB."""
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}..."
    found = re.fullmatch(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([KMGT]i?B)?\s*", text, re.IGNORECASE)  # 400 digits were inf
    if found is None:
        raise CkptdiffError("--max-shard-size", f"{shown} is not a size (e.g. 5GB, 500MiB, 1000000)")
    number, unit = Fraction(found[1]), (found[2] or "").upper()  # exact: 4.1MB is 4100000 bytes, not 4099999.99…
    power = "KMGT".index(unit[0]) + 1 if unit else 0
    size = number * ((1024 if "I" in unit else 1000) ** power)
    if size.denominator != 1:  # 1.5 (bytes) was 1 byte
        raise CkptdiffError("--max-shard-size", f"{shown} is not a whole number of bytes")
    if size <= 0:
        raise CkptdiffError("--max-shard-size", f"{shown} is not a positive size")
    return int(size)


def nbytes(dtype: str, shape: Sequence[int]) -> int:
    return math.prod(shape) * DTYPE_BITS[dtype] // 8


def lay_out(tensors: Sequence[Placed], max_shard_size: int | None = None) -> ShardLayout:
    """The output's shards, headers and offsets for these tensors (in this order within each shard)."""
    groups: dict[str, list[Placed]] = {}
    if max_shard_size is None:
        for tensor in tensors:
            groups.setdefault(tensor.file, []).append(tensor)
    else:
        current: list[Placed] = []
        size = 0
        packed: list[list[Placed]] = []
        for tensor in tensors:
            if current and size + tensor.nbytes > max_shard_size:
                packed.append(current)
                current, size = [], 0
            current.append(tensor)
            size += tensor.nbytes
        if current or not packed:
            packed.append(current)
        count = len(packed)
        names = (
            [SINGLE_FILE] if count == 1 else [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]
        )
        groups = dict(zip(names, packed))
    shards: list[Shard] = []
    file_of: dict[str, str] = {}
    offsets: dict[str, tuple[int, int]] = {}
    for file in sorted(groups):
        members = groups[file]
        header: dict[str, Any] = {"__metadata__": METADATA}
        position = 0
        for tensor in members:
            header[tensor.name] = {
                "dtype": tensor.dtype,
                "shape": list(tensor.shape),
                "data_offsets": [position, position + tensor.nbytes],
            }
            position += tensor.nbytes
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        prefix = len(raw).to_bytes(8, "little") + raw
        for tensor in members:
            begin, end = header[tensor.name]["data_offsets"]
            offsets[tensor.name] = (len(prefix) + begin, len(prefix) + end)
            file_of[tensor.name] = file
        shards.append(Shard(file, prefix, tuple(t.name for t in members), len(prefix) + position))
    return ShardLayout(tuple(shards), file_of, offsets, indexed=len(shards) > 1)
