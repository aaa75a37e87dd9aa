"""Checkpoints on the local disk: a .safetensors file, a folder with model.safetensors, or a sharded index."""

from __future__ import annotations

import os
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import BinaryIO

from ..checkpoint import (
    INDEX_SUFFIX,
    MAX_JSON_BYTES,
    Checkpoint,
    FileInfo,
    RelativePath,
    check_json_size,
    parse_config,
    parse_index,
    tensors_from_shards,
)
from ..errors import CkptdiffError, HeaderError, IndexError_, SourceError
from ..safetensors_header import LENGTH_PREFIX_BYTES, SafetensorsHeader, parse_header, read_header_length
from . import torch_pickle
from .wanted import Wanted, first_shard, shards_after_index

CONFIG_NAME = "config.json"
SINGLE_FILE_NAME = "model.safetensors"


def read_header_file(path: Path, *, source: str | None = None) -> SafetensorsHeader:
    """Read only the header bytes of one safetensors file (never its tensor data)."""
    name = source or str(path)
    try:
        with open(path, "rb", buffering=0) as handle:  # unbuffered: not even a read-ahead of tensor data
            size = os.fstat(handle.fileno()).st_size
            length = read_header_length(_read_exactly(handle, LENGTH_PREFIX_BYTES), source=name, file_size=size)
            raw = _read_exactly(handle, length)
    except IsADirectoryError:
        raise SourceError(name, "is a folder, expected a .safetensors file") from None
    except OSError as err:
        raise SourceError(name, f"cannot read: {err.strerror or err}") from None
    if len(raw) != length:
        raise HeaderError(name, f"header truncated: {len(raw)} of {length} bytes")
    return parse_header(raw, source=name, file_size=size)


def _read_exactly(handle: BinaryIO, count: int) -> bytes:
    """``count`` bytes, or fewer at the end of the file (an unbuffered read may return less than asked)."""
    data = handle.read(count)
    while len(data) < count:
        more = handle.read(count - len(data))
        if not more:
            break
        data += more
    return data


def read_local(spec: str, path: Path, *, wanted: AbstractSet[str] | Wanted | None = None) -> Checkpoint:
    """Read a local checkpoint's metadata. With ``wanted``, read only the shards that hold those tensors."""
    if not path.exists():
        raise SourceError(spec, "no such file or folder")
    if path.is_file():
        if path.name.endswith(INDEX_SUFFIX):
            return _read_sharded(spec, path.parent, path, wanted)
        if path.suffix == ".safetensors":
            return _read_files(spec, path.parent, [path.name], config_dir=path.parent, location=path)
        if path.name.endswith(torch_pickle.TORCH_INDEX_SUFFIX):
            names = Wanted.of(wanted).names if wanted is not None else None
            return torch_pickle.read_torch_index(spec, path, config=_read_config(path.parent), wanted=names)
        if path.suffix in torch_pickle.TORCH_SUFFIXES:
            return torch_pickle.read_torch_files(
                spec, path.parent, [path.name], config=_read_config(path.parent), location=path
            )
        raise SourceError(str(path), "not a .safetensors file or a *.safetensors.index.json index")
    if not path.is_dir():
        raise SourceError(str(path), "not a regular file or folder (a device, pipe or socket?)")
    if (path / SINGLE_FILE_NAME).is_file():
        return _read_files(spec, path, [SINGLE_FILE_NAME], config_dir=path, location=path)
    indexes = sorted(p for p in path.iterdir() if p.name.endswith(INDEX_SUFFIX))
    if len(indexes) > 1:
        preferred = path / ("model" + INDEX_SUFFIX)
        if preferred not in indexes:
            names = ", ".join(p.name for p in indexes)
            raise SourceError(str(path), f"several indexes ({names}); name the one to use")
        indexes = [preferred]
    if indexes:
        return _read_sharded(spec, path, indexes[0], wanted)
    loose = sorted(p.name for p in path.iterdir() if p.suffix == ".safetensors" and p.is_file())
    if loose:
        # No index: every safetensors file in the folder is a shard, and no tensor may appear twice.
        return _read_files(spec, path, loose, config_dir=path, location=path)
    # Legacy torch weights (pytorch_model.bin or its sharded index), read without running pickle code.
    if (path / torch_pickle.TORCH_INDEX_NAME).is_file():
        return torch_pickle.read_torch_index(spec, path / torch_pickle.TORCH_INDEX_NAME, config=_read_config(path))
    if (path / torch_pickle.TORCH_SINGLE_FILE_NAME).is_file():
        names = [torch_pickle.TORCH_SINGLE_FILE_NAME]
        return torch_pickle.read_torch_files(spec, path, names, config=_read_config(path), location=path)
    present = sorted(p.name for p in path.iterdir())[:6]
    hint = f"it holds: {', '.join(present)}" if present else "it is empty"
    raise SourceError(str(path), "no safetensors weights (model.safetensors or *.safetensors.index.json)", hint)


def _read_config(folder: Path) -> dict | None:
    config_path = folder / CONFIG_NAME
    if not config_path.is_file():
        return None
    return parse_config(_read_json_file(config_path, what="config.json"), config_name=str(config_path))


def _read_json_file(path: Path, *, what: str, error: type[CkptdiffError] = CkptdiffError) -> bytes:
    """A config.json or index, refused unread when it is bigger than any real one."""
    try:
        with open(path, "rb") as handle:
            check_json_size(os.fstat(handle.fileno()).st_size, str(path), what=what, error=error)
            return handle.read(MAX_JSON_BYTES + 1)
    except OSError as err:
        raise SourceError(str(path), f"cannot read: {err.strerror or err}") from None


def _read_files(spec: str, folder: Path, names: list[RelativePath], *, config_dir: Path, location: Path) -> Checkpoint:
    headers = {name: read_header_file(folder / name) for name in names}
    return Checkpoint(
        spec=spec,
        kind="local",
        location=str(location),
        revision=None,
        tensors=tensors_from_shards(headers, index_name=str(folder)),
        config=_read_config(config_dir),
        files=tuple(FileInfo(name, headers[name].file_size) for name in names),
        metadata={name: headers[name].metadata for name in names},
    )


def _read_sharded(spec: str, folder: Path, index_path: Path, wanted: AbstractSet[str] | Wanted | None) -> Checkpoint:
    index_name = str(index_path)
    headers: dict[RelativePath, SafetensorsHeader] = {}
    first = None
    if wanted is not None:
        wanted = Wanted.of(wanted)
        first = first_shard((p.name for p in folder.iterdir()), index_path.name)
        if first is not None and (folder / first).is_file():
            headers[first] = read_header_file(folder / first)
            if wanted.met_by(headers[first].tensors.keys()):  # the index is not needed
                return _sharded_checkpoint(spec, folder, headers, None, index_name)
    raw = _read_json_file(index_path, what="index", error=IndexError_)
    weight_map = parse_index(raw, index_name=index_name)
    shards = sorted(set(weight_map.values()))
    if wanted is not None:
        shards = shards_after_index(wanted, weight_map, first)
        weight_map = {name: file for name, file in weight_map.items() if file in shards}
    for shard in shards:
        shard_path = folder / shard
        if not shard_path.is_file():
            raise IndexError_(index_name, f"shard {shard} listed in the index is missing")
        if shard not in headers:
            headers[shard] = read_header_file(shard_path)
    headers = {shard: headers[shard] for shard in shards}
    return _sharded_checkpoint(spec, folder, headers, weight_map, index_name)


def _sharded_checkpoint(
    spec: str,
    folder: Path,
    headers: dict[RelativePath, SafetensorsHeader],
    weight_map: dict[str, RelativePath] | None,
    index_name: str,
) -> Checkpoint:
    shards = sorted(headers)
    return Checkpoint(
        spec=spec,
        kind="local",
        location=str(folder),
        revision=None,
        tensors=tensors_from_shards(headers, weight_map=weight_map, index_name=index_name),
        config=_read_config(folder),
        files=tuple(FileInfo(shard, headers[shard].file_size) for shard in shards),
        metadata={shard: headers[shard].metadata for shard in shards},
    )
