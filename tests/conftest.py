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


@pytest.fixture
def run_cli(tmp_path):
    """Run the real ``ckptdiff`` entry point in a subprocess: returns CompletedProcess (text)."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
        full_env.setdefault("HF_HOME", str(tmp_path / "hf-home"))
        full_env["NO_COLOR"] = "1"
        full_env.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "ckptdiff", *args],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd or REPO,
            timeout=timeout,
        )

    return run
