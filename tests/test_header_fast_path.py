"""The fast header path (typed msgspec decoding, C-level checks) accepts only what the precise path accepts, with
the same result, and takes the headers real writers produce (else the speed would be lost without a failure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz import headerish, valid_specs

from ckptdiff import checkpoint
from ckptdiff.dtypes import DTYPE_BITS
from ckptdiff.errors import CkptdiffError
from ckptdiff.safetensors_header import _decode_plain, parse_header, parse_header_precisely
from ckptdiff.strict_json import reject_duplicate_keys
from fixtures.generate import header_bytes

MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def precise(raw: bytes) -> tuple[dict[str, Any], dict[str, str], tuple[int, dict[str, int]]] | None:
    """What the precise path makes of a header: its tensors, metadata, data length and bytes per dtype, or None if
    it refuses."""
    try:
        header = parse_header_precisely(raw, source="x")
    except CkptdiffError:
        return None
    return dict(header.tensors), dict(header.metadata), (header.data_length, header.dtype_bytes)


def assert_fast_agrees(raw: bytes) -> None:
    fast = _decode_plain(raw)
    if fast is not None:
        assert fast[:3] == precise(raw), raw


def json_bytes(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


ENTRY = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'
SECOND = '{"dtype":"U8","shape":[1],"data_offsets":[1,2]}'


@pytest.mark.parametrize(
    "raw",
    [
        # a name twice, with an entry padded by repeated keys so that the text has as many strings as usual
        '{"w":' + ENTRY + ',"w":' + ENTRY + "}",
        '{"w":{"dtype":"U8","dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]},"v":null}',
        '{"w":' + ENTRY + ',"v":null}',
        '{"__metadata__":{"a":"b","a":"c"},"w":' + ENTRY + "}",
        '{"__metadata__":{"a":"b","a\\u0000":"c"},"w":' + ENTRY + "}",
        '{"__metadata__":{"a":"\\ud800"},"w":' + ENTRY + "}",  # a lone surrogate
        '{"__metadata__":{"a":"\\"__metadata__\\":{}"},"w":' + ENTRY + "}",
        '{"__metadata__":{"a":"\\"},"w":' + ENTRY + "}",  # the escape eats the closing quote
        '{"w":' + ENTRY + ',"__metadata__":{"a":"b"},"__metadata__":{"c":"d"}}',
        '{"w":' + ENTRY + ',"__metadata__":{"a":"b"},"__metadata__":null}',
        '{"w\\"__metadata__":{"a":"b"}}',
        '{"__metadata__":{"a":"b"},"w\\"":' + ENTRY + "}",
        '{"__metadata__":null,"w":' + ENTRY + "}",
        '{"__metadata__":{"a":{"b":"c"}},"w":' + ENTRY + "}",
        '{"__metadata__":{"a":1},"w":' + ENTRY + "}",
        '{"w":{"__metadata__":{"a":"b"},"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
        '{"__metadata__":' + ENTRY + "}",
        '{"w":{"dtype":"__metadata__","shape":[1],"data_offsets":[0,1]}}',
        '{"w\x7f":' + ENTRY + "}",
        '{"w\u200b":' + ENTRY + "}",  # a zero-width space: unprintable, not ASCII
        '{"w\u00e9":' + ENTRY + "}",  # é: printable, not ASCII
        '{"w\\u0041":' + ENTRY + "}",  # an escape: the precise path's
        '{"w":{"dtype":"U8","shape":[0,18446744073709551616,2],"data_offsets":[0,0]}}',
        '{"w":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,1]}}',
        '{"w":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}}',
        '{"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"v":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        '{"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        '{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"v":' + SECOND + "}",
        '{"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}',
        '{"w":{"dtype":"U8","shape":[true],"data_offsets":[0,1]}}',
        '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}',
        '{"w":' + ENTRY + "}\x00",
        '\ufeff{"w":' + ENTRY + "}",
        ' \t\r\n{"w":' + ENTRY + "}  ",
        "{}",
        '{"__metadata__":{}}',
        "[]",
    ],
)
def test_unusual_headers_take_the_precise_path_or_agree_with_it(raw: str) -> None:
    assert_fast_agrees(raw.encode())


@MANY
@given(document=headerish())
def test_header_shaped_documents_agree(document: dict[str, Any]) -> None:
    assert_fast_agrees(json_bytes(document))


@MANY
@given(specs=valid_specs(), position=st.integers(0, 10_000), byte=st.sampled_from(b'{}[]":,0129 -.eE\\u\x7f\x00'))
def test_a_changed_byte_agrees(specs: list[tuple[str, str, list[int]]], position: int, byte: int) -> None:
    prefix, _ = header_bytes(specs)
    raw = bytearray(prefix[8:])
    raw[position % len(raw)] = byte
    assert_fast_agrees(bytes(raw))


@MANY
@given(specs=valid_specs(), cut=st.integers(1, 40), insert=st.sampled_from(["", ' "x": 1,', "\t", '"w":{},']))
def test_a_cut_or_spliced_header_agrees(specs: list[tuple[str, str, list[int]]], cut: int, insert: str) -> None:
    raw = header_bytes(specs)[0][8:].rstrip(b" ")
    assert_fast_agrees(raw[:-cut])
    assert_fast_agrees(raw[:1] + insert.encode() + raw[1:])


@pytest.mark.parametrize(
    "metadata", [None, {"format": "pt"}, {}, {"a": "", "b": "{}[],:"}, {"config": '{"layers": 2, "name": "é\\n"}'}]
)
def test_headers_as_writers_write_them_take_the_fast_path(metadata: dict[str, str] | None) -> None:
    specs = [(f"model.layers.{i}.w", dtype, [4, 2]) for i, dtype in enumerate(sorted(DTYPE_BITS))]
    raw = header_bytes(specs, metadata)[0][8:]  # padded with spaces, as safetensors pads
    assert _decode_plain(raw) is not None
    assert parse_header(raw, source="x") == parse_header_precisely(raw, source="x")


def test_a_header_written_by_safetensors_takes_the_fast_path() -> None:
    numpy = pytest.importorskip("numpy")
    from safetensors.numpy import save

    blob = save({"b": numpy.zeros((3, 2), numpy.float16), "a": numpy.ones(5, numpy.int64)}, metadata={"k": "v"})
    raw = blob[8 : 8 + int.from_bytes(blob[:8], "little")]
    assert _decode_plain(raw) is not None
    assert parse_header(raw, source="x", file_size=len(blob)).metadata == {"k": "v"}


# --- the index (and any JSON whose keys must be unique) ---------------------------------------------------------


def stdlib(raw: bytes) -> Any:
    try:
        return json.loads(raw, object_pairs_hook=reject_duplicate_keys)
    except Exception:
        return None


@pytest.mark.parametrize(
    "raw",
    [
        '{"weight_map":{"a":"x.safetensors","a":"x.safetensors"},"metadata":{"total_size":1}}',
        '{"weight_map":{"a":"x.safetensors"},"metadata":{"total_size":1,"total_size":1}}',
        '{"weight_map":{"a":"x.safetensors"},"metadata":{"k":["s",{"t":"u"}]}}',
        '{"weight_map":{"a\\"":"x.safetensors"}}',
        '{"weight_map":{"a":"x.safetensors"},"x":NaN}',
        '{"weight_map":{"a":1.5e400}}',
        "[1, 2]",
        '"just a string"',
    ],
)
def test_index_json_decodes_like_the_standard_library_or_falls_back(raw: str) -> None:
    fast = checkpoint._decode_plain(raw.encode())
    assert fast is None or fast == stdlib(raw.encode())


@MANY
@given(
    weight_map=st.dictionaries(st.text(max_size=6), st.text(max_size=6) | st.integers(), max_size=6),
    twice=st.booleans(),
)
def test_index_documents_agree(weight_map: dict[str, Any], twice: bool) -> None:
    raw = json_bytes({"metadata": {"total_size": 1}, "weight_map": weight_map})
    if twice and weight_map:  # name the first key again
        key = json.dumps(next(iter(weight_map)), ensure_ascii=False)
        raw = raw.replace(b'"weight_map": {', b'"weight_map": {' + key.encode() + b": 0, ", 1)
    fast = checkpoint._decode_plain(raw)
    assert fast is None or fast == stdlib(raw)
    assert (fast is None) >= (stdlib(raw) is None)


@pytest.mark.parametrize(
    "offsets",
    [
        [[2, 4], [0, 2], [4, 6]],  # out of data order: tiles once sorted
        [[0, 2], [2, 4], [5, 7]],  # in data order, with a gap
        [[0, 2], [1, 3], [3, 5]],  # in data order, overlapping
        [[2, 4], [0, 2], [3, 5]],  # out of order and overlapping
        [[0, 2], [0, 2], [2, 4]],  # a span twice
    ],
)
def test_entries_in_any_data_order_agree_with_the_precise_path(offsets: list[list[int]]) -> None:
    """The fast path checks the tiling as it goes when the entries come in data order, and sorts them otherwise."""
    raw = json_bytes({f"w{i}": {"dtype": "F16", "shape": [1], "data_offsets": span} for i, span in enumerate(offsets)})
    assert_fast_agrees(raw)
    assert (_decode_plain(raw) is not None) == (precise(raw) is not None)
