"""The ``ckptdiff`` command's entry (ckptdiff/_entry.py): which words it sends listing calls for early, and that
exit codes and reports are what the CLI gives (the collector paused for the run, frozen at exit).

What is loaded before the first Hub request is in tests/test_startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckptdiff._entry import _jobs, _positional
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_kimi_k2_base

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")
#: What the console script ``ckptdiff = ckptdiff._entry:main`` runs.
CONSOLE_SCRIPT = "import sys; from ckptdiff._entry import main; sys.argv[0] = 'ckptdiff'; sys.exit(main())"


@pytest.mark.parametrize(
    ("args", "specs"),
    [
        (["org/a", "org/b", "--format", "json"], ["org/a", "org/b"]),
        (["-o", "out/report.json", "org/a", "org/b"], ["org/a", "org/b"]),
        (["--format=json", "org/a", "--jobs", "8", "org/b"], ["org/a", "org/b"]),
        (["--values", "org/a", "org/b"], ["org/b"]),  # after a flag: maybe an option's value, so not sent early
        (["org/a", "--", "-odd/name"], ["org/a", "-odd/name"]),
        (["--base", "org/base", "org/drafter", "--engine", "sglang"], ["org/drafter"]),
    ],
)
def test_only_words_that_can_only_be_a_or_b_are_sent_early(args: list[str], specs: list[str]) -> None:
    assert _positional(args) == specs


@pytest.mark.parametrize(
    ("args", "jobs"),
    [
        (["org/a", "org/b"], 128),
        (["org/a", "org/b", "--jobs", "4"], 4),
        (["--jobs=16", "org/a", "org/b", "--jobs", "8"], 8),  # the last one, as click takes it
        (["org/a", "org/b", "--jobs", "0"], 128),  # refused by the CLI in its turn
        (["org/a", "org/b", "--jobs"], 128),
    ],
)
def test_early_reads_in_flight_are_bounded_by_the_jobs_the_cli_will_take(args: list[str], jobs: int) -> None:
    assert _jobs(args, 128) == jobs


def run(*args: str, entry: str = "module", cwd: Path = REPO) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "ckptdiff"] if entry == "module" else [sys.executable, "-c", CONSOLE_SCRIPT]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
    env.update(PYTHONPATH=str(REPO), NO_COLOR="1", HF_HUB_OFFLINE="1")
    return subprocess.run([*command, *args], capture_output=True, cwd=cwd, env=env, timeout=120)


@pytest.fixture(scope="module")
def large_pair(tmp_path_factory) -> tuple[str, str]:
    """Two 12-shard Kimi-K2-layout checkpoints that differ in one config key: a JSON report of some MB."""
    root = tmp_path_factory.mktemp("pair")
    a = write_kimi_k2_base(root / "a", layers=12, experts=64)
    b = write_kimi_k2_base(root / "b", layers=12, experts=64)
    return str(a), str(b)


@pytest.mark.parametrize("entry", ["module", "console script"])
def test_a_large_report_is_whole_on_a_pipe_and_in_a_file(large_pair, tmp_path, entry: str) -> None:
    report = tmp_path / "report.json"

    piped = run(*large_pair, "--format", "json", entry=entry)
    written = run(*large_pair, "--format", "json", "-o", str(report), entry=entry)

    assert piped.returncode == written.returncode == 0, piped.stderr
    assert len(piped.stdout) > 500_000  # many times a pipe's buffer
    document = json.loads(piped.stdout)
    assert json.loads(report.read_bytes())["tensors"] == document["tensors"]
    assert report.read_bytes() == piped.stdout.replace(b" --format json", b" --format json -o " + bytes(report))


@pytest.mark.parametrize("entry", ["module", "console script"])
def test_exit_codes_are_the_clis(tmp_path, entry: str) -> None:
    report = tmp_path / "report.md"

    incompatible = run(PUBLISHED, TWO_AUX, "-o", str(report), entry=entry)
    assert incompatible.returncode == 1 and report.read_text().strip()

    assert run(PUBLISHED, PUBLISHED, entry=entry).returncode == 0
    usage = run(PUBLISHED, TWO_AUX, "--format", "nonsense", entry=entry)
    assert usage.returncode == 2 and b"nonsense" in usage.stderr
    missing = run("./no/such/folder", PUBLISHED, entry=entry)
    assert missing.returncode == 2 and missing.stderr.count(b"\n") == 1 and b"Traceback" not in missing.stderr
    assert run("--help", entry=entry).returncode == 0
