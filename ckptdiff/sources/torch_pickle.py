"""Torch zip checkpoints (``pytorch_model.bin``, ``*.pt``) read without torch and without running pickle code.

``torch.save`` writes a zip archive: ``<root>/data.pkl`` (a pickle describing the state dict) and one entry
``<root>/data/<key>`` per storage holding its raw bytes. The pickle is the dangerous part: unpickling can call
any importable function. Here it runs through a restricted unpickler whose ``find_class`` hands out only inert
stand-ins for the tensor-rebuild functions, storage types and dtypes, and refuses every other global by name,
so nothing in the file is ever executed. Storage bytes are never read: each storage's position inside the
archive comes from its zip local header (30 bytes plus its name), which is all a tensor's offsets need.

``TensorInfo.data_offsets`` of a torch tensor are absolute byte offsets in the archive file: the storage
entry's data start plus ``storage_offset × itemsize``, spanning ``numel × itemsize`` bytes. For a contiguous
tensor that is exactly where its bytes live; for a strided view it is the span's start and size only.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint import TORCH_INDEX_SUFFIX as TORCH_INDEX_SUFFIX  # re-exported: where values.readers looks
from ..checkpoint import TORCH_SUFFIXES as TORCH_SUFFIXES
from ..checkpoint import RelativePath, TensorInfo
from ..dtypes import DTYPE_BITS, STORAGE_DTYPES, TORCH_DTYPES, TORCH_WITHOUT_SAFETENSORS_DTYPE, DType
from ..errors import CkptdiffError, SourceError, printable_name, quoted_name
from .base import ReadHandle, open_regular
from .pickle_bounds import check_expansion

#: The names ``transformers`` gives a single archive and the sharded index it writes next to them.
TORCH_SINGLE_FILE_NAME = "pytorch_model.bin"
TORCH_INDEX_NAME = "pytorch_model.bin.index.json"

#: A pickle of tensor metadata is small (about 100 bytes a tensor): anything bigger is not a state dict.
MAX_PICKLE_BYTES = 64 * 1024 * 1024
#: A deflated data.pkl inflating more than this many times over is a zip bomb, not a pickle.
MAX_INFLATE_RATIO = 200
#: A central directory (about 100 bytes an entry) bigger than this is not a torch checkpoint's.
MAX_CENTRAL_DIRECTORY_BYTES = 64 * 1024 * 1024
#: Keys under which training scripts nest the state dict, in the order one is chosen when several hold one.
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "module", "net", "network", "ema", "model_ema")
#: How deep nested checkpoints are searched ({"checkpoint": {"state_dict": ...}} is two).
MAX_NESTING = 3


# --- inert stand-ins for what the pickle may name ------------------------------------------------------


class _PickleRefused(Exception):
    """Raised inside the unpickler; turned into a CkptdiffError naming the archive."""


class _NoBuild:
    """Refuses the BUILD opcode, which would otherwise write straight into a stand-in's ``__dict__``, past every
    check of the unpickler."""

    def __setstate__(self, state: Any) -> None:
        raise _PickleRefused(f"the pickle overwrites the fields of a {type(self).__name__} (BUILD); torch never does")


@dataclass(frozen=True)
class _StorageType(_NoBuild):
    """Stands in for ``torch.FloatStorage`` & co.; ``dtype`` is None for ``torch.storage.UntypedStorage``."""

    name: str
    dtype: DType | None


@dataclass(frozen=True)
class _DTypeGlobal(_NoBuild):
    """Stands in for ``torch.float8_e4m3fn`` & co."""

    name: str
    dtype: DType | None


@dataclass(frozen=True)
class StorageRef(_NoBuild):
    """A storage the pickle points at: its zip entry key and, for typed storages, its dtype."""

    key: str
    dtype: DType | None
    numel: int  # elements for typed storages, bytes for untyped ones
    location: str


@dataclass(frozen=True)
class TensorRecord(_NoBuild):
    """What ``_rebuild_tensor_v2/v3`` would have built, kept as plain numbers."""

    storage: StorageRef
    dtype: DType
    storage_offset: int  # in elements
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def itemsize(self) -> int:
        return DTYPE_BITS[self.dtype] // 8

    @property
    def contiguous(self) -> bool:
        expected = 1
        for dim, step in zip(reversed(self.shape), reversed(self.stride)):
            if dim != 1 and step != expected:
                return False
            expected *= dim
        return True


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise _PickleRefused(f"{what} {value!r} is not a tuple of integers")
    return tuple(value)


def _rebuild_tensor(
    storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any, dtype: DType | None = None
) -> TensorRecord:
    if not isinstance(storage, StorageRef):
        raise _PickleRefused("a tensor is rebuilt from something that is not a storage")
    if not isinstance(offset, int) or offset < 0:
        raise _PickleRefused(f"storage offset {offset!r} is not a non-negative integer")
    resolved = dtype or storage.dtype
    if resolved is None:
        raise _PickleRefused(f"storage {storage.key} has no dtype")
    shape, steps = _ints(size, "shape"), _ints(stride, "stride")
    if any(dim < 0 for dim in shape) or len(shape) != len(steps):
        raise _PickleRefused(f"shape {shape} / stride {steps} do not describe a tensor")
    return TensorRecord(storage, resolved, offset, shape, steps)


def _rebuild_tensor_v2(storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> TensorRecord:
    return _rebuild_tensor(storage, offset, size, stride)


def _rebuild_tensor_v3(
    storage: Any, offset: Any, size: Any, stride: Any, _grad: Any, _hooks: Any, dtype: Any, *rest: Any
) -> TensorRecord:
    if not isinstance(dtype, _DTypeGlobal) or dtype.dtype is None:
        raise _PickleRefused(f"tensor dtype {dtype!r} has no safetensors equivalent")
    return _rebuild_tensor(storage, offset, size, stride, dtype=dtype.dtype)


def _rebuild_parameter(data: Any, *_rest: Any) -> TensorRecord:
    if not isinstance(data, TensorRecord):
        raise _PickleRefused("a parameter wraps something that is not a tensor")
    return data


_REBUILDERS: Mapping[tuple[str, str], Callable[..., Any]] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,  # a plain container; nothing runs
}


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl`` into TensorRecords; every global outside the allowlist is refused."""

    def find_class(self, module: str, name: str) -> Any:
        found = _REBUILDERS.get((module, name))
        if found is not None:
            return found
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name, STORAGE_DTYPES[name])
        if (module, name) in (("torch", "UntypedStorage"), ("torch.storage", "UntypedStorage")):
            return _StorageType(name, None)
        if module == "torch" and (name in TORCH_DTYPES or name in TORCH_WITHOUT_SAFETENSORS_DTYPE):
            return _DTypeGlobal(name, TORCH_DTYPES.get(name))
        if module == "torch" and name.endswith("Storage"):
            raise _PickleRefused(f"storage type torch.{name} has no safetensors dtype")
        raise _PickleRefused(f"refuses to load global {module}.{name} (only tensor and storage types are allowed)")

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _PickleRefused(f"unexpected persistent id {str(pid)[:60]}")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise _PickleRefused(f"persistent id names {storage_type!r}, not a storage type")
        if not isinstance(key, str) or not key or "/" in key or ".." in key:
            raise _PickleRefused(f"storage key {quoted_name(key)} is not a plain name")
        if not isinstance(numel, int) or numel < 0:
            raise _PickleRefused(f"storage size {numel!r} is not a count")
        return StorageRef(key, storage_type.dtype, numel, str(location))


# --- reading an archive ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchArchive:
    """The tensors of one torch zip checkpoint and where each storage's bytes start in the file."""

    path: Path
    records: Mapping[str, TensorRecord]
    storage_starts: Mapping[str, int]  # storage key → absolute offset of its first byte
    big_endian: bool
    file_size: int

    def tensor_infos(self, file: RelativePath) -> dict[str, TensorInfo]:
        infos = {}
        for name, record in self.records.items():
            begin = self.storage_starts[record.storage.key] + record.storage_offset * record.itemsize
            infos[name] = TensorInfo(
                name, record.dtype, record.shape, file, (begin, begin + record.numel * record.itemsize)
            )
        return infos


_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")


def read_archive(path: Path, *, source: str | None = None) -> TorchArchive:
    """Read a torch zip checkpoint's tensor metadata: the pickle through the restricted unpickler, no data."""
    name = source or str(path)
    try:
        with open_regular(path, name, expected="a torch checkpoint file") as handle:
            return read_archive_from(handle, name, os.fstat(handle.fileno()).st_size, path=path)
    except OSError as err:
        raise SourceError(name, f"cannot read: {err.strerror or err}") from None


def read_archive_from(handle: ReadHandle, name: str, file_size: int, *, path: Path | None = None) -> TorchArchive:
    """The same from any seekable handle (a local file, or a remote one read through ranges)."""
    if not zipfile.is_zipfile(handle):
        handle.seek(0)
        _refuse_non_zip(name, handle.read(len(_LEGACY_MAGIC)))
    _check_central_directory(handle, file_size, name)
    handle.seek(0)
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, ValueError) as err:
        raise SourceError(name, f"not a readable torch zip checkpoint ({err})") from None
    with archive:
        return _read_zip(path or Path(name), name, archive, handle, file_size)


def _refuse_non_zip(name: str, start: bytes) -> None:
    if start.startswith(_LEGACY_MAGIC) or start[:1] == b"\x80":
        raise SourceError(
            name,
            "legacy (pre-1.6, non-zip) torch format is not supported",
            "re-save it with torch.save(..., _use_new_zipfile_serialization=True) or convert it to safetensors",
        )
    raise SourceError(name, "not a torch zip checkpoint (no zip archive with data.pkl)")


def _read_zip(path: Path, name: str, archive: zipfile.ZipFile, handle: ReadHandle, file_size: int) -> TorchArchive:
    entries = {info.filename: info for info in archive.infolist()}
    pickles = [entry for entry in entries if entry.endswith("/data.pkl") and entry.count("/") == 1]
    if len(pickles) != 1:
        found = "no" if not pickles else f"{len(pickles)}"
        raise SourceError(name, f"not a torch zip checkpoint ({found} <root>/data.pkl entries)")
    root = pickles[0][: -len("data.pkl")]
    raw = _read_pickle_entry(archive, entries[pickles[0]], name, file_size)
    check_expansion(raw, name)
    try:
        loaded = _MetadataUnpickler(io.BytesIO(raw)).load()
    except _PickleRefused as refused:
        raise CkptdiffError(name, str(refused), "ckptdiff never runs code from a checkpoint") from None
    except Exception as err:  # a malformed pickle: any error of the pickle machine
        raise SourceError(name, f"data.pkl is not a readable tensor pickle ({type(err).__name__}: {err})") from None
    records = _state_dict(loaded, name)
    byteorder = entries.get(root + "byteorder")
    if byteorder is not None and byteorder.file_size > 16:
        raise SourceError(name, f"its byteorder entry is {byteorder.file_size} bytes; torch writes 'little' or 'big'")
    big_endian = byteorder is not None and archive.read(byteorder).strip() == b"big"
    starts: dict[str, int] = {}
    for record in records.values():
        key = record.storage.key
        if key in starts:
            continue
        entry = entries.get(f"{root}data/{key}")
        if entry is None:
            raise SourceError(name, f"storage {printable_name(key)} named by the pickle is missing from the archive")
        starts[key] = _data_start(entry, handle, name)
        needed = (record.storage_offset + _span(record)) * record.itemsize
        if needed > entry.file_size:
            raise SourceError(
                name, f"storage {printable_name(key)} holds {entry.file_size} bytes, a tensor needs {needed}"
            )
    return TorchArchive(path, records, starts, big_endian, file_size)


def _span(record: TensorRecord) -> int:
    """Elements from the first to one past the last element the tensor touches."""
    if record.numel == 0:
        return 0
    return 1 + sum((dim - 1) * step for dim, step in zip(record.shape, record.stride))


def _data_start(entry: zipfile.ZipInfo, handle: ReadHandle, name: str) -> int:
    """Where an entry's bytes start: after its local header, whose extra field may differ from the central one."""
    if entry.compress_type != zipfile.ZIP_STORED:
        raise SourceError(name, f"storage {entry.filename} is compressed; torch writes storages uncompressed")
    handle.seek(entry.header_offset)
    header = handle.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise SourceError(name, f"zip entry {entry.filename} has no local header")
    fields = _LOCAL_HEADER.unpack(header)
    name_length: int = fields[9]
    extra_length: int = fields[10]
    return entry.header_offset + _LOCAL_HEADER.size + name_length + extra_length


def _read_pickle_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, file_size: int) -> bytes:
    """data.pkl, read no further than its declared size: a size beyond the file or the cap, a deflate ratio of
    a zip bomb, or more bytes than declared are refused before they are read."""
    if info.file_size > MAX_PICKLE_BYTES:
        raise SourceError(name, f"data.pkl is {info.file_size} bytes, too large for tensor metadata")
    if info.compress_size > file_size:
        raise SourceError(name, f"data.pkl claims {info.compress_size} bytes in a {file_size}-byte file")
    if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_INFLATE_RATIO * max(info.compress_size, 1):
        raise SourceError(
            name, f"data.pkl inflates {info.compress_size} bytes to {info.file_size}: a zip bomb, not tensor metadata"
        )
    data = bytearray()
    try:
        with archive.open(info) as entry:
            while chunk := entry.read(min(1024 * 1024, info.file_size + 1 - len(data)) or 1):
                data += chunk
                if len(data) > info.file_size:
                    raise SourceError(name, f"data.pkl holds more than the {info.file_size} bytes it declares")
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as err:
        raise SourceError(name, f"data.pkl cannot be read from the archive ({err})") from None
    return bytes(data)


_EOCD = struct.Struct("<4sHHHHIIH")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_ZIP64_EOCD = struct.Struct("<4sQHHIIQQQQ")


def _check_central_directory(handle: ReadHandle, file_size: int, name: str) -> None:
    """Refuse a central directory whose claimed size is beyond the file or the cap, before zipfile reads it whole."""
    tail_size = min(file_size, 65535 + _EOCD.size + _ZIP64_LOCATOR.size)
    handle.seek(file_size - tail_size)
    tail = handle.read(tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        return  # zipfile says what is wrong
    cd_size = _EOCD.unpack_from(tail, at)[5]
    locator_at = at - _ZIP64_LOCATOR.size
    if locator_at >= 0 and tail[locator_at : locator_at + 4] == b"PK\x06\x07":
        record_offset = _ZIP64_LOCATOR.unpack_from(tail, locator_at)[2]
        if record_offset + _ZIP64_EOCD.size <= file_size:
            handle.seek(record_offset)
            record = handle.read(_ZIP64_EOCD.size)
            if len(record) == _ZIP64_EOCD.size and record[:4] == b"PK\x06\x06":
                cd_size = _ZIP64_EOCD.unpack(record)[8]
    if cd_size > min(file_size, MAX_CENTRAL_DIRECTORY_BYTES):
        raise SourceError(name, f"its zip central directory claims {cd_size} bytes in a {file_size}-byte file")


def _tensors_in(obj: Any) -> dict[str, TensorRecord] | None:
    """A state dict: string keys, tensors as values, and no tensors nested deeper (those make it a checkpoint
    holding state dicts, as in ``{"model": sd, "best_loss": t}``, never a one-tensor state dict)."""
    if not (isinstance(obj, dict) and obj and all(isinstance(k, str) for k in obj)):
        return None
    tensors = {k: v for k, v in obj.items() if isinstance(v, TensorRecord)}
    if not tensors or any(_holds_tensors(v) for v in obj.values() if not isinstance(v, TensorRecord)):
        return None
    return tensors


def _holds_tensors(obj: Any, depth: int = 0) -> bool:
    if isinstance(obj, TensorRecord):
        return True
    if depth >= MAX_NESTING:
        return False
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return any(_holds_tensors(v, depth + 1) for v in values)


def _find_state_dict(obj: Any, depth: int = 0) -> dict[str, TensorRecord] | None:
    """The state dict itself, or one under a usual key (``state_dict``, ``model``, ``module``, ``ema``...),
    searched a few levels down, the keys tried in STATE_DICT_KEYS order."""
    direct = _tensors_in(obj)
    if direct is not None or depth >= MAX_NESTING or not isinstance(obj, dict):
        return direct
    for key in STATE_DICT_KEYS:
        found = _find_state_dict(obj.get(key), depth + 1)
        if found is not None:
            return found
    return None


def _state_dict(loaded: Any, name: str) -> dict[str, TensorRecord]:
    """The state dict the checkpoint holds, or a refusal naming the keys it holds instead."""
    found = _find_state_dict(loaded)
    if found is not None:
        _check_names(found, name)
        return found
    if isinstance(loaded, dict):
        keys = sorted(ascii(k)[1:-1] if isinstance(k, str) else repr(k) for k in loaded)
        shown = ", ".join(keys[:12]) + (f", … ({len(keys)} keys)" if len(keys) > 12 else "")
        usual = ", ".join(STATE_DICT_KEYS)
        raise SourceError(
            name,
            f"holds no state dict of tensors ckptdiff can find (top-level keys: {shown or 'none'})",
            f"save the state dict itself, or under one of: {usual}",
        )
    held = "a single tensor" if isinstance(loaded, TensorRecord) else f"a {type(loaded).__name__}"
    raise SourceError(name, f"holds {held}, not a state dict of tensors", "save a dict of named tensors")


def _check_names(tensors: Mapping[str, TensorRecord], name: str) -> None:
    """Tensor names as safetensors allows them: printable, valid Unicode (a lone surrogate is not)."""
    for tensor in tensors:
        if not tensor.isprintable() or any("\ud800" <= c <= "\udfff" for c in tensor):
            raise SourceError(name, f"tensor name {quoted_name(tensor)} has control, unprintable or invalid characters")
