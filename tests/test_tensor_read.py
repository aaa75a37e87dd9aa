"""The single-tensor range read (ckptdiff.sources.tensor_read): exactly one tensor's bytes, in bounded pieces, from
a folder, the Hub (the emulator's byte counters) and S3 (moto's server, per-object counters)."""

from __future__ import annotations

import os
import random
import socket
import struct
from pathlib import Path

import pytest

from ckptdiff.errors import CkptdiffError, SourceError
from ckptdiff.sources import open_source, read_source, resolve
from ckptdiff.sources.tensor_read import copy_tensor, read_tensor, read_tensor_chunks
from fixtures.generate import write_config, write_safetensors

#: Small pieces, so a few-MB tensor crosses many piece boundaries.
PIECE = 256 * 1024


def write_base(folder: Path, *, rows: int = 700, width: int = 64) -> Path:
    """A two-shard checkpoint with an embedding big enough to need many pieces, random bytes throughout."""
    write_config(folder, {"architectures": ["LlamaForCausalLM"], "hidden_size": width, "vocab_size": rows})
    write_safetensors(
        folder / "model-00001-of-00002.safetensors",
        [("model.norm.weight", "BF16", [width]), ("model.embed_tokens.weight", "F32", [rows, width * 16])],
        fill="random",
        seed=1,
    )
    write_safetensors(
        folder / "model-00002-of-00002.safetensors",
        [("lm_head.weight", "BF16", [rows, width])],
        fill="random",
        seed=2,
    )
    index = {
        "metadata": {},
        "weight_map": {
            "model.norm.weight": "model-00001-of-00002.safetensors",
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors",
        },
    }
    import json

    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def tensor_bytes_on_disk(folder: Path, spec: str, name: str) -> bytes:
    """The tensor's bytes read by hand from the file (the reference)."""
    info = resolve(spec).tensors[name]
    begin, end = info.data_offsets
    with open(folder / info.file, "rb") as handle:
        handle.seek(begin)
        return handle.read(end - begin)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write_base(tmp_path / "base")


# --- local ----------------------------------------------------------------------------------------------------


def test_a_local_tensor_is_its_bytes_in_bounded_pieces(base):
    checkpoint = resolve(str(base))
    source = open_source(str(base))
    embed = checkpoint.tensors["model.embed_tokens.weight"]

    pieces = list(read_tensor_chunks(source, embed, chunk_size=PIECE))

    assert b"".join(pieces) == tensor_bytes_on_disk(base, str(base), "model.embed_tokens.weight")
    assert max(map(len, pieces)) <= PIECE and len(pieces) > 5
    assert read_tensor(source, checkpoint.tensors["model.norm.weight"]) == tensor_bytes_on_disk(
        base, str(base), "model.norm.weight"
    )


def test_copy_tensor_writes_the_bytes_at_the_offset_asked(base, tmp_path):
    checkpoint = resolve(str(base))
    source = open_source(str(base))
    embed = checkpoint.tensors["model.embed_tokens.weight"]
    size = embed.data_offsets[1] - embed.data_offsets[0]
    out_path = tmp_path / "out.bin"
    out = os.open(out_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(out, b"H" * 100, 0)
        assert sum(copy_tensor(source, embed, out, 100, chunk_size=PIECE)) == size
    finally:
        os.close(out)

    data = out_path.read_bytes()
    assert data[:100] == b"H" * 100
    assert data[100:] == tensor_bytes_on_disk(base, str(base), "model.embed_tokens.weight")


def test_a_file_cut_short_is_one_line_naming_it(base):
    checkpoint = resolve(str(base))
    embed = checkpoint.tensors["model.embed_tokens.weight"]
    shard = base / embed.file
    os.truncate(shard, embed.data_offsets[0] + 1000)

    with pytest.raises(SourceError) as raised:
        b"".join(read_tensor_chunks(open_source(str(base)), embed, chunk_size=PIECE))

    assert str(shard) in str(raised.value) and "1000 of the" in str(raised.value)


def test_a_symlink_out_of_the_folder_is_not_read(base, tmp_path):
    checkpoint = resolve(str(base))
    embed = checkpoint.tensors["model.embed_tokens.weight"]
    outside = tmp_path / "elsewhere.safetensors"
    (base / embed.file).rename(outside)
    (base / embed.file).symlink_to(outside)

    with pytest.raises(CkptdiffError, match="symlink"):
        list(read_tensor_chunks(open_source(str(base)), embed))
    out = os.open(tmp_path / "copy", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with pytest.raises(CkptdiffError, match="symlink"):
            list(copy_tensor(open_source(str(base)), embed, out, 0))
    finally:
        os.close(out)


# --- the Hub --------------------------------------------------------------------------------------------------


def test_a_hub_tensor_reads_only_its_bytes_plus_headers(hub_client, base):
    hub_client.add_repo("org/base", base)
    source = open_source("org/base")
    checkpoint = read_source(source)
    embed = checkpoint.tensors["model.embed_tokens.weight"]
    size = embed.data_offsets[1] - embed.data_offsets[0]
    header_bytes = hub_client.bytes_sent["resolve"]
    hub_client.reset_counters()

    pieces = list(read_tensor_chunks(source, embed, chunk_size=PIECE))

    assert b"".join(pieces) == tensor_bytes_on_disk(base, str(base), "model.embed_tokens.weight")
    assert max(map(len, pieces)) <= PIECE
    assert hub_client.bytes_sent["resolve"] == size  # exactly the tensor: one ranged GET
    assert hub_client.requests["resolve"] == 1
    assert hub_client.log[-1].range == f"bytes={embed.data_offsets[0]}-{embed.data_offsets[1] - 1}"
    assert header_bytes + size <= 1.01 * size + header_bytes  # the metadata read and the tensor, nothing more
    assert f"/resolve/{checkpoint.revision}/" in hub_client.log[-1].path  # pinned to the commit read


def test_a_hub_body_broken_off_is_resumed_from_the_byte_reached(hub_client, base):
    hub_client.add_repo("org/base", base)
    source = open_source("org/base")
    embed = read_source(source).tensors["model.embed_tokens.weight"]
    begin, end = embed.data_offsets
    expected = tensor_bytes_on_disk(base, str(base), "model.embed_tokens.weight")
    state = {"left": 1}

    def break_first(request) -> bool:
        if request.method != "GET" or "Range" not in request.headers or not state["left"]:
            return False
        state["left"] -= 1
        handler, cut = request.handler, 300_000
        request.log.status = 206
        handler.send_response(206)
        handler.send_header("Content-Range", f"bytes {begin}-{end - 1}/{(base / embed.file).stat().st_size}")
        handler.send_header("Content-Length", str(end - begin))
        handler.end_headers()
        handler.wfile.write(expected[:cut])
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return True

    hub_client.hooks.append(break_first)
    hub_client.reset_counters()

    data = b"".join(read_tensor_chunks(source, embed, chunk_size=PIECE))

    assert data == expected
    ranges = [entry.range for entry in hub_client.log if entry.range]
    assert ranges[0] == f"bytes={begin}-{end - 1}"
    assert ranges[-1].startswith("bytes=") and int(ranges[-1][6:].split("-")[0]) > begin  # resumed, not restarted


def test_a_hub_that_ignores_range_is_read_only_to_the_tensors_end(hub_client, base):
    hub_client.add_repo("org/base", base)
    source = open_source("org/base")
    norm = read_source(source).tensors["model.norm.weight"]
    hub_client.ignore_range = True

    data = b"".join(read_tensor_chunks(source, norm, chunk_size=PIECE))

    assert data == tensor_bytes_on_disk(base, str(base), "model.norm.weight")


# --- S3 -------------------------------------------------------------------------------------------------------


def test_an_s3_tensor_reads_exactly_its_bytes(s3, base, tmp_path):
    s3.upload(base, "tensors/base")
    source = open_source("s3://tensors/base")
    embed = read_source(source).tensors["model.embed_tokens.weight"]
    size = embed.data_offsets[1] - embed.data_offsets[0]
    key = f"tensors/base/{embed.file}"
    s3.reset_counters()

    pieces = list(read_tensor_chunks(source, embed, chunk_size=PIECE))

    assert b"".join(pieces) == tensor_bytes_on_disk(base, str(base), "model.embed_tokens.weight")
    assert max(map(len, pieces)) <= PIECE
    assert s3.bytes_sent[key] == size
    out_path = tmp_path / "copied"
    out = os.open(out_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert sum(copy_tensor(source, embed, out, 0, chunk_size=PIECE)) == size
    finally:
        os.close(out)
    assert out_path.read_bytes() == b"".join(pieces)


def test_an_s3_object_shorter_than_its_header_says_is_one_line(s3, base, tmp_path):
    checkpoint = resolve(str(base))
    embed = checkpoint.tensors["model.embed_tokens.weight"]
    s3.upload(base, "tensors/cut")
    source = open_source("s3://tensors/cut")
    read_source(source)
    s3.short_after[f"tensors/cut/{embed.file}"] = embed.data_offsets[0] + 5000

    with pytest.raises(CkptdiffError) as raised:
        list(read_tensor_chunks(source, embed, chunk_size=PIECE))

    assert "s3://tensors/cut/" in str(raised.value)


def test_random_ranges_match_the_file(base):
    """Every piece size, including ones that do not divide the tensor, gives the same bytes."""
    checkpoint = resolve(str(base))
    source = open_source(str(base))
    embed = checkpoint.tensors["model.embed_tokens.weight"]
    expected = tensor_bytes_on_disk(base, str(base), "model.embed_tokens.weight")
    for size in random.Random(3).sample(range(1, 3 * PIECE), 5):
        assert b"".join(read_tensor_chunks(source, embed, chunk_size=size)) == expected
