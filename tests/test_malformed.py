"""Hostile and broken checkpoints: each is refused with one line naming the file and the rule it breaks.

Every case is a small file built on the fly (valid bases from ``fixtures.generate``, then broken). Each is read
twice: through the library (``resolve``: the right ``CkptdiffError`` subclass, message names file and rule) and
through the real ``ckptdiff`` command (exit 2, exactly one line on stderr, no traceback).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ckptdiff.errors import CkptdiffError, HeaderError, IndexError_, SourceError
from ckptdiff.sources import resolve
from fixtures.generate import write_safetensors

REPO = Path(__file__).resolve().parent.parent
GOOD = REPO / "fixtures" / "kimi-k2-eagle3-published"
U64_MAX = 2**64 - 1


# --- builders: each writes something broken under a folder and returns the path to hand to ckptdiff ----------


def raw_file(folder: Path, content: bytes, name: str = "bad.safetensors") -> Path:
    path = folder / name
    path.write_bytes(content)
    return path


def with_prefix(folder: Path, header: bytes, *, data: int = 0, length: int | None = None) -> Path:
    """A file whose 8-byte prefix is ``length`` (default: the header's real length), then header, then data."""
    prefix = (len(header) if length is None else length).to_bytes(8, "little")
    return raw_file(folder, prefix + header + bytes(data))


def header_file(folder: Path, header: dict[str, Any], *, data: int | None = None) -> Path:
    """A file with this JSON header (padded like writers do) and ``data`` bytes (default: what offsets need)."""
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    if data is None:
        ends = [e["data_offsets"][1] for k, e in header.items() if k != "__metadata__" and _has_offsets(e)]
        data = max(ends, default=0)
    return with_prefix(folder, raw, data=data)


def _has_offsets(entry: Any) -> bool:
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    return isinstance(offsets, list) and len(offsets) == 2 and isinstance(offsets[1], int)


def one_tensor(**fields: Any) -> Callable[[Path], Path]:
    """A one-tensor header: an F32 [2, 2] weight with some fields replaced (None removes a field)."""
    entry = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]} | fields
    entry = {k: v for k, v in entry.items() if v is not None}
    return lambda folder: header_file(folder, {"w": entry})


def tensors(*entries: tuple[str, str, list[int], list[int]], data: int | None = None, **extra: Any):
    """A header from (name, dtype, shape, offsets) rows, plus extra top-level keys (``__metadata__``)."""
    header = dict(extra) | {n: {"dtype": d, "shape": s, "data_offsets": o} for n, d, s, o in entries}
    return lambda folder: header_file(folder, header, data=data)


def sharded(index: dict[str, Any] | bytes, shards: dict[str, list[tuple[str, str, list[int]]]]):
    """A sharded folder: an index (dict or raw bytes) and valid shards with these tensors."""

    def build(folder: Path) -> Path:
        for shard, specs in shards.items():
            write_safetensors(folder / shard, specs, fill="zeros")
        raw = index if isinstance(index, bytes) else json.dumps(index).encode()
        (folder / "model.safetensors.index.json").write_bytes(raw)
        return folder

    return build


def with_config(raw: bytes):
    """A valid single-file checkpoint folder whose config.json holds ``raw``."""

    def build(folder: Path) -> Path:
        write_safetensors(folder / "model.safetensors", [("w", "F32", [2, 2])], fill="zeros")
        (folder / "config.json").write_bytes(raw)
        return folder

    return build


INDEX = "model.safetensors.index.json"
W = [("w", "F32", [2])]
V = [("v", "F32", [2])]
SHARDS = {"a.safetensors": W, "b.safetensors": V}


def index_of(weight_map: Any) -> dict[str, Any]:
    return {"metadata": {"total_size": 16}, "weight_map": weight_map}


def nested(opening: str, closing: str, depth: int) -> bytes:
    return ('{"w":' + opening * depth + closing * depth + "}").encode()


def sparse(path: Path, size: int) -> Path:
    """Grow a file to ``size`` bytes without writing them; returns the checkpoint folder."""
    with open(path, "r+b") as handle:
        handle.truncate(size)
    return path.parent


def broken_shard(folder: Path) -> Path:
    raw_file(folder, b"\x01", "a.safetensors")
    (folder / INDEX).write_text(json.dumps(index_of({"w": "a.safetensors"})))
    return folder


def duplicate_in_index(folder: Path) -> Path:
    raw = b'{"weight_map": {"w": "a.safetensors", "v": "b.safetensors", "w": "b.safetensors"}}'
    return sharded(raw, SHARDS)(folder)


def torch_archive(program: bytes):
    """A torch zip checkpoint (``pytorch_model.bin``) whose data.pkl is this raw pickle program."""

    def build(folder: Path) -> Path:
        path = folder / "pytorch_model.bin"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("archive/data.pkl", program)
            archive.writestr("archive/data/0", bytes(16))
            archive.writestr("archive/version", "3\n")
        return path

    return build


def _text(value: str) -> bytes:
    raw = value.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def _global(module: str, name: str) -> bytes:
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def _small_int(value: int) -> bytes:
    return pickle.BININT1 + bytes([value])


# Pickle opcode streams kept one run of opcodes a line (fmt: skip): one operand a line hides the structure.
_STORAGE = (
    pickle.MARK + _text("storage") + _global("torch", "FloatStorage") + _text("0") + _text("cpu") + _small_int(4)
    + pickle.TUPLE + pickle.BINPERSID
)  # fmt: skip
_TENSOR = (
    _global("torch._utils", "_rebuild_tensor_v2") + pickle.MARK + _STORAGE + _small_int(0)
    + pickle.MARK + _small_int(4) + pickle.TUPLE + pickle.MARK + _small_int(1) + pickle.TUPLE
    + pickle.TUPLE + pickle.REDUCE
)  # fmt: skip


def state_dict_pickle(value: bytes) -> bytes:
    """``{"w": <value>}`` as a protocol-2 pickle program."""
    return pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + _text("w") + value + pickle.SETITEM + pickle.STOP


def overwrite(field: str, value: bytes) -> bytes:
    """BUILD: write ``field`` of the object on the stack straight into its __dict__."""
    return pickle.EMPTY_DICT + _text(field) + value + pickle.SETITEM + pickle.BUILD


# --- the corpus ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], Path]
    error: type[CkptdiffError]
    file: str  # the file the error must name
    rule: str  # words of the defect the error must state


ST = "bad.safetensors"
CASES = [
    # length prefix
    Case("empty-file", lambda f: raw_file(f, b""), HeaderError, ST, "too short"),
    Case("shorter-than-8", lambda f: raw_file(f, b"\x10\x00\x00"), HeaderError, ST, "too short"),
    Case("length-past-eof", lambda f: with_prefix(f, b'{"a":1}', length=4096), HeaderError, ST, "past the end"),
    Case("length-over-limit", lambda f: with_prefix(f, b"{}", length=100_000_001), HeaderError, ST, "limit"),
    Case("length-u64-max", lambda f: with_prefix(f, b"{}", length=U64_MAX), HeaderError, ST, "limit"),
    Case("length-claims-99MB", lambda f: with_prefix(f, b"{}", length=99_000_000), HeaderError, ST, "past the end"),
    Case("length-zero", lambda f: with_prefix(f, b"", length=0, data=8), HeaderError, ST, "too small"),
    # the JSON text
    Case("not-utf8", lambda f: with_prefix(f, b'{"w\xff\xfe":{}}'), HeaderError, ST, "UTF-8"),
    Case("not-json", lambda f: with_prefix(f, b"{this is not json}"), HeaderError, ST, "not valid JSON"),
    Case("json-list", lambda f: with_prefix(f, b"[1, 2, 3]"), HeaderError, ST, "does not start with '{'"),
    Case("json-string", lambda f: with_prefix(f, b'"weights"'), HeaderError, ST, "does not start with '{'"),
    Case("json-number", lambda f: with_prefix(f, b"12345678"), HeaderError, ST, "does not start with '{'"),
    Case("pickle-not-safetensors", lambda f: raw_file(f, b"\x80\x04\x955\x10" + bytes(64)), HeaderError, ST, "limit"),
    Case("nested-100k-lists", lambda f: with_prefix(f, nested("[", "]", 100_000)), HeaderError, ST, "nests"),
    Case("nested-100k-objects", lambda f: with_prefix(f, nested('{"a":', "}", 100_000)), HeaderError, ST, "nests"),
    Case("trailing-garbage", lambda f: with_prefix(f, b"{}}"), HeaderError, ST, "not valid JSON"),
    Case("huge-integer-literal", lambda f: with_prefix(f, b'{"w":' + b"9" * 5000 + b"}"), HeaderError, ST, "JSON"),
    Case(
        "duplicate-tensor",
        lambda f: with_prefix(
            f,
            b'{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],'
            b'"data_offsets":[0,1]}}',
            data=1,
        ),
        HeaderError,
        ST,
        "duplicate key 'w'",
    ),
    Case(
        "lone-surrogate-name",
        lambda f: with_prefix(f, b'{"w\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', data=1),
        HeaderError,
        ST,
        "surrogate",
    ),
    Case(
        "name-with-terminal-escapes",
        lambda f: header_file(f, {"w\x1b]0;pwned\x07\x1b[2J": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}),
        HeaderError,
        ST,
        "control or unprintable",
    ),
    Case(
        "name-forging-a-line",
        lambda f: header_file(f, {"w\ncompatible: 15 match": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}),
        HeaderError,
        ST,
        "control or unprintable",
    ),
    # one entry
    Case("entry-not-object", lambda f: header_file(f, {"w": [0, 16]}), HeaderError, ST, "not an object"),
    Case("missing-dtype", one_tensor(dtype=None), HeaderError, ST, "missing dtype"),
    Case("missing-shape", one_tensor(shape=None), HeaderError, ST, "missing shape"),
    Case("missing-offsets", one_tensor(data_offsets=None), HeaderError, ST, "missing data_offsets"),
    Case("unknown-dtype", one_tensor(dtype="F128"), HeaderError, ST, "unknown dtype 'F128'"),
    Case("dtype-lowercase", one_tensor(dtype="f32"), HeaderError, ST, "unknown dtype 'f32'"),
    Case("dtype-not-string", one_tensor(dtype=32), HeaderError, ST, "unknown dtype 32"),
    Case("dtype-5-MB-string", one_tensor(dtype="F" * 5_000_000), HeaderError, ST, "unknown dtype 'FFFF"),
    Case(
        "name-1-MB",
        lambda f: header_file(f, {"w" * 1_000_000: {"dtype": "F128", "shape": [], "data_offsets": [0, 0]}}),
        HeaderError,
        ST,
        "unknown dtype 'F128'",
    ),
    Case("negative-dim", one_tensor(shape=[-2, -2]), HeaderError, ST, "non-negative integers"),
    Case("float-dim", one_tensor(shape=[2.0, 2]), HeaderError, ST, "non-negative integers"),
    Case("string-dim", one_tensor(shape=["2", 2]), HeaderError, ST, "non-negative integers"),
    Case("bool-dim", one_tensor(shape=[True, 2]), HeaderError, ST, "non-negative integers"),
    Case("shape-not-list", one_tensor(shape=4), HeaderError, ST, "non-negative integers"),
    Case(
        "nan-dim",
        lambda f: with_prefix(f, b'{"w":{"dtype":"U8","shape":[NaN],"data_offsets":[0,1]}}', data=1),
        HeaderError,
        ST,
        "non-negative integers",
    ),
    Case("shape-overflows", one_tensor(shape=[2**32, 2**32, 2]), HeaderError, ST, "overflows"),
    Case("shape-overflows-late", one_tensor(shape=[0, 2**70]), HeaderError, ST, "dim over 2**64 - 1"),
    Case("offsets-reversed", one_tensor(data_offsets=[16, 0]), HeaderError, ST, "end before they begin"),
    Case("offsets-not-pair", one_tensor(data_offsets=[0, 8, 16]), HeaderError, ST, "not a pair"),
    Case("offsets-negative", one_tensor(data_offsets=[-16, 0]), HeaderError, ST, "not a pair"),
    Case("offsets-float", one_tensor(data_offsets=[0, 16.0]), HeaderError, ST, "not a pair"),
    Case("byte-length-wrong", one_tensor(data_offsets=[0, 12]), HeaderError, ST, "needs 16 bytes"),
    Case("sub-byte-not-whole-F4", one_tensor(dtype="F4", shape=[3], data_offsets=[0, 2]), HeaderError, ST, "whole"),
    Case(
        "sub-byte-not-whole-F6", one_tensor(dtype="F6_E2M3", shape=[3], data_offsets=[0, 3]), HeaderError, ST, "whole"
    ),
    # the layout of the data region
    Case("offsets-not-from-0", tensors(("w", "U8", [8], [8, 16])), HeaderError, ST, "does not start"),
    Case("offsets-overlap", tensors(("a", "U8", [8], [0, 8]), ("b", "U8", [8], [4, 12])), HeaderError, ST, "overlaps"),
    Case("offsets-gap", tensors(("a", "U8", [8], [0, 8]), ("b", "U8", [8], [16, 24])), HeaderError, ST, "gap"),
    Case("offsets-past-eof", tensors(("w", "U8", [64], [0, 64]), data=10), HeaderError, ST, "truncated"),
    Case("trailing-data", tensors(("w", "U8", [8], [0, 8]), data=4096), HeaderError, ST, "trailing"),
    # __metadata__
    Case("metadata-int-value", tensors(__metadata__={"format": 1}), HeaderError, ST, "__metadata__"),
    Case("metadata-list", tensors(__metadata__=["pt"]), HeaderError, ST, "__metadata__"),
    Case("metadata-string", tensors(__metadata__="pt"), HeaderError, ST, "__metadata__"),
    Case("metadata-nested", tensors(__metadata__={"a": {"b": "c"}}), HeaderError, ST, "__metadata__"),
    # sharded checkpoints: the index
    Case("index-not-json", sharded(b"{weight_map: nope", SHARDS), IndexError_, INDEX, "not valid JSON"),
    Case("index-not-utf8", sharded(b'{"weight_map": {"\xff": "a"}}', SHARDS), IndexError_, INDEX, "UTF-8"),
    Case("index-list", sharded(b"[]", SHARDS), IndexError_, INDEX, "not a JSON object"),
    Case("index-no-weight-map", sharded({"metadata": {}}, SHARDS), IndexError_, INDEX, "weight_map"),
    Case("index-weight-map-list", sharded(index_of(["a.safetensors"]), SHARDS), IndexError_, INDEX, "weight_map"),
    Case(
        "index-missing-shard",
        sharded(index_of({"w": "a.safetensors", "v": "gone.safetensors"}), {"a.safetensors": W}),
        IndexError_,
        INDEX,
        "gone.safetensors",
    ),
    Case("index-duplicate-name", duplicate_in_index, IndexError_, INDEX, "duplicate key 'w'"),
    Case(
        "tensor-in-two-shards",
        sharded(index_of({"w": "a.safetensors", "v": "b.safetensors"}), {"a.safetensors": W, "b.safetensors": V + W}),
        IndexError_,
        INDEX,
        "two shards",
    ),
    Case(
        "tensor-not-in-index",
        sharded(index_of({"w": "a.safetensors"}), {"a.safetensors": W + V}),
        IndexError_,
        INDEX,
        "not in the index",
    ),
    Case(
        "index-names-wrong-shard",
        sharded(index_of({"w": "b.safetensors", "v": "a.safetensors"}), SHARDS),
        IndexError_,
        INDEX,
        "stored in",
    ),
    Case(
        "index-names-absent-tensor",
        sharded(index_of({"w": "a.safetensors", "v": "b.safetensors", "ghost": "a.safetensors"}), SHARDS),
        IndexError_,
        INDEX,
        # not "no shard has it": a shard the index does not name may hold it (an index left from a re-sharding)
        "tensor 'ghost' is listed in the index for a.safetensors but a.safetensors does not hold it",
    ),
    Case("shard-path-dotdot", sharded(index_of({"w": "../a.safetensors"}), SHARDS), IndexError_, INDEX, "escapes"),
    Case(
        "shard-path-dotdot-deep",
        sharded(index_of({"w": "x/../../a.safetensors"}), SHARDS),
        IndexError_,
        INDEX,
        "escapes",
    ),
    Case("shard-path-backslash", sharded(index_of({"w": "..\\a.safetensors"}), SHARDS), IndexError_, INDEX, "escapes"),
    Case("shard-path-absolute", sharded(index_of({"w": "/etc/passwd"}), SHARDS), IndexError_, INDEX, "absolute"),
    Case("shard-path-drive", sharded(index_of({"w": "C:\\a.safetensors"}), SHARDS), IndexError_, INDEX, "absolute"),
    Case(
        "shard-path-control-char",
        sharded(index_of({"w": "a\x1b[2J.safetensors"}), SHARDS),
        IndexError_,
        INDEX,
        "not a file name",
    ),
    Case(
        "shard-path-drive-after-dot",
        sharded(index_of({"w": ".\\C:\\a.safetensors"}), SHARDS),
        IndexError_,
        INDEX,
        "absolute",
    ),
    Case("shard-path-not-string", sharded(index_of({"w": 7}), SHARDS), IndexError_, INDEX, "not a file name"),
    Case(
        "broken-shard-header",
        lambda f: sharded(index_of({"w": "a.safetensors"}), {})(f) if not raw_file(f, b"\x01", "a.safetensors") else f,
        HeaderError,
        "a.safetensors",
        "too short",
    ),
    # config.json
    Case("config-not-json", with_config(b'{"hidden_size": 7168,'), CkptdiffError, "config.json", "not valid JSON"),
    Case("config-not-utf8", with_config(b'{"name": "\xff"}'), CkptdiffError, "config.json", "UTF-8"),
    Case("config-list", with_config(b"[7168]"), CkptdiffError, "config.json", "not a JSON object"),
    Case("config-nested", with_config(b"[" * 100_000), CkptdiffError, "config.json", "nests"),
    # a count the rules loop over, far past any model's: refused before a loop (or a list of names) that long
    Case(
        "config-10**9-layers",
        with_config(b'{"num_hidden_layers": 1000000000}'),
        CkptdiffError,
        "config.json",
        "num_hidden_layers is 1000000000, more than any model has",
    ),
    Case(
        "config-nested-10**9-experts",
        with_config(b'{"text_config": {"n_routed_experts": 1000000000}}'),
        CkptdiffError,
        "config.json",
        "n_routed_experts is 1000000000",
    ),
    # a negative count: the engines' replays indexed layers from the end (convert listed 279 "missing" tensors)
    Case(
        "config-negative-layers",
        with_config(b'{"num_hidden_layers": -5}'),
        CkptdiffError,
        "config.json",
        "num_hidden_layers is -5: a count cannot be negative",
    ),
    Case(
        "config-nested-negative-experts",
        with_config(b'{"text_config": {"num_experts": -1}}'),
        CkptdiffError,
        "config.json",
        "num_experts is -1: a count cannot be negative",
    ),
    # a size or count the rules read that is no integer: the rules took it as unset, so a side whose
    # hidden_size was "7168" compared compatible and the engines said it had none
    Case(
        "config-string-hidden-size",
        with_config(b'{"hidden_size": "7168"}'),
        CkptdiffError,
        "config.json",
        'hidden_size is "7168" (a string): it must be a JSON integer',
    ),
    Case("config-float-vocab", with_config(b'{"vocab_size": 163840.0}'), CkptdiffError, "config.json", "163840.0"),
    Case("config-bool-heads", with_config(b'{"num_attention_heads": true}'), CkptdiffError, "config.json", "is true"),
    Case("config-nan-layers", with_config(b'{"num_hidden_layers": NaN}'), CkptdiffError, "config.json", "is NaN"),
    Case(
        "config-nested-infinite-draft-vocab",
        with_config(b'{"eagle_config": {"draft_vocab_size": Infinity}}'),
        CkptdiffError,
        "config.json",
        "eagle_config.draft_vocab_size is Infinity: it must be a JSON integer",
    ),
    Case(
        "config-negative-intermediate",
        with_config(b'{"text_config": {"intermediate_size": -1}}'),
        CkptdiffError,
        "config.json",
        "text_config.intermediate_size is -1: it cannot be negative",
    ),
    Case(
        "config-nested-negative-vocab",
        with_config(b'{"text_config": {"vocab_size": -1}}'),
        CkptdiffError,
        "config.json",
        "text_config.vocab_size is -1: a size must be at least 1",
    ),
    Case(
        "config-aux-id-string",
        with_config(b'{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, "58"]}}'),
        CkptdiffError,
        "config.json",
        'eagle_config.eagle_aux_hidden_state_layer_ids holds "58": each layer id must be a JSON integer',
    ),
    Case(
        "config-aux-ids-a-string",
        with_config(b'{"eagle_config": {"eagle_aux_hidden_state_layer_ids": "2,30,58"}}'),
        CkptdiffError,
        "config.json",
        'eagle_config.eagle_aux_hidden_state_layer_ids is "2,30,58" (a string): it must be a list of JSON integers',
    ),
    Case(
        "config-aux-ids-a-number",
        with_config(b'{"eagle_aux_hidden_state_layer_ids": 5}'),
        CkptdiffError,
        "config.json",
        "eagle_aux_hidden_state_layer_ids is 5: it must be a list of JSON integers",
    ),
    Case(
        "config-aux-ids-an-object",
        with_config(b'{"eagle_config": {"layer_ids": {"2": null}}}'),
        CkptdiffError,
        "config.json",
        'eagle_config.layer_ids is {"2": null}: it must be a list of JSON integers',
    ),
    Case(
        "config-target-layer-id-float",
        with_config(b'{"dflash_config": {"target_layer_ids": [1, 2.5]}}'),
        CkptdiffError,
        "config.json",
        "dflash_config.target_layer_ids holds 2.5: each layer id must be a JSON integer",
    ),
    Case(
        "config-20000-aux-ids",
        with_config(b'{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [%s]}}' % b",".join([b"1"] * 20000)),
        CkptdiffError,
        "config.json",
        "eagle_aux_hidden_state_layer_ids names 20000 layers",
    ),
    Case(
        "config-10**9-mtp-layers",
        with_config(b'{"model_type": "deepseek_v3", "num_nextn_predict_layers": 1000000000}'),
        CkptdiffError,
        "config.json",
        "num_nextn_predict_layers is 1000000000",
    ),
    Case(
        "config-1-GB",
        lambda f: sparse(with_config(b"{")(f) / "config.json", 2**30),
        CkptdiffError,
        "config.json",
        "over the 100,000,000-byte limit",
    ),
    Case(
        "index-1-GB",
        lambda f: sparse(sharded(b"{", SHARDS)(f) / INDEX, 2**30),
        IndexError_,
        INDEX,
        "over the 100,000,000-byte limit",
    ),
    # torch pickles: nothing in them runs, nothing in them reaches past the checks
    Case(
        "pickle-runs-os-system",
        torch_archive(state_dict_pickle(_global("os", "system"))),
        CkptdiffError,
        "pytorch_model.bin",
        "refuses to load global os.system",
    ),
    Case(
        "pickle-builtins-eval",
        torch_archive(state_dict_pickle(_global("builtins", "eval"))),
        CkptdiffError,
        "pytorch_model.bin",
        "refuses to load global builtins.eval",
    ),
    Case(
        "pickle-overwrites-shape",
        torch_archive(state_dict_pickle(_TENSOR + overwrite("shape", _text("x")))),
        CkptdiffError,
        "pytorch_model.bin",
        "overwrites the fields of a TensorRecord",
    ),
    Case(
        "pickle-overwrites-storage",
        torch_archive(state_dict_pickle(_TENSOR + overwrite("storage", pickle.NONE))),
        CkptdiffError,
        "pytorch_model.bin",
        "overwrites the fields of a TensorRecord",
    ),
    Case(
        "pickle-truncated",
        torch_archive(state_dict_pickle(_TENSOR)[:-5]),
        SourceError,
        "pytorch_model.bin",
        "not a readable tensor pickle",
    ),
    Case(
        "pickle-a-bare-tensor",  # torch.save(tensor): no names to compare
        torch_archive(pickle.PROTO + b"\x02" + _TENSOR + pickle.STOP),
        SourceError,
        "pytorch_model.bin",
        "holds a single tensor, not a state dict of tensors",
    ),
    Case(
        "pickle-not-a-zip",
        lambda f: raw_file(f, b"\x80\x02}q\x00.", "pytorch_model.bin"),
        SourceError,
        "pytorch_model.bin",
        "legacy",
    ),
    # what the path itself is
    Case("folder-without-weights", lambda f: f, SourceError, "", "no safetensors weights"),
    Case(
        "not-a-safetensors-name",
        lambda f: raw_file(f, b"{}", "weights.txt"),
        SourceError,
        "weights.txt",
        "is not named like a weight file",
    ),
    Case(
        "fifo",
        lambda f: (os.mkfifo(f / "pipe.safetensors"), f / "pipe.safetensors")[1],
        SourceError,
        "pipe.safetensors",
        "not a regular file",
    ),
]

ALL_IDS = [case.id for case in CASES]


def build(case: Case, root: Path) -> Path:
    folder = root / case.id
    folder.mkdir()
    return case.build(folder)


def test_the_corpus_is_large_and_unique() -> None:
    assert len(CASES) >= 30
    assert len(set(ALL_IDS)) == len(ALL_IDS)


@pytest.mark.parametrize("case", CASES, ids=ALL_IDS)
def test_library_refuses_with_the_right_error(case: Case, tmp_path: Path) -> None:
    spec = build(case, tmp_path)
    with pytest.raises(CkptdiffError) as caught:
        resolve(str(spec))
    error = caught.value
    assert isinstance(error, case.error), f"{type(error).__name__}: {error}"
    line = error.line()
    assert "\n" not in line and len(line) < 2500
    assert case.file in (error.where or ""), line
    assert case.rule in error.defect, line


# A fresh interpreter reads its own peak resident set (VmHWM) before and after: the test process's ru_maxrss keeps
# the high-water mark of every earlier test (and torch's), so growth measured there reads as 0.
PEAK_GROWTH = """
import sys
from ckptdiff.errors import HeaderError
from ckptdiff.sources import resolve

def peak_kib():
    with open("/proc/self/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))

before = peak_kib()
try:
    resolve(sys.argv[1])
except HeaderError as error:
    print("REFUSED", error.line())
print("GROWTH", peak_kib() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_a_header_length_near_the_limit_is_refused_before_allocating(tmp_path: Path) -> None:
    """A 16-byte file claiming a 99 MB header: refused from the file size, no 99 MB read attempted."""
    path = with_prefix(tmp_path, b"{}", length=99_999_999)
    child = subprocess.run(
        [sys.executable, "-c", PEAK_GROWTH, str(path)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert child.returncode == 0, child.stderr
    lines = dict(line.split(" ", 1) for line in child.stdout.splitlines())
    assert "past the end" in lines["REFUSED"]
    assert int(lines["GROWTH"]) < 50_000  # KiB; reading the claimed header would add ~98,000


def test_a_home_folder_of_no_user_is_a_missing_path() -> None:
    with pytest.raises(SourceError, match="no such file or folder"):
        resolve("~no-such-user-on-this-machine/model.safetensors")


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/zero and /proc are Linux features")
def test_a_character_device_is_not_read_forever() -> None:
    with pytest.raises(SourceError, match="not a regular file"):
        resolve("/dev/zero")


# --- the same corpus through the real command ----------------------------------------------------------------

# ``ckptdiff.cli.main`` once per case inside one child process (fast), capturing what a user would see.
DRIVER = """
import contextlib, io, json, sys
from ckptdiff.cli import main
results = []
for args in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
            code = 0
        except SystemExit as done:
            code = done.code
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def corpus_through_main(tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    root = tmp_path_factory.mktemp("corpus")
    runs = [[str(build(case, root)), str(GOOD)] for case in CASES]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")} | {"HF_HOME": str(root / "hf")}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(runs),
        capture_output=True,
        text=True,
        env=env,
        cwd=GOOD.parent.parent,
        timeout=300,
        check=True,
    )
    return {case.id: tuple(result) for case, result in zip(CASES, json.loads(done.stdout), strict=True)}


@pytest.mark.parametrize("case", CASES, ids=ALL_IDS)
def test_command_prints_one_line_and_exits_2(case: Case, corpus_through_main) -> None:
    code, stdout, stderr = corpus_through_main[case.id]
    assert code == 2, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 2500, stderr[:3000]
    assert lines[0].startswith("ckptdiff: ") and case.file in lines[0] and case.rule in lines[0], lines[0]
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert stdout == ""


# One case of each kind as its own ``ckptdiff`` process, exactly as a user runs it.
PROCESS_CASES = ["length-u64-max", "nested-100k-lists", "offsets-overlap", "shard-path-dotdot", "config-not-json"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in PROCESS_CASES], ids=PROCESS_CASES)
def test_the_ckptdiff_process_exits_2_with_one_line(case: Case, tmp_path: Path, run_cli) -> None:
    spec = build(case, tmp_path)
    done = run_cli(str(spec), str(GOOD))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"ckptdiff: {spec}") and case.rule in line


def test_either_side_may_be_the_broken_one(tmp_path: Path, run_cli) -> None:
    bad = one_tensor(dtype="F128")(tmp_path)
    done = run_cli(str(GOOD), str(bad))
    assert done.returncode == 2
    assert done.stderr == f"ckptdiff: {bad}: tensor 'w': unknown dtype 'F128'\n"


def test_debug_shows_the_traceback_for_bug_reports(tmp_path: Path, run_cli) -> None:
    bad = one_tensor(shape=[-2, -2])(tmp_path)
    done = run_cli(str(bad), str(GOOD), "--debug")
    assert done.returncode == 2
    assert "Traceback" in done.stderr and "HeaderError" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("ckptdiff: ")


def test_a_size_that_is_no_integer_is_refused_with_and_without_an_engine(tmp_path: Path, run_cli) -> None:
    drafter = tmp_path / "drafter"
    shutil.copytree(REPO / "fixtures" / "drafters" / "specforge-qwen3-8b", drafter)
    config = json.loads((drafter / "config.json").read_text())
    (drafter / "config.json").write_text(json.dumps({**config, "draft_vocab_size": "32"}))
    line = f'ckptdiff: {drafter / "config.json"}: draft_vocab_size is "32" (a string): it must be a JSON integer\n'
    for args in ([str(GOOD), str(drafter)], [str(drafter), "--engine", "all"]):
        done = run_cli(*args)
        assert (done.returncode, done.stderr, done.stdout) == (2, line, ""), args


def test_unset_and_per_layer_sizes_are_read_as_before(tmp_path: Path, run_cli) -> None:
    # null is "unset" (transformers' default); a list is Gemma 3n's per-layer intermediate_size
    drafter = tmp_path / "drafter"
    shutil.copytree(REPO / "fixtures" / "drafters" / "specforge-qwen3-8b", drafter)
    config = json.loads((drafter / "config.json").read_text())
    odd = {**config, "head_dim": None, "text_config": {"intermediate_size": [32, 64], "mask_token_id": -1}}
    (drafter / "config.json").write_text(json.dumps(odd))
    done = run_cli(str(drafter), "--engine", "sglang")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("section", "key"),
    [(None, "hidden_size"), (None, "vocab_size"), ("eagle_config", "draft_vocab_size"), ("text_config", "head_dim")],
)
def test_a_size_of_zero_is_refused_not_taken_as_unset(tmp_path: Path, run_cli, section, key) -> None:
    # the rules read a 0 as unset: hidden_size 0 compared nothing, and every engine said "no hidden_size"
    drafter = tmp_path / "drafter"
    shutil.copytree(REPO / "fixtures" / "drafters" / "specforge-qwen3-8b", drafter)
    config = json.loads((drafter / "config.json").read_text())
    config.pop(key, None)
    config.update({section: {key: 0}} if section else {key: 0})
    (drafter / "config.json").write_text(json.dumps(config))
    shown = f"{section}.{key}" if section else key
    line = f"ckptdiff: {drafter / 'config.json'}: {shown} is 0: a size must be at least 1\n"
    for args in ([str(GOOD), str(drafter)], [str(drafter), "--engine", "all"]):
        done = run_cli(*args)
        assert (done.returncode, done.stderr, done.stdout) == (2, line, ""), args


def test_counts_and_ids_that_may_be_zero_are_read(tmp_path: Path, run_cli) -> None:
    drafter = tmp_path / "drafter"
    shutil.copytree(REPO / "fixtures" / "drafters" / "specforge-qwen3-8b", drafter)
    config = json.loads((drafter / "config.json").read_text())
    zeros = {"num_nextn_predict_layers": 0, "n_routed_experts": 0, "q_lora_rank": 0, "mask_token_id": 0}
    (drafter / "config.json").write_text(json.dumps({**config, "text_config": zeros}))
    done = run_cli(str(drafter), "--engine", "sglang")
    assert done.returncode == 0, done.stderr
