"""A disk that fills while ckptdiff writes: every writer ends in one line naming the path and the system's reason,
exit 2, no partial file left; the header cache, an optimisation, fails nothing.

The disk is filled for real: a child process with a file-size limit (``RLIMIT_FSIZE``: every write past N bytes
fails with EFBIG, as a full disk or a quota fails with ENOSPC or EDQUOT), or, as root, a small tmpfs. The Hub is
the emulator (tests/hub_emulator.py), the object store moto's server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
from conftest import REPO, cli_env

from fixtures.generate import HERE as FIXTURES

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file-size limits")

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"  # one 181 kB shard
OURS = FIXTURES / "kimi-k25-eagle3-ours"


def run_limited(
    tmp_path: Path, *args: str, limit: int | None, env: dict[str, str] | None = None, stdout: IO[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m ckptdiff args`` in a child whose every file write past ``limit`` bytes fails (EFBIG); its stdout
    captured, or ``stdout`` (a file: ``> report.json``)."""

    def small_files() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of the process being killed
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    full_env = cli_env(tmp_path, env)
    full_env["PYTHONDONTWRITEBYTECODE"] = "1"  # the limit would otherwise cut .pyc files short in the tree
    return subprocess.run(
        [sys.executable, "-m", "ckptdiff", *args],
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=full_env,
        preexec_fn=small_files,
        timeout=120,
    )


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    """The run's error line: stderr holds only --values' notes before it, no traceback, no warning."""
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("ckptdiff: ") for line in lines), done.stderr
    assert all(line.startswith("ckptdiff: --values: ") for line in lines[:-1]), done.stderr
    return lines[-1]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- (a) --values downloading into the HF cache ------------------------------------------------------------------


def test_a_download_the_hf_cache_cannot_take_is_one_line_naming_the_cache(hub, tmp_path):
    commit = hub.add_repo("org/a", PUBLISHED)
    hub.add_repo("org/b", OURS)
    home = tmp_path / "hf-home"

    done = run_limited(tmp_path, "org/a", "org/b", "--values", limit=100_000, env=hub.client_env(home))

    assert done.returncode == 2 and done.stdout == ""
    assert last_line(done) == (
        f"ckptdiff: {home}/hub/models--org--a: cannot take the download of org/a@{commit[:12]}:model.safetensors: "
        "File too large (free space there, or point HF_HOME or HF_HUB_CACHE at a disk with room)"
    )
    hub_cache = files_under(home / "hub")
    assert not [f for f in hub_cache if "/blobs/" in f or "/snapshots/" in f or "incomplete" in f], hub_cache


@contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted on ``folder`` with these mount options (root only), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 256 kB tmpfs."""
    with tmpfs(tmp_path / "small", "size=256k") as folder:
        yield folder


def test_a_download_onto_a_full_filesystem_is_one_line_without_huggingface_hubs_warning(
    hub, tmp_path, small_filesystem
):
    """ENOSPC, and huggingface_hub's several-line "not enough free disk space" warning kept off stderr: the
    error line says it. A's shard fits (and stays, complete), B's does not."""
    hub.add_repo("org/a", PUBLISHED)
    commit = hub.add_repo("org/b", OURS)
    home = small_filesystem / "hf-home"

    done = run_limited(tmp_path, "org/a", "org/b", "--values", limit=None, env=hub.client_env(home))

    assert done.returncode == 2 and done.stdout == ""
    assert last_line(done) == (
        f"ckptdiff: {home}/hub/models--org--b: cannot take the download of org/b@{commit[:12]}:model.safetensors: "
        "No space left on device (free space there, or point HF_HOME or HF_HUB_CACHE at a disk with room)"
    )
    assert not [f for f in files_under(home) if "models--org--b/blobs" in f or "incomplete" in f]


# --- (e) --values' scratch copies: tensors by range, an object store's files -------------------------------------


def test_tensors_read_by_range_into_a_full_scratch_folder_are_one_line_and_removed(hub, tmp_path):
    hub.add_repo("org/a", PUBLISHED)
    hub.add_repo("org/b", OURS)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**hub.client_env(tmp_path / "hf-home"), "TMPDIR": str(scratch)}

    done = run_limited(tmp_path, "org/a", "org/b", "--values-only", "*", limit=3000, env=env)

    assert done.returncode == 2 and done.stdout == ""
    pattern = rf"ckptdiff: {re.escape(str(scratch))}/ckptdiff-values-\w+/A-tensors-\w+/\d+\.tensor: cannot be written: "
    assert re.fullmatch(
        pattern + r"File too large \(free space there, or point TMPDIR at a disk with room\)", last_line(done)
    )
    assert files_under(scratch) == []


def test_an_object_stores_file_copied_into_a_full_scratch_folder_is_one_line_not_the_stores_fault(s3, tmp_path):
    """The copy's write failed, not the store: before, "s3://…: the store refused the request ([Errno 27] …)"."""
    pytest.importorskip("s3fs")
    s3.upload(PUBLISHED, "disk/a")
    s3.upload(OURS, "disk/b")
    scratch = tmp_path / "tmp"
    scratch.mkdir()

    done = run_limited(tmp_path, "s3://disk/a", "s3://disk/b", "--values", limit=64_000, env={"TMPDIR": str(scratch)})

    assert done.returncode == 2 and done.stdout == ""
    pattern = rf"ckptdiff: {re.escape(str(scratch))}/ckptdiff-values-\w+/A-\w+/model\.safetensors\.partial: "
    pattern += r"cannot be written: File too large \(free space there, or point TMPDIR at a disk with room\)"
    assert re.fullmatch(pattern, last_line(done)), done.stderr
    assert files_under(scratch) == []  # the partial copy and the run's scratch folder removed


def test_a_temporary_folder_no_disk_can_take_is_one_line_naming_it(hub, tmp_path):
    """tempfile finds no usable folder (its test file cannot be written anywhere): before, the line that should
    name the folder asked tempfile for it again, and the run ended in "internal error: FileNotFoundError"."""
    hub.add_repo("org/a", PUBLISHED)
    hub.add_repo("org/b", OURS)

    done = run_limited(tmp_path, "org/a", "org/b", "--values-only", "*", limit=0, env=hub.client_env(tmp_path / "h"))

    assert done.returncode == 2 and done.stdout == ""
    pattern = r"ckptdiff: the temporary folder: cannot be written: No usable temporary directory found in \[.*\] "
    assert re.fullmatch(pattern + r"\(free space there, or point TMPDIR at a disk with room\)", last_line(done))


def test_worker_processes_whose_locks_the_disk_cannot_take_name_jobs(tmp_path):
    """--jobs' pool keeps its locks in shared memory (/dev/shm, a Docker container's 64 MB): before, a full one
    was blamed on stdout (`ckptdiff: stdout: cannot write: File too large`)."""
    done = run_limited(tmp_path, str(PUBLISHED), str(OURS), "--values", "--jobs", "2", limit=0)

    assert done.returncode == 2 and done.stdout == ""
    assert last_line(done) == (
        "ckptdiff: --jobs 2: cannot start the worker processes: File too large"
        " (their locks live in shared memory (/dev/shm): free room there, or give --jobs 1)"
    )


@pytest.fixture
def few_inodes(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 3 inodes: itself and two folders; a third file or folder fails (ENOSPC)."""
    with tmpfs(tmp_path / "few-inodes", "size=1m,nr_inodes=3") as folder:
        yield folder


def test_a_write_no_writer_handled_names_its_file_not_the_store_or_stdout(s3, tmp_path, few_inodes):
    """The copy's subfolder (an index naming sub/model.safetensors) cannot be made: the line names it. Before, the
    store was blamed ("the store refused the request ([Errno 28] …)"), and a write error reaching the CLI's last
    handler was said to be stdout's."""
    pytest.importorskip("s3fs")
    from ckptdiff.sources import resolve

    for side, folder in (("a", PUBLISHED), ("b", OURS)):
        (tmp_path / side / "sub").mkdir(parents=True)
        shutil.copy(folder / "config.json", tmp_path / side)
        shutil.copy(folder / "model.safetensors", tmp_path / side / "sub")
        weight_map = {name: "sub/model.safetensors" for name in resolve(str(folder)).tensors}
        (tmp_path / side / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    s3.upload(tmp_path / "a", "inodes/a")
    s3.upload(tmp_path / "b", "inodes/b")

    done = run_limited(
        tmp_path, "s3://inodes/a", "s3://inodes/b", "--values", limit=None, env={"TMPDIR": str(few_inodes)}
    )

    assert done.returncode == 2 and done.stdout == ""
    pattern = (
        rf"ckptdiff: {re.escape(str(few_inodes))}/ckptdiff-values-\w+/A-\w+/sub: cannot write: No space left on device"
    )
    assert re.fullmatch(pattern, last_line(done)), done.stderr


# --- (d) the header cache -----------------------------------------------------------------------------------------


def test_a_header_cache_that_cannot_be_written_changes_nothing_in_the_run(hub, tmp_path):
    """Every cache write fails (a 1-byte limit): the comparison is the same, says nothing of it, leaves no temporary."""
    hub.add_repo("org/a", PUBLISHED)
    hub.add_repo("org/b", OURS)
    free, full = tmp_path / "free-home", tmp_path / "full-home"

    expected = run_limited(tmp_path, "org/a", "org/b", "--format", "json", limit=None, env=hub.client_env(free))
    done = run_limited(tmp_path, "org/a", "org/b", "--format", "json", limit=1, env=hub.client_env(full))

    assert (expected.returncode, expected.stderr) == (0, "")
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected.stdout)
    assert any(f.endswith(".pack") for f in files_under(free / "ckptdiff"))  # the free run did cache
    assert [f for f in files_under(full) if f.endswith(".part") or os.path.getsize(full / f)] == []


# --- (c) the step summary -----------------------------------------------------------------------------------------


def test_a_step_summary_that_fills_the_disk_is_left_as_the_earlier_steps_wrote_it(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}

    done = run_limited(tmp_path, str(PUBLISHED), str(OURS), "--format", "json", limit=3000, env=env)

    assert done.returncode == 2
    assert last_line(done) == (
        f"ckptdiff: {summary}: cannot append the step summary: File too large (or pass --no-step-summary)"
    )
    assert summary.read_text() == "# an earlier step\n"  # not half of this step's summary after it


# --- (b), (c) convert's OUT and the -o report on a filesystem that is full -----------------------------------------


def test_convert_onto_a_full_filesystem_keeps_the_users_out_and_removes_the_partial_one(tmp_path, small_filesystem):
    """ENOSPC (the SRC on another filesystem: the kernel copy falls back to writes); --force over an OUT that
    exists: OUT as it was, no OUT.partial holding the room a rerun needs."""
    out = small_filesystem / "out"
    out.mkdir()
    (out / "convert.json").write_text("{}")  # an earlier convert's output, which --force may replace
    (out / "ours.txt").write_text("the user's")
    (small_filesystem / "filler").write_bytes(b"\0" * 96_000)  # 256 kB less this leaves less than the 181 kB shard

    done = run_limited(tmp_path, "convert", str(PUBLISHED), str(out), "--to", "sglang", "--force", "-q", limit=None)

    partial = small_filesystem / "out.partial"
    assert (done.returncode, done.stderr) == (
        2,
        f"ckptdiff: {partial}: cannot be written: No space left on device (removed; rerun once there is room)\n",
    )
    assert sorted(p.name for p in small_filesystem.iterdir()) == ["filler", "out"]
    assert files_under(out) == ["convert.json", "ours.txt"] and (out / "ours.txt").read_text() == "the user's"


def test_a_report_cut_mid_write_keeps_the_old_report_whole(tmp_path):
    """The write fails part-way (EFBIG, at 1,000 bytes), as a full disk would; no root needed."""
    report = tmp_path / "report.json"
    report.write_text('{"previous": "report"}\n')

    done = run_limited(tmp_path, str(PUBLISHED), str(OURS), "-o", str(report), "--format", "json", limit=1000)

    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"ckptdiff: {report}: cannot write the report"), line
    assert line.endswith("(the file size limit was reached: ulimit -f, or the file system's largest file)"), line
    assert report.read_text() == '{"previous": "report"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize(
    "args",
    [[str(PUBLISHED), str(OURS)], ["convert", str(PUBLISHED), "out", "--to", "vllm", "--plan"]],
    ids=["report", "convert-plan"],
)
def test_a_report_to_stdout_cut_by_a_file_size_limit_is_one_line_and_exit_2(tmp_path, args):
    """`> report.json` under a file size limit: the write stops short at the limit, and the rest of the report
    fails. (Python's buffered stdout took the short write for the whole: the report was cut, the run ended 0 or 1.)"""
    with open(tmp_path / "report.json", "w") as stdout:
        done = run_limited(tmp_path, *args, "--format", "json", limit=2000, stdout=stdout)

    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "ckptdiff: stdout: cannot write the report: File too large (the file size limit was reached: ulimit -f, or "
        "the file system's largest file)\n"
        if args[0] != "convert"
        else "ckptdiff: stdout: cannot write: File too large (the file size limit was reached: ulimit -f, or the file "
        "system's largest file)\n"
    )
    assert (tmp_path / "report.json").stat().st_size == 2000  # what the limit let through, and no more


def test_a_report_onto_a_full_filesystem_keeps_the_old_report(tmp_path, small_filesystem):
    report = small_filesystem / "report.json"
    report.write_text('{"previous": "report"}\n')
    (small_filesystem / "filler").write_bytes(b"\0" * (256 * 1024 - 8192))

    done = run_limited(tmp_path, str(PUBLISHED), str(OURS), "-o", str(report), limit=None)

    assert (done.returncode, done.stderr) == (
        2,
        f"ckptdiff: {report}: cannot write the report: No space left on device\n",
    )
    assert report.read_text() == '{"previous": "report"}\n'
    assert sorted(p.name for p in small_filesystem.iterdir()) == ["filler", "report.json"]  # no temporary left


# --- stderr itself --------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [[str(PUBLISHED), str(FIXTURES / "no-such-drafter"), "--offline"], [str(PUBLISHED), str(OURS), "-o", "report.md"]],
    ids=["the-error-line", "the-verdict-line"],
)
def test_a_stderr_that_cannot_be_written_is_exit_2_not_the_tracebacks_exit_1(tmp_path, args):
    """`2>log` on a full disk: no line can be shown; the run still ends in trouble (2), never the interpreter's 1,
    which a CI gate reads as "incompatible"."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ckptdiff", *args],
            stdout=subprocess.PIPE,
            stderr=full,
            cwd=tmp_path,
            env={**cli_env(tmp_path, None), "PYTHONPATH": str(REPO)},
            timeout=120,
        )

    assert done.returncode == 2
