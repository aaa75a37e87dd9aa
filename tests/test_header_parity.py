"""The header parser never accepts what the format's reference refuses: generated headers go through both
ckptdiff's parser and the ``safetensors`` package (the Rust reference, pinned in setup.cfg's ``test`` extra so its
rules cannot move under the test). ckptdiff may refuse more (unknown keys, duplicate keys, tensors named with
control characters), and names why; where both accept, they agree on every tensor.

Shapes like ``[0, 2**64]`` were accepted before (finding 15): a dim over the reference's 64-bit size type is
not a number it reads, however a zero before it keeps the product small.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptdiff.dtypes import DTYPE_BITS
from ckptdiff.errors import HeaderError
from ckptdiff.safetensors_header import parse_file_prefix

safetensors = pytest.importorskip("safetensors")

#: Numbers at the edges of the reference's integer types, and values of the wrong type.
EDGE_NUMBERS = [0, 1, 2, 3, 7, 2**31, 2**32, 2**61, 2**62, 2**63, 2**64 - 1, 2**64, 2**65, -1]
ODD_VALUES = [1.0, True, None, "1", [1]]
DTYPES = [*DTYPE_BITS, "F128", "f32", "BOOL ", ""]

dims = st.one_of(st.sampled_from(EDGE_NUMBERS), st.integers(0, 5), st.sampled_from(ODD_VALUES))
# The strategies a header is drawn from, built once: built inside the composite, their construction and
# validation on every draw took most of the test's time (the same headers either way).
TENSOR_COUNTS = st.integers(0, 3)
DTYPE_NAMES = st.sampled_from(DTYPES)
SHAPES = st.lists(dims, max_size=4)
EDGE_NUMBER = st.sampled_from(EDGE_NUMBERS)
EDGE_PAIRS = st.lists(EDGE_NUMBER, min_size=2, max_size=2)
COINS = st.booleans()
NAMES = st.sampled_from(["w", "b", "x.y", "é", "w\u200b"])
METADATA = st.sampled_from([{}, {"format": "pt"}, {"a": 1}, None, []])
DATA_BYTES = st.integers(0, 64)


@st.composite
def headers(draw: Any) -> tuple[dict[str, Any], int]:
    """A header (tensors laid out one after another, or with drawn offsets) and how many data bytes follow it."""
    header: dict[str, Any] = {}
    offset = 0
    for index in range(draw(TENSOR_COUNTS)):
        dtype = draw(DTYPE_NAMES)
        shape = draw(SHAPES)
        numel = 1
        for dim in shape:
            numel *= dim if type(dim) is int else 1
        nbytes = numel * DTYPE_BITS.get(dtype, 8) // 8
        nbytes = nbytes if 0 <= nbytes < 4096 else draw(EDGE_NUMBER)
        offsets = draw(EDGE_PAIRS) if draw(COINS) else [offset, offset + nbytes]  # shrinks to the laid-out ones
        entry: dict[str, Any] = {"dtype": dtype, "shape": shape, "data_offsets": offsets}
        if draw(COINS) and draw(COINS):
            entry["extra"] = 1
        header[draw(NAMES) + str(index)] = entry
        if isinstance(offsets[1], int) and 0 <= offsets[1] < 4096:
            offset = max(offset, offsets[1])
    if draw(COINS):
        header["__metadata__"] = draw(METADATA)
    data = draw(DATA_BYTES) if draw(COINS) else offset
    return header, data


def file_bytes(header: dict[str, Any], data: int) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + bytes(data)


def reference(blob: bytes) -> dict[str, tuple[str, list[int]]] | None:
    """The tensors the reference reads from a file's bytes, or None when it refuses them."""
    try:
        return {name: (t["dtype"], list(t["shape"])) for name, t in safetensors.deserialize(blob)}
    except Exception:  # noqa: BLE001 - the reference's refusal, whatever its type
        return None


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headers())
def test_every_header_ckptdiff_accepts_the_reference_accepts_alike(generated):
    header, data = generated
    blob = file_bytes(header, data)
    try:
        ours = parse_file_prefix(blob, source="x.safetensors", file_size=len(blob))
    except HeaderError:
        return  # refused: ckptdiff may be stricter than the reference
    theirs = reference(blob)
    assert theirs is not None, f"ckptdiff accepts a header the reference refuses: {header}"
    assert {name: (t.dtype, list(t.shape)) for name, t in ours.tensors.items()} == theirs


@pytest.mark.parametrize(
    "shape",
    [[0, 2**64], [2**64, 0], [0, 2**64 - 1, 2**64], [0, 2**70]],
)
def test_a_dim_beyond_64_bits_is_refused_as_the_reference_refuses_it(shape):
    """Finding 15: two files with such shapes were read as compatible; now neither is read."""
    blob = file_bytes({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}, 0)
    assert reference(blob) is None
    with pytest.raises(HeaderError, match=r"has a dim over 2\*\*64 - 1"):
        parse_file_prefix(blob, source="x.safetensors", file_size=len(blob))


def test_a_bit_count_beyond_64_bits_is_refused_as_the_reference_refuses_it():
    blob = file_bytes({"w": {"dtype": "F32", "shape": [2**61], "data_offsets": [0, 2**63]}}, 0)
    assert reference(blob) is None
    with pytest.raises(HeaderError, match="overflows the bit count"):
        parse_file_prefix(blob, source="x.safetensors", file_size=None)


def test_the_reference_is_the_pinned_release():
    """Bump the pin in setup.cfg and this line together, after rerunning the differential test."""
    assert safetensors.__version__ == "0.8.0"
