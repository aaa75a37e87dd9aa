"""Torch checkpoints as training scripts save them: a state dict nested under ``model``, ``state_dict``,
``module``, ``ema``... is found, anything else is refused naming the keys it holds, never read as a one-tensor
state dict; names that would break a report are refused; a zip bomb or a lying archive is refused unread."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest

from ckptdiff.errors import SourceError
from ckptdiff.sources import resolve
from ckptdiff.sources.torch_pickle import MAX_PICKLE_BYTES

torch = pytest.importorskip("torch")


def model(width: int) -> dict[str, object]:
    return {
        "embed.weight": torch.zeros(8, width),
        "fc.weight": torch.zeros(width, width),
        "fc.bias": torch.zeros(width),
    }


def test_a_training_checkpoint_is_read_as_its_model_not_as_its_loss(tmp_path: Path, run_cli) -> None:
    torch.save({"model": model(4), "best_loss": torch.tensor(0.5), "epoch": 3}, tmp_path / "a.pt")
    torch.save({"model": model(6), "best_loss": torch.tensor(0.5), "epoch": 3}, tmp_path / "b.pt")

    assert set(resolve(str(tmp_path / "a.pt")).tensors) == {"embed.weight", "fc.weight", "fc.bias"}
    result = run_cli(str(tmp_path / "a.pt"), str(tmp_path / "b.pt"), "--format", "json")
    assert result.returncode == 1, result.stderr  # two different models are not "compatible"
    statuses = {row["name"]: row["status"] for row in json.loads(result.stdout)["tensors"]}
    assert statuses["fc.weight"] == "shape_mismatch"


@pytest.mark.parametrize(
    "layout",
    [
        lambda sd: {"state_dict": sd, "optimizer": {"lr": 0.1}},
        lambda sd: {"module": sd, "step": torch.tensor(10)},
        lambda sd: {"ema": sd, "best_loss": torch.tensor(1.0)},
        lambda sd: {"model": sd, "ema": {k: v + 1 for k, v in sd.items()}},  # both: "model" comes first
        lambda sd: {"checkpoint": 1, "state_dict": {"model": sd}},  # two levels down
    ],
    ids=["state_dict", "module", "ema", "model-and-ema", "nested-twice"],
)
def test_a_state_dict_under_a_usual_key_is_found(tmp_path: Path, layout) -> None:
    torch.save(layout(model(4)), tmp_path / "ckpt.pt")

    assert set(resolve(str(tmp_path / "ckpt.pt")).tensors) == {"embed.weight", "fc.weight", "fc.bias"}


def test_a_state_dict_under_an_unknown_key_is_refused_naming_the_keys(tmp_path: Path, run_cli) -> None:
    torch.save({"weights": model(4), "best_loss": torch.tensor(0.5)}, tmp_path / "ckpt.pt")

    with pytest.raises(SourceError, match=r"top-level keys: best_loss, weights"):
        resolve(str(tmp_path / "ckpt.pt"))
    result = run_cli(str(tmp_path / "ckpt.pt"), str(tmp_path / "ckpt.pt"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "best_loss, weights" in result.stderr and "state_dict" in result.stderr


@pytest.mark.parametrize(
    "bad", ["fc\x1b[31m.weight", "fc\n.weight", "fc\udc80.weight"], ids=["ansi", "newline", "surrogate"]
)
def test_a_tensor_name_that_would_break_a_report_is_refused_in_one_line(tmp_path: Path, run_cli, bad: str) -> None:
    torch.save({bad: torch.zeros(2), "ok": torch.zeros(2)}, tmp_path / "ckpt.pt")

    result = run_cli(str(tmp_path / "ckpt.pt"), str(tmp_path / "ckpt.pt"), "--format", "json")

    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and "tensor name" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def _rewrite_pickle(path: Path, data: bytes, compression: int) -> None:
    torch.save({"w": torch.zeros(3)}, path)
    with zipfile.ZipFile(path) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    pkl = next(name for name in entries if name.endswith("/data.pkl"))
    entries[pkl] = data
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content, compress_type=compression if name == pkl else zipfile.ZIP_STORED)


def test_a_deflate_bomb_in_data_pkl_is_refused_before_it_inflates(tmp_path: Path) -> None:
    path = tmp_path / "bomb.pt"
    _rewrite_pickle(path, bytes(32 * 2**20), zipfile.ZIP_DEFLATED)  # 32 MiB of zeros in ~32 kB

    with pytest.raises(SourceError, match="zip bomb"):
        resolve(str(path))


def _patch_central_entry(path: Path, field: str, value: int) -> None:
    """Overwrite a size of data.pkl's central-directory entry (what zipfile trusts)."""
    raw = bytearray(path.read_bytes())
    at = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02"))
    while b"data.pkl" not in raw[at + 46 : at + 46 + struct.unpack_from("<H", raw, at + 28)[0]]:
        at = raw.index(b"PK\x01\x02", at + 4)
    offset = {"compressed": 20, "uncompressed": 24}[field]
    struct.pack_into("<I", raw, at + offset, value)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("field", ["compressed", "uncompressed"])
def test_a_central_directory_claiming_gigabytes_is_refused_unread(tmp_path: Path, field: str) -> None:
    path = tmp_path / "liar.pt"
    _rewrite_pickle(path, b"\x80\x02}q\x00.", zipfile.ZIP_STORED)
    _patch_central_entry(path, field, 3 * 2**30)

    with pytest.raises(SourceError, match=r"data\.pkl (claims|is) 3221225472 bytes"):
        resolve(str(path))
    assert MAX_PICKLE_BYTES < 3 * 2**30


def test_a_central_directory_size_beyond_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "liar.pt"
    torch.save({"w": torch.zeros(3)}, path)
    raw = bytearray(path.read_bytes())
    end = raw.rindex(b"PK\x05\x06")
    struct.pack_into("<I", raw, end + 12, 3 * 2**30)
    if b"PK\x06\x06" in raw:  # torch writes a zip64 end record too, whose size is the one readers take
        struct.pack_into("<Q", raw, raw.rindex(b"PK\x06\x06") + 40, 3 * 2**30)
    path.write_bytes(bytes(raw))

    with pytest.raises(SourceError, match="central directory claims 3221225472 bytes"):
        resolve(str(path))
