"""The torch-free writer of ``.bin``/``.pt`` test files (tests/torch_files.py) against torch itself."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from torch_files import write_torch_file

from ckptdiff.sources.torch_pickle import read_archive

TENSORS = {
    "fc.weight": ("F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
    "embed.weight": ("BF16", [4, 2], None),
    "step": ("I64", [], struct.pack("<q", 1200)),
    "mask": ("BOOL", [5], bytes([1, 0, 1, 0, 1])),
    "wide": ("F16", [70000], None),  # an element count past one byte and two
}


def test_ckptdiff_reads_names_shapes_and_dtypes(tmp_path: Path) -> None:
    path = write_torch_file(tmp_path / "pytorch_model.bin", TENSORS)
    infos = read_archive(path).tensor_infos("pytorch_model.bin")
    assert {name: (info.dtype, list(info.shape)) for name, info in infos.items()} == {
        name: (dtype, shape) for name, (dtype, shape, _) in TENSORS.items()
    }


@pytest.mark.torch
def test_torch_loads_what_the_writer_writes(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = write_torch_file(tmp_path / "model.pt", TENSORS)
    state = torch.load(path, weights_only=True)
    assert list(state) == list(TENSORS)
    dtypes = {
        "F32": torch.float32,
        "BF16": torch.bfloat16,
        "I64": torch.int64,
        "BOOL": torch.bool,
        "F16": torch.float16,
    }
    for name, (dtype, shape, _) in TENSORS.items():
        assert state[name].dtype == dtypes[dtype] and list(state[name].shape) == shape, name
    assert state["fc.weight"].tolist() == [[1, 2, 3], [4, 5, 6]] and state["step"].item() == 1200
    assert state["mask"].tolist() == [True, False, True, False, True] and not state["embed.weight"].any()


@pytest.mark.torch
def test_it_reads_like_the_file_torch_writes(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    ours = write_torch_file(tmp_path / "ours" / "pytorch_model.bin", TENSORS)
    theirs = tmp_path / "theirs" / "pytorch_model.bin"
    theirs.parent.mkdir()
    torch.save(torch.load(ours, weights_only=True), theirs)

    def described(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
        return {n: (i.dtype, tuple(i.shape)) for n, i in read_archive(path).tensor_infos("pytorch_model.bin").items()}

    assert described(ours) == described(theirs)  # the data offsets differ: torch aligns storages to 64 bytes
