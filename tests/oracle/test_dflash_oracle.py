"""``pytest -m oracle``: the DFlash cases (dflash_cases.py) through vLLM's and SGLang's own DFlash loaders, against
ckptdiff's replay (dflash_check.py): 0 disagreements, one test per engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from dflash_check import run  # noqa: E402

pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dflash_verdicts_match_the_engines_loaders(engine) -> None:
    found, compared, _ = run([engine])
    assert compared[engine] >= 15
    rows = [f"{d.case} {d.engine} {d.subject}: ckptdiff {d.ckptdiff} / engine {d.observed}" for d in found]
    assert not found, "\n".join(rows)
