"""A file that is not a regular file (a FIFO, a device) put where a shard was, after the folder was listed, is
refused in one line and never waited on: opening a FIFO for reading would block until a writer came, forever.
Every reader that opens a local file (headers, ranged reads, torch archives, ``--values``' reads) checks the
type of what it opened."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from torch_files import write_torch_file

from ckptdiff.errors import SourceError
from ckptdiff.sources import open_source
from ckptdiff.values.readers import FileReader
from fixtures.generate import write_safetensors

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX feature")


def raised_without_waiting(call: Callable[[], object]) -> BaseException | None:
    """What ``call`` raised. It runs on a thread of its own so that a read that blocks (the defect) leaves the
    suite running: after two minutes it counts as blocked."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            outcome.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    assert outcome, "the read blocked on the FIFO"
    return outcome[0]


def swap_for_fifo(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path)
    return path


@pytest.fixture
def listed(tmp_path: Path):
    """A folder listed as a Source, whose shard then becomes a FIFO."""
    write_safetensors(tmp_path / "model.safetensors", [("w", "F32", [4])], fill="zeros")
    source = open_source(str(tmp_path))
    entry = source.list_files().files["model.safetensors"]
    swap_for_fifo(tmp_path / "model.safetensors")
    return source, entry


def test_a_header_read_of_a_shard_swapped_for_a_fifo_is_refused(listed):
    source, entry = listed
    error = raised_without_waiting(lambda: source.read_header(entry))
    assert isinstance(error, SourceError)
    assert error.line().endswith("model.safetensors: is not a regular file (a pipe, device or socket); not read")


def test_a_ranged_read_and_an_archive_handle_are_refused_too(listed):
    source, entry = listed
    for call in (lambda: source.read_range(entry.path, 0, 8), lambda: source.open_file(entry)):
        assert isinstance(raised_without_waiting(call), SourceError)


def test_values_reads_of_a_fifo_are_refused(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", [("w", "F32", [4])])
    fifo = swap_for_fifo(tmp_path / "a.safetensors")
    error = raised_without_waiting(lambda: FileReader(fifo, "a.safetensors"))
    assert isinstance(error, SourceError) and "not a regular file" in error.line()


def test_a_torch_archive_swapped_for_a_fifo_is_refused(tmp_path):
    from ckptdiff.sources.torch_pickle import read_archive

    path = swap_for_fifo(write_torch_file(tmp_path / "pytorch_model.bin", {"w": ("F32", [4], None)}))
    error = raised_without_waiting(lambda: read_archive(path))
    assert isinstance(error, SourceError) and "not a regular file" in error.line()


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/zero is a Linux path here")
def test_a_device_is_refused_without_reading_it(tmp_path):
    error = raised_without_waiting(lambda: FileReader(Path("/dev/zero"), "/dev/zero"))
    assert isinstance(error, SourceError) and "not a regular file" in error.line()


def test_a_folder_in_a_files_place_is_named_so(tmp_path):
    (tmp_path / "model.safetensors").mkdir()
    error = raised_without_waiting(lambda: FileReader(tmp_path / "model.safetensors", "model.safetensors"))
    assert isinstance(error, SourceError) and error.line() == "model.safetensors: is a folder, expected a file"


def test_a_fifo_in_the_hub_cache_is_a_miss_not_a_hang(hub, run_cli_subprocess, tmp_path):
    """Every entry of ckptdiff's Hub cache swapped for a FIFO (a shared HF_HOME): the reads blocked on the open,
    and the run with them, for ever. Now each is a miss: offline says the repo is not cached, online fetches
    again and writes regular files over them."""
    from fixtures.generate import HERE as FIXTURES

    published = FIXTURES / "kimi-k2-eagle3-published"
    hub.add_repo("org/drafter", published)
    env = hub.client_env(tmp_path / "hf-home")
    assert run_cli_subprocess("org/drafter", str(published), env=env).returncode == 0
    entries = [p for p in (tmp_path / "hf-home" / "ckptdiff").rglob("*") if p.is_file()]
    assert len(entries) == 4  # the refs (@default and main: one branch), the listing, the pack (config.json, header)
    for entry in entries:
        swap_for_fifo(entry)

    try:
        offline = run_cli_subprocess("org/drafter", str(published), "--offline", env=env, timeout=120)
        online = run_cli_subprocess("org/drafter", str(published), env=env, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a read of the cache blocked on a FIFO")

    assert offline.returncode == 2 and len(offline.stderr.splitlines()) == 1, offline.stderr
    assert "org/drafter: not in the local cache" in offline.stderr
    assert online.returncode == 0, online.stderr
    assert [entry.is_file() for entry in entries if entry.exists()] == [True, True, True]  # the FIFO pack: replaced
    assert len([p for p in (tmp_path / "hf-home" / "ckptdiff").rglob("*.pack") if p.is_file()]) == 1


def test_a_link_in_a_loop_is_one_line_for_a_weight_file_and_ignored_otherwise(tmp_path, run_cli):
    """A symlink pointing at itself (ELOOP) among a folder's files said "internal error: OSError: Too many levels
    of symbolic links"; a weight file's is now refused by name, another file's is passed over."""
    folder = tmp_path / "model"
    write_safetensors(folder / "model.safetensors", [("w", "F32", [4])], fill="zeros")
    (folder / "README.md").symlink_to("README.md")

    assert run_cli(str(folder), str(folder)).returncode == 0

    (folder / "extra.safetensors").symlink_to("extra.safetensors")
    result = run_cli(str(folder), str(folder))

    assert result.returncode == 2 and "internal error" not in result.stderr
    assert result.stderr == f"ckptdiff: {folder}/extra.safetensors: cannot be read: Too many levels of symbolic links\n"
