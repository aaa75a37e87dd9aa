"""Torch zip checkpoints (.bin/.pt): names, shapes and dtypes read without torch and without running pickle code."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ckptdiff.errors import CkptdiffError, SourceError
from ckptdiff.sources import resolve
from ckptdiff.sources.torch_pickle import read_archive
from fixtures.generate import small_drafter_config, write_drafter

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

REPO = Path(__file__).resolve().parent.parent


def sample_state_dict() -> dict[str, object]:
    generator = torch.Generator().manual_seed(0)
    shared = torch.randn(6, 4, generator=generator).to(torch.bfloat16)
    state = {
        "embed.weight": torch.randn(10, 4, generator=generator).to(torch.bfloat16),
        "proj.weight": torch.randn(3, 5, generator=generator),
        "proj.bias": torch.nn.Parameter(torch.randn(3, generator=generator)),
        "half": torch.randn(2, 2, generator=generator).to(torch.float16),
        "ids": torch.arange(7, dtype=torch.int64),
        "mask": torch.ones(5, dtype=torch.bool),
        "scalar": torch.tensor(3.0),
        "row_view": shared[2],  # a view into a bigger storage, at an offset
        "transposed": torch.randn(4, 3, generator=generator).t(),  # strided: not contiguous
    }
    if hasattr(torch, "float8_e4m3fn"):
        state["fp8.e4m3"] = torch.randn(4, 8, generator=generator).to(torch.float8_e4m3fn)
        state["fp8.e5m2"] = torch.randn(8, generator=generator).to(torch.float8_e5m2)
    return state


EXPECTED_DTYPES = {
    torch.bfloat16: "BF16",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.int64: "I64",
    torch.bool: "BOOL",
    getattr(torch, "float8_e4m3fn", None): "F8_E4M3",
    getattr(torch, "float8_e5m2", None): "F8_E5M2",
}


def test_names_shapes_and_dtypes_match_what_torch_saved(tmp_path: Path) -> None:
    state = sample_state_dict()
    torch.save(state, tmp_path / "model.pt")

    checkpoint = resolve(str(tmp_path / "model.pt"))

    assert set(checkpoint.tensors) == set(state)
    for name, tensor in state.items():
        info = checkpoint.tensors[name]
        assert info.shape == tuple(tensor.shape), name
        assert info.dtype == EXPECTED_DTYPES[tensor.dtype], name
        assert info.file == "model.pt"
    assert checkpoint.files[0].size == (tmp_path / "model.pt").stat().st_size


def test_contiguous_tensor_offsets_point_at_their_bytes(tmp_path: Path) -> None:
    state = sample_state_dict()
    torch.save(state, tmp_path / "model.pt")
    raw = (tmp_path / "model.pt").read_bytes()

    archive = read_archive(tmp_path / "model.pt")
    infos = archive.tensor_infos("model.pt")

    for name, tensor in state.items():
        begin, end = infos[name].data_offsets
        assert end - begin == tensor.numel() * tensor.element_size()
        if archive.records[name].contiguous:
            expected = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            assert raw[begin:end] == expected, name
    assert not archive.records["transposed"].contiguous


def test_metadata_is_read_without_importing_torch(tmp_path: Path) -> None:
    torch.save(sample_state_dict(), tmp_path / "pytorch_model.bin")
    script = (
        "import sys; from ckptdiff.sources import resolve; "
        f"c = resolve({str(tmp_path)!r}); print(len(c.tensors)); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(sample_state_dict()))


@pytest.mark.parametrize("key", ["state_dict", "model"])
def test_state_dict_nested_under_a_usual_key(tmp_path: Path, key: str) -> None:
    state = sample_state_dict()
    torch.save({key: state, "epoch": 3, "step": 1200}, tmp_path / "checkpoint.pt")

    assert set(resolve(str(tmp_path / "checkpoint.pt")).tensors) == set(state)


def test_a_module_state_dict_with_its_metadata(tmp_path: Path) -> None:
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    torch.save(module.state_dict(), tmp_path / "pytorch_model.bin")

    tensors = resolve(str(tmp_path)).tensors

    assert {name: info.shape for name, info in tensors.items()} == {
        "0.weight": (3, 4),
        "0.bias": (3,),
        "1.weight": (3,),
        "1.bias": (3,),
    }


def test_sharded_index(tmp_path: Path) -> None:
    state = sample_state_dict()
    names = sorted(state)
    shards = {"pytorch_model-00001-of-00002.bin": names[:4], "pytorch_model-00002-of-00002.bin": names[4:]}
    weight_map = {}
    for shard, members in shards.items():
        torch.save({name: state[name] for name in members}, tmp_path / shard)
        weight_map.update(dict.fromkeys(members, shard))
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))

    checkpoint = resolve(str(tmp_path))

    assert {name: info.file for name, info in checkpoint.tensors.items()} == weight_map
    assert sorted(f.path for f in checkpoint.files) == sorted(shards)


def test_index_that_disagrees_with_its_shards(tmp_path: Path) -> None:
    torch.save({"a": torch.zeros(2)}, tmp_path / "shard1.bin")
    index = {"weight_map": {"a": "shard1.bin", "b": "shard1.bin"}}
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))

    with pytest.raises(CkptdiffError, match="'b' is listed in the index"):
        resolve(str(tmp_path))


def test_legacy_non_zip_format_is_refused_with_a_clear_line(tmp_path: Path) -> None:
    torch.save({"w": torch.zeros(3)}, tmp_path / "old.bin", _use_new_zipfile_serialization=False)

    with pytest.raises(SourceError, match="legacy .*not supported") as caught:
        resolve(str(tmp_path / "old.bin"))
    assert "\n" not in caught.value.line()


# --- a hostile pickle ----------------------------------------------------------------------------------


class _Canary:
    """Pickles to a call of ``function(*args)``: what a malicious checkpoint does."""

    def __init__(self, function: object, *args: object) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return self.function, self.args


def hostile_checkpoint(path: Path, payload: object) -> Path:
    """A real torch.save archive whose data.pkl also carries ``payload`` next to the tensors."""
    torch.save({"w": torch.zeros(3)}, path)
    with zipfile.ZipFile(path) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    pkl = next(name for name in entries if name.endswith("/data.pkl"))
    # A state dict holding the payload; the storage entries stay as torch wrote them.
    buffer = io.BytesIO()
    pickle.Pickler(buffer, protocol=2, fix_imports=False).dump({"evil": payload})
    entries[pkl] = buffer.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize(
    "payload, refused",
    [
        (lambda canary: _Canary(os.system, f"touch {canary}"), f"{os.system.__module__}.system"),
        (lambda canary: _Canary(exec, f"open({str(canary)!r}, 'w').close()"), "builtins.exec"),
        (lambda canary: _Canary(open, str(canary), "w"), "io.open"),
        (lambda canary: _Canary(subprocess.call, ["touch", str(canary)]), "subprocess.call"),
    ],
    ids=["os.system", "builtins.exec", "open", "subprocess.call"],
)
def test_a_pickle_that_would_create_a_file_is_refused_and_nothing_runs(
    tmp_path: Path, run_cli, payload, refused: str
) -> None:
    canary = tmp_path / "canary"
    path = hostile_checkpoint(tmp_path / "pytorch_model.bin", payload(canary))

    with pytest.raises(CkptdiffError) as caught:
        resolve(str(path))
    done = run_cli(str(path), str(path))

    assert f"refuses to load global {refused}" in caught.value.line()
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"refuses to load global {refused}" in done.stderr and done.stderr.count("\n") == 1
    assert not canary.exists()


def test_the_canary_is_live_when_torch_loads_it_unsafely(tmp_path: Path) -> None:
    """The refused file really is dangerous: an unrestricted unpickler runs the payload."""
    canary = tmp_path / "canary"
    path = hostile_checkpoint(tmp_path / "evil.bin", _Canary(os.system, f"touch {canary}"))

    with pytest.raises(pickle.UnpicklingError):  # torch's own safe default refuses too
        torch.load(path, weights_only=True)
    assert not canary.exists()
    torch.load(path, weights_only=False)
    assert canary.exists()


def test_unknown_storage_type_is_refused(tmp_path: Path) -> None:
    torch.save({"q": torch.zeros(2, dtype=torch.complex128)}, tmp_path / "c.pt")

    with pytest.raises(CkptdiffError, match="ComplexDoubleStorage"):
        resolve(str(tmp_path / "c.pt"))


# --- against safetensors ------------------------------------------------------------------------------


def test_a_bin_drafter_is_compatible_with_the_same_tensors_in_safetensors(tmp_path: Path, run_cli) -> None:
    config = small_drafter_config()
    safetensors_side = write_drafter(tmp_path / "st", config, with_embed=False, fill="random", seed=5)
    bin_side = tmp_path / "bin"
    bin_side.mkdir()
    (bin_side / "config.json").write_text((safetensors_side / "config.json").read_text())
    state = safetensors_torch.load_file(safetensors_side / "model.safetensors")
    torch.save(state, bin_side / "pytorch_model.bin")

    done = run_cli(str(bin_side), str(safetensors_side), "--format", "json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "compatible"
    assert report["counts"]["match"] == len(state)


def test_a_bin_drafter_against_a_safetensors_one_with_a_different_shape(tmp_path: Path, run_cli) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    state = safetensors_torch.load_file(REPO / "fixtures" / "kimi-k25-eagle3-two-aux" / "model.safetensors")
    torch.save(state, ours / "pytorch_model.bin")

    done = run_cli(str(ours / "pytorch_model.bin"), str(REPO / "fixtures" / "kimi-k25-eagle3-ours"))

    assert done.returncode == 1, done.stderr
    assert "fc.weight" in done.stdout and "shape_mismatch" in done.stdout
