"""A ``.bin``'s data.pkl costs work in proportion to its size: a pickle whose memo references multiply what it builds
(lists holding the last list hundreds of times, a tuple key shared down a chain) is refused in one line before it is
unpickled, and what counts it is one pass over the opcodes, each object counted once (``pickle_shape``).
Built without torch: the archives are written as ``torch.save`` lays them out (tests/torch_files.py)."""

from __future__ import annotations

import pickle
import struct
import zipfile
from pathlib import Path

import pytest
from torch_files import state_dict_pickle, write_torch_file

from ckptdiff.sources.pickle_bounds import MAX_EXPANSION_BEYOND_OBJECTS, MAX_NESTING, pickle_shape


def memo_get(index: int) -> bytes:
    return pickle.BINGET + bytes([index]) if index < 256 else pickle.LONG_BINGET + struct.pack("<I", index)


def shared_lists(levels: int, width: int) -> bytes:
    """A pickle of ``levels`` lists, each holding the one before it ``width`` times (by memo reference), the last
    one its result: a few bytes per reference, expanding ``width ** levels``-fold as a tree."""
    out = [pickle.PROTO + b"\x02", pickle.EMPTY_LIST, pickle.BINPUT + b"\x00"]
    for level in range(1, levels + 1):
        out += [pickle.POP, pickle.MARK, memo_get(level - 1) * width, pickle.LIST]
        out += [pickle.LONG_BINPUT + struct.pack("<I", level)]
    return b"".join([*out, pickle.STOP])


def archive_with(path: Path, data_pkl: bytes, storages: int = 0) -> Path:
    """A torch zip checkpoint whose data.pkl is ``data_pkl``, with ``storages`` storages of 16 bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{path.stem}/data.pkl", data_pkl)
        archive.writestr(f"{path.stem}/byteorder", "little")
        for key in range(storages):
            archive.writestr(f"{path.stem}/data/{key}", bytes(16))
        archive.writestr(f"{path.stem}/version", "3\n")
    return path


def bomb_state_dict(levels: int, width: int) -> bytes:
    """A state dict with one tensor, ``w``, and ``x``: the shared lists, which the search for tensors nested in a
    checkpoint walks once per reference (``width ** levels`` times)."""
    tensor = state_dict_pickle({"w": ("F32", [4])})[: -len(pickle.SETITEMS + pickle.STOP)]  # its MARK still open
    lists = shared_lists(levels, width)[2:-1]  # without PROTO and STOP
    key = pickle.BINUNICODE + struct.pack("<I", 1) + b"x"
    return tensor + key + lists + pickle.SETITEMS + pickle.STOP


def test_the_findings_10_kb_pickle_is_refused_in_one_line(tmp_path, run_cli):
    """Finding 1: 800 memo-shared references per level, 10 KB, cost 139 s before; now one line, exit 2."""
    data = bomb_state_dict(levels=3, width=800)
    assert len(data) < 12_000
    bomb = archive_with(tmp_path / "pytorch_model.bin", data, storages=1)
    write_torch_file(tmp_path / "b" / "pytorch_model.bin", {"w": ("F32", [4], None)})

    result = run_cli(str(bomb), str(tmp_path / "b" / "pytorch_model.bin"))

    assert result.returncode == 2
    assert result.stderr.startswith(f"ckptdiff: {bomb}: data.pkl builds 28 objects that expand to over 1,000,056 ")
    assert "(a pickle bomb, not a state dict)" in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(("levels", "width"), [(3, 800), (40, 2), (2000, 2), (1, 200_000)])
def test_counting_is_one_pass_over_the_opcodes(levels, width):
    """Whatever a pickle expands to, counting it touches each opcode, object and reference once: the counts
    are linear in the pickle's size, and the expansion stops at its limit."""
    data = shared_lists(levels, width)
    shape = pickle_shape(data)
    assert shape.opcodes == 3 + levels * (width + 4) + 1  # PROTO, EMPTY_LIST, PUT; POP, MARK, GETs, LIST, PUT; STOP
    assert shape.objects == levels + 1 and shape.references == levels * width + 1
    expected = sum(width**k for k in range(levels + 1))  # a tree of lists: width**k lists at depth k
    assert shape.expands == min(expected, shape.limit + 1)
    assert (shape.expands > shape.limit) == (expected > 2 * shape.objects + MAX_EXPANSION_BEYOND_OBJECTS)


def test_a_state_dict_as_torch_writes_it_expands_to_about_its_size():
    """torch's own sharing (the storage type, OrderedDict) is one reference per tensor: far from the limit."""
    tensors = {f"model.layers.{i}.mlp.weight": ("BF16", [64, 64]) for i in range(5000)}
    shape = pickle_shape(state_dict_pickle(tensors))
    assert shape.expands <= 2 * shape.references and shape.expands <= shape.limit


def test_a_shared_tuple_key_is_refused_before_anything_hashes_it(tmp_path, run_cli):
    """Hashing a tuple of tuples shared down 2000 levels would never end: refused from the counts alone."""
    depth = 2000
    out = [pickle.PROTO + b"\x02", pickle.EMPTY_DICT, pickle.EMPTY_TUPLE, pickle.BINPUT + b"\x00"]
    for level in range(1, depth + 1):
        get = memo_get(level - 1)
        out += [pickle.POP, get, get, pickle.TUPLE2, pickle.LONG_BINPUT + struct.pack("<I", level)]
    out += [pickle.BININT1 + b"\x01", pickle.SETITEM, pickle.STOP]
    bomb = archive_with(tmp_path / "model.pt", b"".join(out))

    result = run_cli(str(bomb), str(bomb))

    assert result.returncode == 2 and "(a pickle bomb, not a state dict)" in result.stderr


@pytest.mark.parametrize(
    "data",
    [b"\x80\x02(\x94.", b"\x80\x02h\x05.", b"\x80\x02a.", b"\x80\x02(e.", b"\x80\x02]0."],
    ids=["memoized-mark", "unknown-memo", "append-to-nothing", "appends-without-list", "pop-then-stop"],
)
def test_a_malformed_pickle_is_one_line(tmp_path, run_cli, data):
    broken = archive_with(tmp_path / "model.pt", data)
    result = run_cli(str(broken), str(broken))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "data.pkl is not a readable tensor pickle" in result.stderr


def nested_tuple_key(depth: int) -> bytes:
    """A state dict whose one key is ``depth`` tuples, each holding the next (nothing shared): 2 bytes a level."""
    nested = pickle.BININT1 + b"\x01" + pickle.TUPLE1 * depth
    return pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + nested + pickle.BININT1 + b"\x01" + pickle.SETITEM + pickle.STOP


def test_a_key_nested_too_deep_to_hash_is_refused_not_a_crash(tmp_path, run_cli_subprocess):
    """The unpickler hashes a dict key by recursing in C with no depth check: 200,000 tuples (400 KB) overflowed
    the stack and the process died (SIGSEGV, no message). A subprocess, so a crash fails this test alone."""
    bomb = archive_with(tmp_path / "model.pt", nested_tuple_key(200_000))

    result = run_cli_subprocess(str(bomb), str(bomb))

    assert result.returncode == 2, (result.returncode, result.stderr[-500:])
    assert result.stderr == (
        f"ckptdiff: {bomb}: data.pkl nests objects 200,002 deep, more than the 1,000 ckptdiff reads "
        "(a pickle bomb, not a state dict)\n"
    )


@pytest.mark.parametrize(("depth", "refused"), [(997, False), (999, True)])
def test_nesting_is_counted_to_the_limit(tmp_path, depth, refused):
    """The dict, the key's tuples and the int: ``depth + 2`` levels, refused past 1,000."""
    shape = pickle_shape(nested_tuple_key(depth))
    assert shape.depth == depth + 2
    assert (shape.depth > MAX_NESTING) is refused


def test_a_state_dict_as_torch_writes_it_nests_a_few_levels():
    shape = pickle_shape(state_dict_pickle({f"layers.{i}.weight": ("BF16", [8, 8]) for i in range(100)}))
    assert shape.depth < 10
