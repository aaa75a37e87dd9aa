"""Local checkpoints: a file, a folder, a sharded index — and the index checked against its shards."""

from __future__ import annotations

import json

import pytest

from ckptdiff.errors import CkptdiffError, SourceError
from ckptdiff.sources import HubSpec, LocalSpec, parse_spec, resolve
from fixtures.generate import write_config, write_safetensors

SHARD_1 = [("model.embed.weight", "BF16", [16, 8]), ("model.layers.0.w", "F32", [8, 8])]
SHARD_2 = [("model.layers.1.w", "F32", [8, 8]), ("lm_head.weight", "BF16", [16, 8])]


def write_sharded(folder, weight_map=None):
    write_safetensors(folder / "model-00001-of-00002.safetensors", SHARD_1)
    write_safetensors(folder / "model-00002-of-00002.safetensors", SHARD_2)
    if weight_map is None:
        weight_map = {name: "model-00001-of-00002.safetensors" for name, _, _ in SHARD_1}
        weight_map |= {name: "model-00002-of-00002.safetensors" for name, _, _ in SHARD_2}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def test_single_file_folder_and_index_are_read_alike(tmp_path):
    single = tmp_path / "single"
    write_safetensors(single / "model.safetensors", SHARD_1 + SHARD_2)
    write_config(single, {"hidden_size": 8})
    sharded = write_sharded(tmp_path / "sharded")

    by_file = resolve(str(single / "model.safetensors"))
    by_folder = resolve(str(single))
    by_index = resolve(str(sharded))
    by_index_file = resolve(str(sharded / "model.safetensors.index.json"))

    names = {"model.embed.weight", "model.layers.0.w", "model.layers.1.w", "lm_head.weight"}
    for checkpoint in (by_file, by_folder, by_index, by_index_file):
        assert set(checkpoint.tensors) == names
        assert checkpoint.kind == "local" and checkpoint.revision is None
        assert checkpoint.tensors["lm_head.weight"].shape == (16, 8)
    assert by_folder.config == {"hidden_size": 8} and by_index.config is None
    assert len(by_index.files) == 2 and by_index.tensors["lm_head.weight"].file == "model-00002-of-00002.safetensors"
    assert by_index.parameters == 16 * 8 * 2 + 64 * 2
    assert by_index.dtype_totals() == {"BF16": (256, 512), "F32": (128, 512)}


def test_data_offsets_are_absolute_in_the_file(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", SHARD_1, fill="random")
    checkpoint = resolve(str(tmp_path))
    first = checkpoint.tensors["model.embed.weight"]
    size = (tmp_path / "model.safetensors").stat().st_size
    assert checkpoint.tensors["model.layers.0.w"].data_offsets[1] == size
    assert first.data_offsets[0] == size - 16 * 8 * 2 - 8 * 8 * 4


def test_loose_shards_without_index_are_merged(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", SHARD_1)
    write_safetensors(tmp_path / "b.safetensors", SHARD_2)
    assert len(resolve(str(tmp_path)).tensors) == 4


def test_wanted_reads_only_the_shards_that_hold_them(tmp_path):
    folder = write_sharded(tmp_path)
    (folder / "model-00002-of-00002.safetensors").unlink()  # proves shard 2 is never opened
    checkpoint = resolve(str(folder), wanted={"model.embed.weight"})
    assert set(checkpoint.tensors) == {"model.embed.weight", "model.layers.0.w"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.pop("lm_head.weight"), "'lm_head.weight' is in shard model-00002-of-00002.safetensors but not"),
        (lambda m: m.update({"ghost": "model-00001-of-00002.safetensors"}), "'ghost' is listed in the index"),
        (lambda m: m.update({"lm_head.weight": "model-00001-of-00002.safetensors"}), "is listed in model-00001"),
        (lambda m: m.update({"x": "model-00003-of-00002.safetensors"}), "shard model-00003-of-00002.safetensors"),
        (lambda m: m.update({"x": "../outside.safetensors"}), "escapes the checkpoint folder"),
        (lambda m: m.update({"x": "/etc/passwd"}), "is absolute"),
    ],
)
def test_index_is_checked_against_shard_headers(tmp_path, edit, message):
    weight_map = {name: "model-00001-of-00002.safetensors" for name, _, _ in SHARD_1}
    weight_map |= {name: "model-00002-of-00002.safetensors" for name, _, _ in SHARD_2}
    edit(weight_map)
    folder = write_sharded(tmp_path, weight_map)
    with pytest.raises(CkptdiffError, match=message) as err:
        resolve(str(folder))
    assert "model.safetensors.index.json" in err.value.line()


def test_a_shard_the_index_names_that_is_a_folder_says_so(tmp_path, run_cli):
    """A shard copied as a folder (``cp -r`` of an unpacked download): the index and the shard are named, and the
    shard is a folder, not "missing"; so for a --base read of only the shards a run needs."""
    folder = write_sharded(tmp_path / "sharded")
    shard = folder / "model-00002-of-00002.safetensors"
    shard.unlink()
    shard.mkdir()
    result = run_cli(str(folder), str(folder))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"ckptdiff: {folder / 'model.safetensors.index.json'}: shard model-00002-of-00002.safetensors listed in the "
        "index is a folder, not a file\n"
    )
    with pytest.raises(CkptdiffError, match="model-00002-of-00002.safetensors listed in the index is a folder, not"):
        resolve(str(folder), wanted={"lm_head.weight"})


def test_one_tensor_in_two_shards_is_refused(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", SHARD_1)
    write_safetensors(tmp_path / "b.safetensors", SHARD_1[:1])
    with pytest.raises(CkptdiffError, match="'model.embed.weight' is stored in two shards"):
        resolve(str(tmp_path))


def test_a_folder_without_weights_says_what_it_holds(tmp_path):
    (tmp_path / "pytorch_model.bin.txt").write_text("x")
    with pytest.raises(SourceError, match="no safetensors weights.*pytorch_model.bin.txt"):
        resolve(str(tmp_path))


def test_a_folder_whose_weights_are_in_a_subfolder_says_which_to_give(tmp_path):
    write_safetensors(tmp_path / "run" / "checkpoint-100" / "model.safetensors", SHARD_1)
    (tmp_path / "run" / "logs").mkdir()
    with pytest.raises(SourceError) as error:
        resolve(str(tmp_path / "run"))
    assert error.value.line().endswith(f"(its weights are in a subfolder: give {tmp_path / 'run' / 'checkpoint-100'})")

    write_safetensors(tmp_path / "run" / "checkpoint-200" / "model.safetensors", SHARD_1)
    with pytest.raises(SourceError, match=r"in subfolders: give one of .*checkpoint-100, .*checkpoint-200\)$"):
        resolve(str(tmp_path / "run"))


def test_a_file_not_named_like_weights_says_what_ckptdiff_reads(tmp_path):
    """``ckptdiff ./run/config.json ...`` or a Lightning ``.ckpt``: the line names torch files too, not only
    safetensors."""
    write_config(tmp_path, {"hidden_size": 8})
    with pytest.raises(SourceError) as error:
        resolve(str(tmp_path / "config.json"))
    assert error.value.line() == (
        f"{tmp_path / 'config.json'}: is not named like a weight file (ckptdiff reads safetensors files, folders and "
        "indexes, and torch .bin/.pt/.pth files)"
    )


def test_an_empty_folder_says_it_holds_no_files(tmp_path):
    (tmp_path / "only-a-folder").mkdir()
    with pytest.raises(SourceError, match=r"no safetensors weights .* \(it holds no files\)$"):
        resolve(str(tmp_path))


def test_specs_are_paths_or_hub_repos(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_spec("org/name") == HubSpec("org/name", None)
    assert parse_spec("org/name@v1.0") == HubSpec("org/name", "v1.0")
    assert isinstance(parse_spec("./org/name"), LocalSpec)  # ./ is always a path
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert isinstance(parse_spec("org/name"), LocalSpec)  # an existing path wins
    assert isinstance(parse_spec("/abs/x"), LocalSpec) and isinstance(parse_spec("~/x"), LocalSpec)
    with pytest.raises(SourceError, match="not a Hub repo id"):
        parse_spec("no-such-thing")


def test_a_torch_index_over_the_json_limit_is_refused_unread(tmp_path):
    """The torch index gets the same size guard as a safetensors index (one planner reads both)."""
    with open(tmp_path / "pytorch_model.bin.index.json", "wb") as handle:
        handle.write(b"{")
        handle.truncate(2**30)  # sparse: 1 GiB apparent, nothing on disk
    with pytest.raises(CkptdiffError, match=r"index is 1,073,741,824 bytes, over the 100,000,000-byte limit"):
        resolve(str(tmp_path))
