"""The ``ckptdiff`` command's entry (``ckptdiff.cli.main``, as the console script and ``python -m ckptdiff`` run
it): exit codes and reports are the CLI's, whole on a pipe and in a file; a rejected command line reads, sends
and writes nothing.

What is loaded before the first Hub request is in tests/test_startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_kimi_k2_base

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")
#: What the console script ``ckptdiff = ckptdiff.cli:main`` runs.
CONSOLE_SCRIPT = "import sys; from ckptdiff.cli import main; sys.argv[0] = 'ckptdiff'; sys.exit(main())"


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


TOKEN = "hf_entryTestTokenNeverSent0123456789"


@pytest.mark.parametrize(
    "rejected",
    [
        ["--format", "nonsense"],
        ["--formt", "json"],
        ["--jobs", "0"],
        ["--fail-on", "sometimes"],
        ["--color", "purple"],
        ["-o", "report.xyz"],
    ],
    ids=["bad-format", "typoed-flag", "jobs-0", "bad-fail-on", "bad-color", "unknown-extension"],
)
def test_a_rejected_command_line_sends_no_request_and_writes_no_file(hub, tmp_path, rejected) -> None:
    """#30 finding 12: the command line is parsed (click) before any I/O, so a refused one costs nothing."""
    hub.add_repo("org/a", Path(PUBLISHED))
    hub.add_repo("org/b", Path(TWO_AUX))
    home = tmp_path / "hf-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
    env.update(hub.client_env(home, token=TOKEN), PYTHONPATH=str(REPO), NO_COLOR="1")

    done = subprocess.run(
        [sys.executable, "-m", "ckptdiff", "org/a", "org/b", *rejected],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )

    assert done.returncode == 2, done.stderr
    assert hub.total_requests == 0, hub.log
    assert not home.exists() or not any(path.is_file() for path in home.rglob("*"))


#: The console script's run, with a SIGTERM sent from inside a garbage collection (a callback whose exceptions
#: Python ignores): once ckptdiff's handler is installed, on the main thread, the first time.
SIGNAL_IN_A_CALLBACK = """
import gc, os, signal, sys, threading
from ckptdiff.cli import main

def during_a_collection(phase, info):
    installed = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
    if phase == "start" and installed and threading.current_thread() is threading.main_thread():
        gc.callbacks.remove(during_a_collection)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs here, inside the callback
            pass

gc.callbacks.append(during_a_collection)
sys.argv[0] = "ckptdiff"
main()
"""


def test_a_signal_that_comes_during_a_callback_is_not_lost():
    """Python ignores an exception raised in a weakref's, the collector's or a ``__del__``'s callback: a signal
    whose Interrupted was raised there would be lost, and the run would go on to its end (or a timeout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_IN_A_CALLBACK, PUBLISHED, TWO_AUX], capture_output=True, text=True, env=env
    )
    assert (done.returncode, done.stdout, done.stderr) == (143, "", "ckptdiff: interrupted\n")
