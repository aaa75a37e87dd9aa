"""``pytest -m oracle``: DFlash drafters through vLLM's own V1 model runner (v1_dflash.py) against
``ckptdiff --vllm-runner v1``: 0 disagreements."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from v1_dflash import run  # noqa: E402

pytestmark = pytest.mark.oracle


def test_dflash_verdicts_under_the_v1_runner_match_vllms_v1_runner() -> None:
    found, compared, _ = run()
    assert compared >= 20
    rows = [f"{d.case} {d.subject}: ckptdiff {d.ckptdiff} / engine {d.engine_did}" for d in found]
    assert not found, "\n".join(rows)
