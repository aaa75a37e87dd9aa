"""Ctrl-C and SIGTERM end a run by cancelling it (#30 findings 13 and 14): the real command in a subprocess, its
stderr on a terminal (a pty), a pair on moto's S3 server whose requests each wait, so a copy is under way when
the signal comes. Whatever the signal and wherever the pass runs (threads, --jobs worker processes): exit
128 + the signal, the bar cleared and then one line, no ``.partial`` file or scratch folder left, no worker alive.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from conftest import REPO, cli_env  # noqa: E402

from fixtures.generate import write_safetensors  # noqa: E402

#: One F32 tensor of 48 MiB a side: six ranged reads of a copy, each waiting at the server.
ELEMENTS = 12 * 1024 * 1024


@pytest.fixture(scope="module")
def slow_pair(s3_server, tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("interrupts")
    write_safetensors(root / "a" / "model.safetensors", [("w", "F32", (ELEMENTS,))], fill="sparse")
    write_safetensors(root / "b" / "model.safetensors", [("w", "F32", (ELEMENTS,))], fill="random", seed=3)
    s3_server.upload(root / "a", "interrupts/a")
    s3_server.upload(root / "b", "interrupts/b")
    return "s3://interrupts/a", "s3://interrupts/b"


def processes_marked(marker: str) -> list[int]:
    """The live processes whose environment holds ``marker`` (the run and any worker it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:  # gone, or not ours
                continue
            if marker.encode() in environ:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the worker processes through /proc")
@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]], ids=["threads", "jobs-2"])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_values_cleans_up_and_says_one_line(s3_server, slow_pair, tmp_path, stop, jobs) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    marker = f"CKPTDIFF_TEST_RUN={uuid.uuid4().hex}"
    env = cli_env(tmp_path, {**s3_server.env, "TMPDIR": str(scratch), marker.split("=")[0]: marker.split("=")[1]})
    env["PYTHONPATH"] = str(REPO)
    controller, terminal = pty.openpty()
    s3_server.latency = 0.4
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "ckptdiff", *slow_pair, "--values", *jobs],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=env,
            cwd=tmp_path,
        )
        os.close(terminal)
        written = bytearray()
        reader = threading.Thread(target=_drain, args=(controller, written), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 120
            while not any(scratch.rglob("*.partial")):  # a copy is under way
                assert child.poll() is None and time.monotonic() < deadline, bytes(written)
                time.sleep(0.02)
            time.sleep(1.2)  # past the bars' delay: one is on the terminal
            child.send_signal(stop)
            child.communicate(timeout=120)
        finally:
            child.kill()
        reader.join(10)
    finally:
        s3_server.latency = 0.0
        os.close(controller)

    assert child.returncode == 128 + stop, bytes(written)
    screen = bytes(written).decode(errors="replace").replace("\r\n", "\n")
    assert screen.split("\r")[-1].endswith("\nckptdiff: interrupted\n") or screen.split("\r")[-1] == (
        "ckptdiff: interrupted\n"
    ), screen  # the bar's line was cleared before the message
    assert [path.name for path in scratch.rglob("*")] == []  # no .partial file, no scratch folder
    assert processes_marked(marker) == []  # no worker outlived the run


def _drain(controller: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal's last writer is gone
            return
        if not chunk:
            return
        into += chunk
