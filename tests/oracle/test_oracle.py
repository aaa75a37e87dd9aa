"""The oracle job (``pytest -m oracle``): on every case, ckptdiff's fates, failure and outcome equal the engine's.

The job is the main split; the held-out split (heldout.py) is scored, not required: ``run.py --split held-out``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from engines import pins  # noqa: E402
from oracle_families import ORACLE_VARIANTS, all_cases  # noqa: E402
from run import DEFAULT_OUT, REPO, Result, run  # noqa: E402

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def oracle() -> Result:
    # conftest.py has already failed the session when an engine environment is missing
    result = run(REPO, None, None, split="main")
    DEFAULT_OUT.write_text(f"ckptdiff at {REPO}\n" + result.table())
    return result


@pytest.mark.parametrize("engine", [pin.engine for pin in pins()])
@pytest.mark.parametrize("case", [case.name for case in all_cases() if case.split == "main"])
def test_ckptdiff_says_what_the_engine_does(oracle: Result, case: str, engine: str) -> None:
    off = next((why for name, each, why in oracle.not_comparable if name == case and each == engine), None)
    if off is not None:
        pytest.skip(f"not comparable under {engine}: {off}")
    found = [d for d in oracle.found if d.case == case and d.engine == engine]
    rows = "\n".join("  ".join(d.row()[2:]) for d in found)
    assert not found, f"{case} under {engine}: subject / ckptdiff says / engine did\n{rows}"


@pytest.mark.parametrize(
    ("variant", "case"),
    [(variant.name, case.name) for variant in ORACLE_VARIANTS for case in variant.cases() if case.split == "main"],
)
def test_ckptdiff_says_what_the_engine_does_under_its_settings(oracle: Result, variant: str, case: str) -> None:
    """An engine setting compared as an engine of its own (vLLM's V1 model runner: ``ckptdiff --vllm-runner v1``
    against vLLM's own V1 runner)."""
    test_ckptdiff_says_what_the_engine_does(oracle, case, variant)


def test_enough_comparable_cases(oracle: Result) -> None:
    """At least 150 cases compared under each engine (not comparable ones do not count)."""
    for pin in pins():
        assert len(oracle.comparable(pin.engine)) >= 150, pin.label
    for variant in ORACLE_VARIANTS:  # and at least 10 under each engine setting
        assert len(oracle.comparable(variant.name)) >= 10, variant.name
