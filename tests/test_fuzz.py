"""Property-based tests: whatever bytes or JSON the parsers get, only ``CkptdiffError`` comes out.

And where the reader accepts a header, the header obeys the format; it accepts exactly what the reference
implementation (the ``safetensors`` package) loads, except headers naming a tensor twice, which ckptdiff refuses.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ckptdiff.checkpoint import check_shard_path, parse_config, parse_index
from ckptdiff.dtypes import DTYPE_BITS
from ckptdiff.errors import CkptdiffError, HeaderError, IndexError_
from ckptdiff.safetensors_header import (
    MAX_HEADER_BYTES,
    SafetensorsHeader,
    parse_file_prefix,
    parse_header,
    read_header_length,
)
from fixtures.generate import header_bytes

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUICK = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies --------------------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=24,
)
dims = st.integers(0, 6) | st.sampled_from([-1, 2**32, 2**63, 2**64, 2**70]) | json_scalars
dtypes = st.sampled_from(sorted(DTYPE_BITS)) | st.sampled_from(["bf16", "F128", "", "I4"]) | json_scalars
names = st.text(max_size=10)
printable_names = names.filter(str.isprintable)


# What the composites below draw from, built once (built inside them, their construction and validation on
# every draw cost most of a test's time; the draws are the same).
DTYPE_NAMES = st.sampled_from(sorted(DTYPE_BITS))
SPEC_DTYPES = st.dictionaries(printable_names, DTYPE_NAMES, max_size=6)
SPEC_SHAPES = st.lists(st.integers(0, 5), max_size=3)
ENTRY_NAMES = st.lists(names, max_size=5, unique=True)
ENTRY_SHAPES = st.lists(st.integers(0, 4), max_size=3)
DEFECTS = st.sets(st.sampled_from(["dtype", "shape", "data_offsets", "drop", "extra"]), max_size=2)
FIELDS = st.sampled_from(["dtype", "shape", "data_offsets"])
ODD_SHAPES = st.lists(dims, max_size=4) | json_scalars
COINS = st.booleans()
ODD_METADATA = st.dictionaries(st.text(max_size=6), st.text(max_size=6)) | json_values


@st.composite
def valid_specs(draw: st.DrawFn) -> list[tuple[str, str, list[int]]]:
    """A list of (name, dtype, shape) that makes a valid file (sub-byte dtypes get even sizes)."""
    chosen = draw(SPEC_DTYPES)
    specs = []
    for name, dtype in chosen.items():
        shape = draw(SPEC_SHAPES)
        if DTYPE_BITS[dtype] % 8:
            shape = [*shape, 4]  # 4 × 4 or 6 bits is whole bytes
        specs.append((name, dtype, shape))
    return specs


@st.composite
def headerish(draw: st.DrawFn) -> dict[str, Any]:
    """A header-shaped document: valid entries with some fields replaced by anything."""
    document: dict[str, Any] = {}
    offset = 0
    for name in draw(ENTRY_NAMES):
        dtype = draw(DTYPE_NAMES)
        shape = draw(ENTRY_SHAPES)
        size = 1
        for dim in shape:
            size *= dim
        size = size * DTYPE_BITS[dtype] // 8
        entry: dict[str, Any] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
        for key in draw(DEFECTS):
            if key == "drop":
                entry.pop(draw(FIELDS), None)
            elif key == "extra":
                entry["extra"] = draw(json_values)
            elif key == "dtype":
                entry["dtype"] = draw(dtypes)
            elif key == "shape":
                entry["shape"] = draw(ODD_SHAPES)
            else:
                entry["data_offsets"] = draw(st.lists(st.integers(-2, offset + 8), max_size=3) | json_scalars)
        document[name] = entry
    if draw(COINS):
        document["__metadata__"] = draw(ODD_METADATA)
    return document


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def with_prefix(raw: bytes) -> bytes:
    return len(raw).to_bytes(8, "little") + raw


def data_needed(document: Any) -> int:
    """The data length a header-ish document claims (0 when it claims nonsense)."""
    ends = [0]
    for key, entry in document.items() if isinstance(document, dict) else ():
        offsets = entry.get("data_offsets") if isinstance(entry, dict) and key != "__metadata__" else None
        if isinstance(offsets, list) and len(offsets) == 2 and type(offsets[1]) is int and 0 <= offsets[1] < 2**20:
            ends.append(offsets[1])
    return max(ends)


def assert_follows_the_format(header: SafetensorsHeader, file_size: int) -> None:
    expected = 0
    for entry in sorted(header.tensors.values(), key=lambda e: e.data_offsets):
        assert entry.data_offsets[0] == expected
        assert entry.nbytes * 8 == entry.numel * DTYPE_BITS[entry.dtype]
        expected = entry.data_offsets[1]
    assert header.file_size == file_size
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in header.metadata.items())


# --- the header reader -------------------------------------------------------------------------------------


@FUZZ
@given(prefix=st.binary(max_size=16), file_size=st.none() | st.integers(0, 2**65))
def test_read_header_length_returns_a_bounded_length_or_refuses(prefix: bytes, file_size: int | None) -> None:
    try:
        length = read_header_length(prefix, source="fuzz", file_size=file_size)
    except HeaderError:
        return
    assert 2 <= length <= MAX_HEADER_BYTES
    assert file_size is None or 8 + length <= file_size


@FUZZ
@given(raw=st.binary(max_size=600))
def test_parse_header_survives_any_bytes(raw: bytes) -> None:
    try:
        parse_header(raw, source="fuzz")
    except CkptdiffError:
        pass


@FUZZ
@given(blob=st.binary(max_size=600))
def test_parse_file_prefix_survives_any_bytes(blob: bytes) -> None:
    try:
        header = parse_file_prefix(blob, source="fuzz", file_size=len(blob))
    except CkptdiffError:
        return
    assert_follows_the_format(header, len(blob))


@FUZZ
@given(document=json_values)
def test_parse_header_survives_any_json(document: Any) -> None:
    try:
        parse_header(encode(document), source="fuzz")
    except CkptdiffError:
        pass


@FUZZ
@given(document=headerish())
def test_a_header_shaped_document_is_refused_or_follows_the_format(document: dict[str, Any]) -> None:
    raw = encode(document)
    file_size = 8 + len(raw) + data_needed(document)
    try:
        header = parse_header(raw, source="fuzz", file_size=file_size)
    except CkptdiffError:
        return
    assert_follows_the_format(header, file_size)


@FUZZ
@given(specs=valid_specs(), position=st.integers(0, 10_000), byte=st.integers(0, 255), cut=st.integers(0, 64))
def test_a_valid_file_with_one_byte_changed_or_cut_is_refused_or_valid(
    specs: list[tuple[str, str, list[int]]], position: int, byte: int, cut: int
) -> None:
    prefix, data_length = header_bytes(specs)
    blob = bytearray(prefix + bytes(data_length))
    blob[position % len(blob)] = byte
    blob = blob[: max(0, len(blob) - cut)]
    try:
        header = parse_file_prefix(bytes(blob), source="fuzz", file_size=len(blob))
    except CkptdiffError:
        return
    assert_follows_the_format(header, len(blob))


@QUICK
@given(specs=valid_specs(), metadata=st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8)))
def test_every_valid_file_round_trips(specs: list[tuple[str, str, list[int]]], metadata: dict[str, str] | None) -> None:
    prefix, data_length = header_bytes(specs, metadata)
    header = parse_file_prefix(prefix, source="fuzz", file_size=len(prefix) + data_length)
    assert {name: (e.dtype, list(e.shape)) for name, e in header.tensors.items()} == {
        name: (dtype, shape) for name, dtype, shape in specs
    }
    assert header.metadata == (metadata or {})


# --- agreement with the reference implementation --------------------------------------------------------------


def reference_loads(blob: bytes) -> bool:
    """Whether the ``safetensors`` package loads these bytes (its in-memory reader: no numpy or torch needed)."""
    import safetensors

    if not hasattr(safetensors, "deserialize"):
        pytest.skip("this safetensors has no deserialize()")
    try:
        safetensors.deserialize(blob)
        return True
    except Exception:  # the reference's error types vary by version: any refusal counts
        return False


def assert_agrees_with_the_reference(blob: bytes) -> None:
    try:
        parse_file_prefix(blob, source="fuzz", file_size=len(blob))
        ours = True
    except CkptdiffError:
        ours = False
    if ours != reference_loads(blob):
        # the intended differences: the reference keeps the last of two same-named tensors, and loads names
        # with control characters; ckptdiff refuses both
        length = int.from_bytes(blob[:8], "little")
        assert not ours and _names_repeat_or_unprintable(blob[8 : 8 + length]), blob


def _names_repeat_or_unprintable(raw: bytes) -> bool:
    seen: list[str] = []
    try:
        json.loads(raw, object_pairs_hook=lambda pairs: seen.extend(k for k, _ in pairs) or dict(pairs))
    except ValueError:
        return False
    return len(seen) != len(set(seen)) or not all(name.isprintable() for name in seen)


@QUICK
@given(document=headerish(), slack=st.sampled_from([0, 0, 0, 1, -1]))
def test_accepts_exactly_what_the_reference_loads(document: dict[str, Any], slack: int) -> None:
    data = data_needed(document) + slack
    assume(data >= 0)
    assert_agrees_with_the_reference(with_prefix(encode(document)) + bytes(data))


@QUICK
@given(specs=valid_specs(), position=st.integers(0, 10_000), byte=st.sampled_from(b'{}[]":,0129 -.eE\\u'))
def test_agrees_with_the_reference_on_a_changed_byte(
    specs: list[tuple[str, str, list[int]]], position: int, byte: int
) -> None:
    prefix, data_length = header_bytes(specs)
    blob = bytearray(prefix + bytes(data_length))
    blob[8 + position % (len(prefix) - 8)] = byte
    assert_agrees_with_the_reference(bytes(blob))


# --- the index, shard paths and config.json -----------------------------------------------------------------


@FUZZ
@given(raw=st.binary(max_size=400) | json_values.map(encode))
def test_parse_index_survives_anything(raw: bytes) -> None:
    try:
        weight_map = parse_index(raw, index_name="fuzz.index.json")
    except IndexError_:
        return
    for path in weight_map.values():
        assert not path.startswith("/") and ".." not in path.split("/")


@FUZZ
@given(weight_map=st.dictionaries(names, st.text(alphabet="ab./\\:\x00", max_size=12) | json_scalars, max_size=5))
def test_an_index_never_yields_a_path_outside_the_checkpoint(weight_map: dict[str, Any]) -> None:
    try:
        checked = parse_index(encode({"weight_map": weight_map}), index_name="fuzz.index.json")
    except IndexError_:
        return
    for path in checked.values():
        assert not path.startswith("/") and ":" not in path[1:2] and ".." not in path.split("/")


@FUZZ
@given(path=st.text(alphabet="ab./\\:\x00", max_size=16))
def test_check_shard_path_keeps_paths_inside(path: str) -> None:
    try:
        checked = check_shard_path(path, index_name="fuzz")
    except IndexError_:
        return
    assert checked and not checked.startswith("/") and ".." not in checked.split("/")


@FUZZ
@given(raw=st.binary(max_size=400) | json_values.map(encode))
def test_parse_config_survives_anything(raw: bytes) -> None:
    try:
        config = parse_config(raw, config_name="config.json")
    except CkptdiffError:
        return
    assert isinstance(config, dict)


# --- torch pickles: programs assembled from the opcodes a hostile data.pkl would use -----------------------


def _pickle_fragments() -> list[bytes]:
    import pickle
    import struct

    def text(value: str) -> bytes:
        return pickle.BINUNICODE + struct.pack("<I", len(value.encode())) + value.encode()

    def global_(module: str, name: str) -> bytes:
        return pickle.GLOBAL + f"{module}\n{name}\n".encode()

    storage = pickle.MARK + text("storage") + global_("torch", "FloatStorage") + text("0") + text("cpu")
    small = pickle.BININT1 + b"\x04"
    shape = pickle.MARK + small + pickle.TUPLE
    # An opcode stream kept as runs of opcodes (fmt: skip): one operand a line hides the structure.
    tensor = (
        global_("torch._utils", "_rebuild_tensor_v2") + pickle.MARK + storage + small + pickle.TUPLE + pickle.BINPERSID
        + pickle.BININT1 + b"\x00" + shape + pickle.MARK + pickle.BININT1 + b"\x01" + pickle.TUPLE + pickle.TUPLE
        + pickle.REDUCE
    )  # fmt: skip
    return [
        tensor,
        pickle.EMPTY_DICT + text("w") + tensor,
        shape,
        pickle.MARK,
        pickle.TUPLE,
        pickle.EMPTY_DICT,
        pickle.EMPTY_LIST,
        pickle.EMPTY_TUPLE,
        pickle.SETITEM,
        pickle.SETITEMS,
        pickle.APPEND,
        pickle.APPENDS,
        pickle.BUILD,
        pickle.REDUCE,
        pickle.NONE,
        pickle.NEWTRUE,
        pickle.BINPERSID,
        pickle.POP,
        pickle.DUP,
        pickle.BINPUT + b"\x00",
        pickle.BINGET + b"\x00",
        pickle.BININT1 + b"\x04",
        pickle.BININT1 + b"\x00",
        pickle.BININT + b"\xff\xff\xff\xff",
        text("w"),
        text("shape"),
        text("state_dict"),
        storage,
        global_("torch._utils", "_rebuild_tensor_v2"),
        global_("torch._utils", "_rebuild_tensor_v3"),
        global_("torch._utils", "_rebuild_parameter"),
        global_("collections", "OrderedDict"),
        global_("torch", "float8_e4m3fn"),
        global_("torch", "UntypedStorage"),
        global_("torch", "FloatStorage"),
        global_("builtins", "getattr"),
    ]


PICKLE_FRAGMENTS = _pickle_fragments()


@QUICK
@given(program=st.lists(st.sampled_from(PICKLE_FRAGMENTS), max_size=40))
def test_a_torch_archive_with_any_pickle_program_is_read_or_refused(program: list[bytes]) -> None:
    import pickle
    import zipfile

    from ckptdiff.sources.torch_pickle import read_archive

    handle, path = tempfile.mkstemp(suffix=".bin")
    os.close(handle)
    try:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("archive/data.pkl", pickle.PROTO + b"\x02" + b"".join(program) + pickle.STOP)
            archive.writestr("archive/data/0", bytes(16))
        try:
            read_archive(Path(path))
        except CkptdiffError:
            pass
    finally:
        os.unlink(path)


# --- what the user types ---------------------------------------------------------------------------------------


@FUZZ
@given(spec=st.text(max_size=30) | st.from_regex(r"[~./a-z@-]{0,12}", fullmatch=True))
def test_any_spec_is_a_path_a_repo_or_one_error(spec: str) -> None:
    from ckptdiff.sources import parse_spec

    try:
        parse_spec(spec)
    except CkptdiffError:
        pass
