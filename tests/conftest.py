"""Shared test set-up: the repo root on sys.path (for fixtures.generate), and CLI runners."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIXTURES = REPO / "fixtures"

# Hypothesis times its examples (a deadline, a "too slow" health check): none may fail because the machine is loaded
settings.register_profile("ckptdiff", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ckptdiff")

#: Every JSON report the suite writes is checked against docs/report.schema.json (tests/report_json.py).
pytest_plugins = ("report_json",)


@dataclass
class CliRun:
    """What a run of the command line gave: like subprocess.CompletedProcess (text)."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def cli_env(tmp_path: Path, env: dict[str, str] | None) -> dict[str, str]:
    """The environment a test's ckptdiff runs in: no HF_* or GITHUB_* of the developer's, its own HF home, no
    colour, then the test's own variables."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_", "FORCE_COLOR", "COLUMNS"))}
    full_env.setdefault("HF_HOME", str(tmp_path / "hf-home"))
    full_env["NO_COLOR"] = "1"
    full_env["CKPTDIFF_RETRY_WAIT"] = "0"  # retries happen at once: the tests count them, nobody waits
    full_env.update(env or {})
    return full_env


def _reload_hub_constants() -> None:
    """huggingface_hub reads its environment (endpoint, cache, offline, timeouts) into module constants at import;
    read it again for the environment of this run."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        importlib.reload(constants)


def run_in_process(args: list[str], env: dict[str, str], cwd: Path) -> CliRun:
    """``ckptdiff args`` through the command's entry (``ckptdiff.cli.main``) in this process, with click's runner
    capturing stdout and stderr, the environment, working directory and signal handlers swapped in for the run
    and restored."""
    from click.testing import CliRunner

    from ckptdiff import errors
    from ckptdiff.cli import main

    # a process remembers the credentials of the URLs it was given to scrub them (errors._URL_CREDENTIALS): each
    # in-process run starts with none, as a process does, so that one test's secrets are not another's
    remembered = dict(errors._URL_CREDENTIALS)
    errors._URL_CREDENTIALS.clear()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_signals = {stop: signal.getsignal(stop) for stop in (signal.SIGINT, signal.SIGTERM)}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    _reload_hub_constants()
    code = 0
    try:
        with CliRunner().isolation() as (out, err, *_):
            try:
                main(list(args))
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for stop, handler in saved_signals.items():
            signal.signal(stop, handler)
        _reload_hub_constants()
        errors._URL_CREDENTIALS.clear()
        errors._URL_CREDENTIALS.update(remembered)
    return CliRun(["ckptdiff", *args], code, stdout, stderr)


@pytest.fixture
def run_cli(tmp_path):
    """Run the ``ckptdiff`` entry point in this process (click's runner): returns a CliRun.

    ``timeout`` is accepted for the subprocess runner's sake and not enforced here."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120) -> CliRun:
        from report_json import validate_if_report

        result = run_in_process(list(args), cli_env(tmp_path, env), cwd or REPO)
        validate_if_report(result.stdout)
        return result

    return run


@pytest.fixture
def run_cli_subprocess(tmp_path):
    """Run ``python -m ckptdiff`` in a subprocess, for what only a real process shows (the installed entry point,
    signals, a module hidden by PYTHONPATH, an interpreter's exit): returns CompletedProcess (text)."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120):
        result = subprocess.run(
            [sys.executable, "-m", "ckptdiff", *args],
            capture_output=True,
            text=True,
            env=cli_env(tmp_path, env),
            cwd=cwd or REPO,
            timeout=timeout,
        )
        from report_json import validate_if_report

        validate_if_report(result.stdout)
        return result

    return run


@pytest.fixture(autouse=True)
def no_retry_waits(monkeypatch):
    """A retry after a 5xx or a dropped connection happens at once (``CKPTDIFF_RETRY_WAIT=0``): the tests count
    retries, and waiting for them is most of a fault test's time. A Retry-After the server sends is still honoured."""
    monkeypatch.setenv("CKPTDIFF_RETRY_WAIT", "0")


def checkout_build_lock():
    """Held around every pip build of this checkout, by any test process: setuptools builds it in place, in its
    build/ folder, and two builds at once (two xdist workers) break each other there ("File exists: build/bdist…").
    The tests that pip-install carry one xdist_group, but the suite runs ``--dist worksteal``, which does not keep a
    group on one worker, and ``--dist loadgroup`` did not either (pytest-xdist 3.8.0, pytest 9.2.0: a group of six
    tests ran on two), so the lock keeps the builds apart."""
    from filelock import FileLock  # huggingface_hub's dependency

    (REPO / "build").mkdir(exist_ok=True)
    return FileLock(str(REPO / "build" / "tests-pip-build.lock"), timeout=1800)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> dict[str, str]:
    """pip's environment for installing this checkout offline: the wheels of its dependencies (and of the build
    backend) are downloaded from PyPI once a session, and every install after that (the GitHub Action's venv,
    pre-commit's hook environment) takes them from this folder."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "-w", str(folder)]
    with checkout_build_lock():
        done = subprocess.run(
            [*command, "-c", str(REPO / "action-constraints.txt"), str(REPO), "setuptools>=61", "wheel"],
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert done.returncode == 0, done.stderr
    return {"PIP_FIND_LINKS": str(folder), "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture
def hub():
    """A running Hub emulator (tests/hub_emulator.py) on 127.0.0.1; subprocesses reach it via ``hub.client_env``."""
    from hub_emulator import HubEmulator

    with HubEmulator() as emulator:
        yield emulator


# --- heavy fixtures, one per test run (per xdist worker): every test that uses one shares it ---------------------


@pytest.fixture(scope="session")
def kimi_k2_base(tmp_path_factory) -> Path:
    """The full-scale Kimi-K2 base as sparse files: 61 shards, ~140 k tensors, a 12.5 MB index. Read only."""
    from fixtures.generate import write_kimi_k2_base

    return write_kimi_k2_base(tmp_path_factory.mktemp("session-kimi-k2-base") / "Kimi-K2-Instruct")


@pytest.fixture(scope="session")
def cluster():
    """A dask.distributed LocalCluster: two worker processes on loopback, which import this checkout
    (PYTHONPATH); shut down at the end of the run."""
    distributed = pytest.importorskip("distributed")
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path  # spawned workers inherit it
    try:
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
        ) as local:
            yield local
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 (tests/store_servers.py), one per test run; each test uploads under its own
    bucket or prefix."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    from store_servers import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def s3(s3_server, monkeypatch):
    """This process's AWS chain pointed at the moto server (environment variables, as a user would set them)."""
    from store_servers import point_aws_chain_at

    yield point_aws_chain_at(s3_server, monkeypatch)
    s3_server.clear_faults()


@pytest.fixture
def hub_client(hub, tmp_path, monkeypatch):
    """Point this process's huggingface_hub at the emulator: endpoint, a fresh HF cache, no token, online.

    huggingface_hub reads its environment at import, so the module constants are patched (and restored after).
    """
    from huggingface_hub import constants

    home = tmp_path / "hf-home"
    template = hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    for name, value in {
        "ENDPOINT": hub.endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": template,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": True,  # else the client fetches /api/agent-harnesses once a day
    }.items():
        monkeypatch.setattr(constants, name, value)
    for variable in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    return hub


@pytest.hookimpl(trylast=True)  # after -m has deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``pytest -m oracle`` without the pinned engines installed fails, in one line: a job that cannot run must not
    pass (the default run deselects the job, so this fires only when it was asked for)."""
    if not any(item.get_closest_marker("oracle") for item in items):
        return
    oracle = str(Path(__file__).resolve().parent / "oracle")
    if oracle not in sys.path:
        sys.path.insert(0, oracle)
    from engines import missing_environments, oracle_home, pins  # tests/oracle/engines.py

    missing = missing_environments(pins())
    if missing:
        labels = ", ".join(pin.label for pin in missing)
        pytest.exit(
            f"oracle job: not installed: {labels} under {oracle_home()} (bash tests/oracle/install_engines.sh)",
            returncode=1,
        )
