"""The oracle job (``pytest -m oracle``): on every case, ckptdiff's fates and outcome equal the engine loader's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from catalogue import CASES  # noqa: E402
from engines import missing_environments, pins  # noqa: E402
from run import DEFAULT_OUT, REPO, Result, run  # noqa: E402

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def oracle() -> Result:
    missing = missing_environments(pins())
    if missing:
        labels = ", ".join(pin.label for pin in missing)
        pytest.skip(f"oracle: no engine environment for {labels} (bash tests/oracle/install_engines.sh)")
    result = run(REPO, None, None)
    DEFAULT_OUT.write_text(f"ckptdiff at {REPO}\n" + result.table())
    return result


@pytest.mark.parametrize("engine", [pin.engine for pin in pins()])
@pytest.mark.parametrize("case", [case.name for case in CASES])
def test_ckptdiff_says_what_the_engine_does(oracle: Result, case: str, engine: str) -> None:
    comparable = next(c for c in CASES if c.name == case).not_comparable
    if engine in comparable:
        pytest.skip(f"not comparable under {engine}: {comparable[engine]}")
    found = [d for d in oracle.found if d.case == case and d.engine == engine]
    rows = "\n".join("  ".join(d.row()[2:]) for d in found)
    assert not found, f"{case} under {engine}: subject / ckptdiff says / engine did\n{rows}"
