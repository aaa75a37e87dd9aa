"""The oracle job's converted outputs (``pytest -m oracle``): each published layout in fixtures/, converted by
``ckptdiff convert`` for each engine with a pinned loader, loads in that engine with every parameter written from
the source tensor convert.json names (tests/oracle/convert_cases.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import convert_mtp_cases  # noqa: E402
from convert_cases import ENGINES, Verdict, convert_all, run_engines, sources, summary  # noqa: E402
from engines import missing_environments, pins  # noqa: E402

pytestmark = pytest.mark.oracle


def engines_or_skip() -> None:
    missing = missing_environments([pin for pin in pins() if pin.engine in ENGINES])
    if missing:
        labels = ", ".join(pin.label for pin in missing)
        pytest.skip(f"oracle: no engine environment for {labels} (bash tests/oracle/install_engines.sh)")


def assert_agrees(verdicts: list[Verdict], source: str, engine: str) -> None:
    verdict = next(v for v in verdicts if v.source == source and v.engine == engine)
    if verdict.refused is not None:
        pytest.skip(f"convert refuses {source} for {engine}: {verdict.refused}")
    assert verdict.agrees, f"{source} under {engine}:\n" + "\n".join(verdict.problems)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    engines_or_skip()
    root = tmp_path_factory.mktemp("convert-oracle")
    converted, refused = convert_all(root)
    found = refused + run_engines(converted, root)
    Path("/tmp/oracle-convert.txt").write_text(summary(found) + "\n")
    return found


@pytest.fixture(scope="module")
def mtp_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    engines_or_skip()
    found = convert_mtp_cases.run(tmp_path_factory.mktemp("convert-mtp-oracle"))
    Path("/tmp/oracle-convert-mtp.txt").write_text(summary(found) + "\n")
    return found


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("source", sorted(sources()))
def test_a_converted_checkpoint_loads_from_the_source_tensors_convert_json_names(
    verdicts: list[Verdict], source: str, engine: str
) -> None:
    assert_agrees(verdicts, source, engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("source", convert_mtp_cases.SOURCES)
def test_moved_mtp_layers_load_from_the_source_tensors_convert_json_names(
    mtp_verdicts: list[Verdict], source: str, engine: str
) -> None:
    assert_agrees(mtp_verdicts, source, engine)
