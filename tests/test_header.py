"""The safetensors header reader: what valid files look like, and where the limits sit."""

from __future__ import annotations

import json

import pytest

from ckptdiff.dtypes import DTYPE_BITS
from ckptdiff.errors import HeaderError
from ckptdiff.safetensors_header import (
    MAX_HEADER_BYTES,
    parse_file_prefix,
    parse_header,
    read_header_length,
)
from fixtures.generate import header_bytes


def prefix_of(tensors, metadata=None) -> tuple[bytes, int]:
    prefix, data = header_bytes(tensors, metadata)
    return prefix, len(prefix) + data


def test_every_spec_dtype_is_known_with_its_width():
    assert len(DTYPE_BITS) == 22
    assert DTYPE_BITS["BF16"] == 16 and DTYPE_BITS["F4"] == 4 and DTYPE_BITS["F6_E2M3"] == 6
    assert DTYPE_BITS["F8_E4M3FNUZ"] == 8 and DTYPE_BITS["C64"] == 64


@pytest.mark.parametrize("dtype", sorted(DTYPE_BITS))
def test_each_dtype_round_trips(dtype):
    prefix, size = prefix_of([("t", dtype, [4, 8])])
    header = parse_file_prefix(prefix, source="x.safetensors", file_size=size)
    entry = header.tensors["t"]
    assert (entry.dtype, entry.shape, entry.numel) == (dtype, (4, 8), 32)
    assert entry.nbytes == 32 * DTYPE_BITS[dtype] // 8


def test_layout_metadata_and_padding():
    prefix, size = prefix_of([("a", "F32", [2, 3]), ("b", "I64", [5])], metadata={"format": "pt"})
    header = parse_file_prefix(prefix, source="m.safetensors", file_size=size)
    assert header.metadata == {"format": "pt"}
    assert header.header_length % 8 == 0  # writers pad with spaces
    assert header.data_start == 8 + header.header_length
    assert header.data_length == 24 + 40
    assert header.file_size == size


def test_scalars_and_empty_tensors_are_valid():
    prefix, size = prefix_of([("scalar", "F32", []), ("empty", "BF16", [0, 7]), ("after", "U8", [3])])
    header = parse_file_prefix(prefix, source="s.safetensors", file_size=size)
    assert header.tensors["scalar"].numel == 1 and header.tensors["empty"].numel == 0


def test_sub_byte_tensors_must_pack_to_whole_bytes():
    prefix, size = prefix_of([("packed", "F4", [2, 3])])
    assert parse_file_prefix(prefix, source="f4.safetensors", file_size=size).tensors["packed"].nbytes == 3
    raw = json.dumps({"odd": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}).encode()
    with pytest.raises(HeaderError, match="whole number of bytes"):
        parse_header(raw, source="f4.safetensors")


def test_header_length_limits_follow_the_reference():
    at_limit = MAX_HEADER_BYTES.to_bytes(8, "little")
    assert read_header_length(at_limit, source="big") == MAX_HEADER_BYTES
    with pytest.raises(HeaderError, match="exceeds the 100000000-byte limit") as err:
        read_header_length((MAX_HEADER_BYTES + 1).to_bytes(8, "little"), source="big.safetensors")
    assert err.value.line().startswith("big.safetensors: ")
    with pytest.raises(HeaderError, match="runs past the end"):
        read_header_length((100).to_bytes(8, "little"), source="short", file_size=50)


def test_file_size_must_match_the_data_region():
    prefix, size = prefix_of([("a", "F32", [4])])
    with pytest.raises(HeaderError, match="data region ends at byte"):
        parse_file_prefix(prefix, source="t.safetensors", file_size=size + 1)
    with pytest.raises(HeaderError, match="data region ends at byte"):
        parse_file_prefix(prefix, source="t.safetensors", file_size=size - 1)


def test_tensors_may_be_listed_in_any_order_if_offsets_tile():
    raw = json.dumps(
        {
            "second": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
            "first": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
        }
    ).encode()
    assert set(parse_header(raw, source="x").tensors) == {"first", "second"}


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([[0, 4], [2, 6]], "overlaps the previous tensor"),
        ([[0, 4], [6, 8]], "leaves a gap after byte 4"),
        ([[2, 6], [6, 8]], "does not start the data region at 0"),
    ],
)
def test_offsets_must_tile_the_data_region(offsets, message):
    raw = json.dumps(
        {f"t{i}": {"dtype": "U8", "shape": [e - b], "data_offsets": [b, e]} for i, (b, e) in enumerate(offsets)}
    ).encode()
    with pytest.raises(HeaderError, match=message):
        parse_header(raw, source="x.safetensors")
