"""--scheduler when the other end misbehaves: whatever is at the address, and whatever happens to the cluster
during the pass, the run ends with one line and exit 2, never a hang or a traceback.

Every server here is started by the test on loopback: a socket that accepts and never answers, one that speaks
another protocol, a real Dask scheduler with no worker, and schedulers and workers that die the moment the
pass's tasks reach them (a preloaded plugin ends their process). The command runs as a real process
(``python -m ckptdiff``); a run still going after a few minutes fails the test rather than hang the suite.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("distributed")
pytest.importorskip("numpy")

from test_values_dask import write_shards  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
#: Well past the 10 s connect timeout and the no-worker grace: a run still going then is a hang.
HANG = 240
#: The no-worker grace the runs here wait (CKPTDIFF_NO_WORKER_GRACE; 15 s by default): the same watch, sooner.
GRACE = 3
#: The grace where the run is meant to end by it (no worker ever, or the only one died): each waits it out whole.
SHORT_GRACE = 1

#: Preloads: a scheduler that ends its process when the pass's tasks arrive, a worker when it starts one.
DIE_ON_TASKS = """
import os
from distributed.diagnostics.plugin import SchedulerPlugin

class DieOnTasks(SchedulerPlugin):
    def update_graph(self, scheduler, *args, **kwargs):
        os._exit(1)

def dask_setup(scheduler):
    scheduler.add_plugin(DieOnTasks())
"""
DIE_ON_EXECUTE = """
import os
from distributed import WorkerPlugin

class DieOnExecute(WorkerPlugin):
    def transition(self, key, start, finish, **kwargs):
        if finish == "executing":
            os._exit(1)

def dask_setup(worker):
    worker.plugins["die-on-execute"] = DieOnExecute()
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("pair")
    return str(write_shards(root / "a", seed=1, changed=False)), str(write_shards(root / "b", seed=2, changed=True))


def ckptdiff_values(pair: tuple[str, str], address: str, grace: float = GRACE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "CKPTDIFF_NO_WORKER_GRACE": f"{grace:g}"}
    return subprocess.run(
        [sys.executable, "-m", "ckptdiff", *pair, "--values", "--scheduler", address],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=HANG,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess[str], address: str) -> str:
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"ckptdiff: --scheduler {address}: "), done.stderr
    return done.stderr


@contextmanager
def server(answer: bytes | None) -> Iterator[str]:
    """A loopback TCP server that accepts every connection and sends ``answer`` (None: nothing, ever)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)  # kept open, unread
            if answer is not None:
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for connection in held:
            connection.close()


def test_a_server_that_accepts_and_never_answers_ends_the_run(pair):
    """Finding 7: the 10 s connect timeout holds (the run was still going at 360 s)."""
    with server(None) as address:
        line = one_line(ckptdiff_values(pair, address), address)
    assert "accepted the connection but sent no Dask handshake within 10 s" in line


@pytest.mark.parametrize(
    "answer",
    [b"SSH-2.0-OpenSSH_9.6\r\n", b"HTTP/1.1 400 Bad Request\r\n\r\n", b"\xff" * 64],
    ids=["ssh", "http", "junk"],
)
def test_a_server_that_is_not_dask_is_named_so(pair, answer):
    """Finding 10: another protocol's bytes are not a length to allocate (MemoryError as an internal error)."""
    with server(answer) as address:
        line = one_line(ckptdiff_values(pair, address), address)
    assert "not a Dask scheduler" in line


@contextmanager
def dask_process(role: str, *args: str, preload: str | None, tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``dask scheduler`` or ``dask worker`` as a process of its own (killed on the way out)."""
    command = [sys.executable, "-m", f"distributed.cli.dask_{role}", *args]
    if preload is not None:
        script = tmp / f"preload_{role}.py"
        script.write_text(preload)
        command += ["--preload", str(script)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.kill()
        process.wait(30)


def scheduler_address(scheduler_file: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        assert process.poll() is None, "the scheduler did not start"
        if scheduler_file.exists() and scheduler_file.stat().st_size:
            return str(json.loads(scheduler_file.read_text())["address"])
        time.sleep(0.2)
    raise AssertionError("the scheduler did not start")


def wait_for_workers(address: str, count: int) -> None:
    from distributed import Client

    with Client(address, timeout="60s") as client:
        client.wait_for_workers(count, timeout=HANG)


def test_a_cluster_without_workers_ends_the_run(pair, tmp_path):
    """Finding 8's hang, at its core: tasks wait for a worker that never comes. One line within the grace."""
    scheduler_file = tmp_path / "scheduler.json"
    args = ["--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(scheduler_file)]
    with dask_process("scheduler", *args, preload=None, tmp=tmp_path) as scheduler:
        address = scheduler_address(scheduler_file, scheduler)
        line = one_line(ckptdiff_values(pair, address, SHORT_GRACE), address)
    assert f"the Dask cluster has had no worker for {SHORT_GRACE} s" in line


def test_the_only_worker_dying_mid_pass_ends_the_run(pair, tmp_path):
    """Finding 8: the only worker ends its process as it starts a task of the pass."""
    scheduler_file = tmp_path / "scheduler.json"
    args = ["--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(scheduler_file)]
    with dask_process("scheduler", *args, preload=None, tmp=tmp_path) as scheduler:
        address = scheduler_address(scheduler_file, scheduler)
        worker_args = [address, "--no-nanny", "--nthreads", "1", "--host", "127.0.0.1", "--dashboard-address", ":0"]
        with dask_process("worker", *worker_args, preload=DIE_ON_EXECUTE, tmp=tmp_path) as worker:
            wait_for_workers(address, 1)
            line = one_line(ckptdiff_values(pair, address, SHORT_GRACE), address)
            assert worker.wait(HANG) != 0  # it did die mid-pass
    assert "no worker" in line or "workers died" in line


def test_the_scheduler_dying_mid_pass_ends_the_run_in_one_line(pair, tmp_path):
    """Finding 9: the scheduler ends its process as the pass's tasks reach it (36 lines of traceback before)."""
    scheduler_file = tmp_path / "scheduler.json"
    args = ["--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(scheduler_file)]
    with dask_process("scheduler", *args, preload=DIE_ON_TASKS, tmp=tmp_path) as scheduler:
        address = scheduler_address(scheduler_file, scheduler)
        line = one_line(ckptdiff_values(pair, address), address)
        assert scheduler.wait(HANG) != 0
    assert "lost the Dask scheduler" in line or "the Dask pass failed" in line
