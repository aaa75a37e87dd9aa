"""``pytest -m oracle`` without the pinned engines installed fails, in one line: a job that cannot run must not
pass (the default run deselects the job, so this only fires when it was asked for)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from engines import missing_environments, oracle_home, pins  # noqa: E402


@pytest.hookimpl(trylast=True)  # after -m has deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("oracle") for item in items):
        return
    missing = missing_environments(pins())
    if missing:
        labels = ", ".join(pin.label for pin in missing)
        pytest.exit(
            f"oracle job: not installed: {labels} under {oracle_home()} (bash tests/oracle/install_engines.sh)",
            returncode=1,
        )
