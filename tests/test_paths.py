"""Nothing resolves outside the checkpoint: a config.json or shard symlinked out of its folder is refused in one
line (``--follow-symlinks`` reads it anyway), links that stay inside (or into a Hugging Face cache's blobs) are
read; the config-file search stops at the git root or the home directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptdiff.config_file import find_config
from fixtures.generate import write_safetensors

CANARY = "CredentialCanary9876"


def checkpoint(folder: Path, width: int = 4) -> Path:
    write_safetensors(folder / "model.safetensors", [("fc.weight", "F32", [width, width])])
    (folder / "config.json").write_text(json.dumps({"hidden_size": width}))
    return folder


def one_line(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".aws" / "credentials.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"aws_secret_access_key": CANARY}))
    return path


def test_a_config_json_symlinked_out_of_the_folder_is_refused(tmp_path, run_cli, secret):
    model = checkpoint(tmp_path / "model")
    (model / "config.json").unlink()
    (model / "config.json").symlink_to(secret)

    result = run_cli(str(model), str(checkpoint(tmp_path / "other")))

    one_line(result, str(model / "config.json"), "outside the checkpoint's folder", "--follow-symlinks")
    assert CANARY not in result.stdout + result.stderr


def test_a_shard_symlinked_out_of_the_folder_is_refused(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    elsewhere = checkpoint(tmp_path / "elsewhere")
    (model / "model.safetensors").unlink()
    (model / "model.safetensors").symlink_to(elsewhere / "model.safetensors")

    result = run_cli(str(model), str(elsewhere))

    one_line(result, "model.safetensors", "outside the checkpoint's folder")


def test_follow_symlinks_reads_them_anyway(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    shared = tmp_path / "shared-config.json"
    shared.write_text((model / "config.json").read_text())
    (model / "config.json").unlink()
    (model / "config.json").symlink_to(shared)

    result = run_cli(str(model), str(checkpoint(tmp_path / "other")), "--follow-symlinks")

    assert result.returncode == 0, result.stderr


def test_links_that_stay_inside_are_read(tmp_path, run_cli):
    model = checkpoint(tmp_path / "runs" / "ckpt-100")
    (model / "configs").mkdir()
    (model / "config.json").rename(model / "configs" / "config.json")
    (model / "config.json").symlink_to(Path("configs") / "config.json")
    (tmp_path / "runs" / "latest").symlink_to(model)  # the folder itself through a link

    result = run_cli(str(tmp_path / "runs" / "latest"), str(checkpoint(tmp_path / "other")))

    assert result.returncode == 0, result.stderr


def test_a_hugging_face_cache_snapshot_is_read(tmp_path, run_cli):
    """A snapshot's files are links into the repo's blobs/ folder, as huggingface_hub downloads them."""
    repo = tmp_path / "hub" / "models--org--drafter"
    source = checkpoint(tmp_path / "download")
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name in ("model.safetensors", "config.json"):
        blob = repo / "blobs" / f"blob-{name}"
        os.replace(source / name, blob)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob.name))

    result = run_cli(str(snapshot), str(checkpoint(tmp_path / "other")))

    assert result.returncode == 0, result.stderr


def test_a_hugging_face_cache_repo_folder_names_its_snapshot(tmp_path, run_cli):
    """``ckptdiff ~/.cache/huggingface/hub/models--org--drafter``: the weights are two folders down."""
    repo = tmp_path / "hub" / "models--org--drafter"
    commit = "b" * 40
    checkpoint(repo / "snapshots" / commit)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)

    result = run_cli(str(repo), str(checkpoint(tmp_path / "other")))

    one_line(result, f"(its weights are in a subfolder: give {repo / 'snapshots' / commit})")


@pytest.mark.parametrize("spec", ["snapshot", "snapshot/model.safetensors"])
def test_a_snapshot_whose_blob_was_deleted_names_the_broken_link(tmp_path, run_cli, spec):
    """Not "no safetensors weights (it holds: config.json)", nor "no such file or folder, and not a Hub repo id"."""
    snapshot = checkpoint(tmp_path / "models--org--drafter" / "snapshots" / "snapshot")
    (snapshot / "model.safetensors").unlink()
    (snapshot / "model.safetensors").symlink_to(Path("..", "..", "blobs", "deleted"))

    result = run_cli(str(snapshot.parent / spec), str(checkpoint(tmp_path / "other")))

    assert result.stderr == (
        f"ckptdiff: {snapshot / 'model.safetensors'}: is a broken symlink: the file it points to does not exist\n"
    )
    assert result.returncode == 2


def test_a_link_to_a_missing_file_outside_the_folder_is_named_broken_not_outside(tmp_path, run_cli):
    """Weights linked from another disk that is not mounted: "is a symlink to a file outside the checkpoint's
    folder (pass --follow-symlinks)" sent the user to a flag that only then said the file does not exist."""
    drafter = checkpoint(tmp_path / "drafter")
    (drafter / "model.safetensors").unlink()
    (drafter / "model.safetensors").symlink_to(tmp_path / "unmounted" / "model.safetensors")

    result = run_cli(str(drafter), str(checkpoint(tmp_path / "other")))

    assert result.stderr == (
        f"ckptdiff: {drafter / 'model.safetensors'}: is a broken symlink: the file it points to does not exist\n"
    )
    assert result.returncode == 2


def test_a_broken_link_the_comparison_does_not_read_is_left_alone(tmp_path, run_cli):
    """The .bin blobs deleted to save room, the snapshot's safetensors kept: the folder still compares."""
    snapshot = checkpoint(tmp_path / "models--org--drafter" / "snapshots" / "snapshot")
    (snapshot / "pytorch_model.bin").symlink_to(Path("..", "..", "blobs", "deleted"))

    result = run_cli(str(snapshot), str(checkpoint(tmp_path / "other")))

    assert result.returncode == 0, result.stderr


# --- the config file's search --------------------------------------------------------------------------------


def test_a_config_file_planted_in_a_shared_folder_is_not_picked_up(tmp_path, run_cli):
    shared = tmp_path / "tmp"
    (shared / "ckptdiff.toml").parent.mkdir(parents=True)
    (shared / "ckptdiff.toml").write_text('ignore = ["*"]\n')  # would turn every gate below it into a pass
    work = shared / "build" / "job"
    a, b = checkpoint(work / "a", 4), checkpoint(work / "b", 6)
    home = tmp_path / "home"
    home.mkdir()

    result = run_cli(str(a), str(b), cwd=work, env={"HOME": str(home)})

    assert result.returncode == 1, result.stdout + result.stderr
    assert find_config(work) is None or not str(find_config(work)).startswith(str(shared))


def test_the_search_climbs_to_home_and_stops_there(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "projects" / "x").mkdir(parents=True)
    (home / "ckptdiff.toml").write_text('fail-on = "warning"\n')
    (tmp_path / "pyproject.toml").write_text('[tool.ckptdiff]\nfail-on = "error"\n')  # above home: never read
    monkeypatch.setenv("HOME", str(home))

    assert find_config(home / "projects" / "x") == home / "ckptdiff.toml"
    (home / "ckptdiff.toml").unlink()
    assert find_config(home / "projects" / "x") is None


def test_the_search_stops_at_the_git_root(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "ckptdiff.toml").write_text('fail-on = "warning"\n')
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / "runs").mkdir()

    assert find_config(repository / "runs") is None
