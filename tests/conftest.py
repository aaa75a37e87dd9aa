"""Shared test set-up: the repo root on sys.path (for fixtures.generate), and CLI runners."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIXTURES = REPO / "fixtures"
#: Every JSON report the suite writes is checked against docs/report.schema.json (tests/report_json.py).
pytest_plugins = ("report_json",)


@pytest.fixture
def run_cli(tmp_path):
    """Run the real ``ckptdiff`` entry point in a subprocess: returns CompletedProcess (text)."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
        full_env.setdefault("HF_HOME", str(tmp_path / "hf-home"))
        full_env["NO_COLOR"] = "1"
        full_env.update(env or {})
        result = subprocess.run(
            [sys.executable, "-m", "ckptdiff", *args],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd or REPO,
            timeout=timeout,
        )
        from report_json import validate_if_report

        validate_if_report(result.stdout)
        return result

    return run


@pytest.fixture
def hub():
    """A running Hub emulator (tests/hub_emulator.py) on 127.0.0.1; subprocesses reach it via ``hub.client_env``."""
    from hub_emulator import HubEmulator

    with HubEmulator() as emulator:
        yield emulator


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
