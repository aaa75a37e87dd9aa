"""Ctrl-C and SIGTERM end a run by cancelling it (#30 findings 13 and 14): the real command in a subprocess, its
stderr on a terminal (a pty), a pair on moto's S3 server. The copy's ranged reads wait at the server
(tests/request_gate.py) until the test lets them go, so the signal comes while a copy is under way and a bar is on
the terminal, every time, however loaded the machine. Whatever the signal and however the pass was to run
(threads, --jobs worker processes): exit 128 + the signal, the bar cleared and then one line, no read started
after the signal, no ``.partial`` file or scratch folder left, no process of the run alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from conftest import REPO, cli_env  # noqa: E402
from request_gate import HANG, RequestGate  # noqa: E402

from ckptdiff.progress import DELAY  # noqa: E402
from ckptdiff.sources.file_copy import COPY_CHUNK, IN_FLIGHT  # noqa: E402
from fixtures.generate import write_safetensors  # noqa: E402

#: One F32 tensor of 48 MiB a side: seven ranged reads of a copy (six of COPY_CHUNK and the header's bytes).
ELEMENTS = 12 * 1024 * 1024


@pytest.fixture(scope="module")
def slow_pair(s3_server, tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("interrupts")
    write_safetensors(root / "a" / "model.safetensors", [("w", "F32", (ELEMENTS,))], fill="sparse")
    write_safetensors(root / "b" / "model.safetensors", [("w", "F32", (ELEMENTS,))], fill="sparse")  # never copied
    s3_server.upload(root / "a", "interrupts/a")
    s3_server.upload(root / "b", "interrupts/b")
    return "s3://interrupts/a", "s3://interrupts/b"


def copy_reads(asked: set[tuple[str, int]]):
    """A gate's test: the ranged GETs a --values copy makes of an ``interrupts/`` object (a header read asks for the
    first bytes only), each noted as (object, first byte): a read the client retried (s3fs gives up waiting after
    15 s, should the test be that slow) counts once."""

    def matches(environ: dict[str, Any]) -> bool:
        path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
        wanted = environ.get("HTTP_RANGE", "").removeprefix("bytes=").split("-")
        if environ["REQUEST_METHOD"] != "GET" or not path.startswith("interrupts/") or len(wanted) != 2:
            return False
        first, last = int(wanted[0]), int(wanted[1])
        if first % COPY_CHUNK or (first == 0 and last + 1 < COPY_CHUNK):
            return False
        asked.add((path, first))
        return True

    return matches


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
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns: tqdm draws in them
    asked: set[tuple[str, int]] = set()
    gate = RequestGate(copy_reads(asked))
    s3_server.hooks.append(gate)
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
            gate.wait_held(IN_FLIGHT)  # side A's copy has its first reads in flight, all waiting at the server
            assert [path.name for path in scratch.rglob("*.partial")] == ["model.safetensors.partial"]
            time.sleep(DELAY)  # the bar, made before the first read, is past its delay: its next advance draws it
            gate.let_through(1)
            deadline = time.monotonic() + HANG
            while b"%|" not in written:  # the bar, drawn on the terminal by that read's bytes
                assert child.poll() is None and time.monotonic() < deadline, bytes(written)
                time.sleep(0.01)
            gate.wait_held(IN_FLIGHT)  # the read that replaced it waits too: the copy is under way
            child.send_signal(stop)
            gate.open()  # the reads in flight end (the clean-up waits for them), and no other may start
            child.communicate(timeout=HANG)
        finally:
            child.kill()
        reader.join(HANG)
    finally:
        gate.open()
        s3_server.hooks.remove(gate)
        os.close(controller)

    assert child.returncode == 128 + stop, bytes(written)
    *_, bar, cleared, last = bytes(written).decode(errors="replace").replace("\r\n", "\n").split("\r")
    assert bar.startswith("s3://interrupts/a:") and cleared.strip() == "", bytes(written)  # the bar, then cleared
    assert last == "ckptdiff: interrupted\n", bytes(written)  # the one line, at the start of the cleared line
    # the reads started before the signal, none after it: B's copy never began
    assert asked == {("interrupts/a/model.safetensors", n * COPY_CHUNK) for n in range(IN_FLIGHT + 1)}
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


@pytest.fixture(scope="module")
def small_pair(s3_server, tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("interrupts-small")
    for side in ("a", "b"):
        write_safetensors(root / side / "model.safetensors", [("w", "F32", (16,))])
        s3_server.upload(root / side, f"interrupts-small/{side}")
    return "s3://interrupts-small/a", "s3://interrupts-small/b"


def header_reads(environ: dict[str, Any]) -> bool:
    path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
    return environ["REQUEST_METHOD"] == "GET" and path.startswith("interrupts-small/") and "HTTP_RANGE" in environ


@contextlib.contextmanager
def stderr_that_takes_nothing(kind: str) -> Iterator[int]:
    """A descriptor for the run's stderr: /dev/full (every write fails, ENOSPC), or a pipe filled to the brim that
    nobody reads (every write waits)."""
    if kind == "full-disk":
        descriptor = os.open("/dev/full", os.O_WRONLY)
        try:
            yield descriptor
        finally:
            os.close(descriptor)
        return
    reading, writing = os.pipe()
    os.set_blocking(writing, False)
    try:
        while True:
            os.write(writing, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(writing, True)
    try:
        yield writing
    finally:
        os.close(writing)
        os.close(reading)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("kind", ["full-disk", "unread-pipe"])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_wins_over_a_stderr_that_takes_nothing(s3_server, small_pair, tmp_path, stop, kind) -> None:
    """The interrupted line cannot be written: the exit is still 128 + the signal, not trouble (2) nor a hang.
    The header reads wait at the server, so the signal comes while the run is under way, every time."""
    env = cli_env(tmp_path, s3_server.env)
    env["PYTHONPATH"] = str(REPO)
    gate = RequestGate(header_reads)
    s3_server.hooks.append(gate)
    try:
        with stderr_that_takes_nothing(kind) as stderr:
            child = subprocess.Popen(
                [sys.executable, "-m", "ckptdiff", *small_pair],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=tmp_path,
            )
            try:
                gate.wait_held(1)  # a header read is waiting at the server: the run is under way
                child.send_signal(stop)
                gate.open()
                stdout, _ = child.communicate(timeout=HANG)
            finally:
                child.kill()
    finally:
        gate.open()
        s3_server.hooks.remove(gate)

    assert (child.returncode, stdout) == (128 + stop, b"")


def _without_proc(command: list[str]) -> list[str]:
    """``command`` in a mount namespace of its own whose /proc is an empty folder, as on a system without Linux's
    /proc/self/fd (macOS, the BSDs); skipped where namespaces cannot be made (``unshare``, user namespaces)."""
    masked = [
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "--",
        "sh",
        "-c",
        'mount -t tmpfs none /proc && exec "$@"',
    ]
    probe = subprocess.run([*masked, "sh", "test", "!", "-e", "/proc/self"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot mask /proc in a namespace: {probe.stderr.decode(errors='replace').strip()[:200]}")
    return [*masked, "sh", *command]


@pytest.mark.parametrize("room", [True, False], ids=["pipe-with-room", "unread-full-pipe"])
def test_without_proc_the_interrupted_line_goes_whole_or_not_at_all(s3_server, small_pair, tmp_path, room) -> None:
    """Where /proc/self/fd cannot reopen stderr's pipe, the line is written non-blocking on stderr's own file
    description for that one write: into a pipe with room it arrives whole, a full one nobody reads takes nothing
    and the run still ends 130, and either way the description (shared with this test) is blocking again after."""
    env = cli_env(tmp_path, s3_server.env)
    env["PYTHONPATH"] = str(REPO)
    gate = RequestGate(header_reads)
    s3_server.hooks.append(gate)
    reading, writing = os.pipe()
    try:
        if not room:
            os.set_blocking(writing, False)
            with contextlib.suppress(BlockingIOError):
                while True:
                    os.write(writing, b"x" * 4096)
            os.set_blocking(writing, True)
        command = _without_proc([sys.executable, "-m", "ckptdiff", *small_pair])
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=writing, env=env, cwd=tmp_path
        )
        try:
            gate.wait_held(1)  # a header read is waiting at the server: the run is under way
            child.send_signal(signal.SIGINT)
            gate.open()
            stdout, _ = child.communicate(timeout=HANG)
        finally:
            child.kill()
        blocking = os.get_blocking(writing)
    finally:
        gate.open()
        s3_server.hooks.remove(gate)
        os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        said = pipe.read()
    assert (child.returncode, stdout) == (130, b"")
    assert blocking  # the child's non-blocking write did not leave the description so
    assert said == b"ckptdiff: interrupted\n" if room else said.strip(b"x") == b""
