"""The oracle's MTP cases and family plumbing (default suite, no engine needed): the cases are what they claim,
and ckptdiff serves each as an MTP drafter."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from compare import engine_view  # noqa: E402
from mtp_cases import inert, write_mtp_cases  # noqa: E402
from mtp_catalogue import MTP_CASES  # noqa: E402
from oracle_families import ORACLE_FAMILIES, all_cases, family_of  # noqa: E402

from ckptdiff.pipeline import compare_specs  # noqa: E402


def test_there_are_at_least_40_mtp_cases_with_names_unique_across_families() -> None:
    cases = all_cases()
    assert len([c for c in cases if family_of(c) == "mtp"]) >= 40
    assert len({c.name for c in cases}) == len(cases)
    assert [f.name for f in ORACLE_FAMILIES][:2] == ["eagle3", "mtp"]


def test_every_mtp_case_is_served_as_an_mtp_drafter_by_both_engines(tmp_path: Path) -> None:
    written = write_mtp_cases(tmp_path, MTP_CASES)
    for case in MTP_CASES:
        folder, base = written[case.name]
        assert (base is None) == (case.target is None)
        report = compare_specs(str(folder), None, engines=("vllm", "sglang"), base=str(base) if base else None)
        assert [r.engine for r in report.engines] == ["vllm", "sglang"], case.name
        codes = {e.code for r in report.engines for e in r.events}
        assert "not_eagle3" not in codes and "architecture_not_eagle3" not in codes, case.name


def test_a_targets_own_tensors_going_unused_is_no_degradation() -> None:
    case = next(c for c in MTP_CASES if c.name == "mtp_ds_full")
    loaded = sorted(case.drafter_names - {n for n in case.names if "embed_tokens" in n or "shared_head.head" in n})
    result = {"loaded": loaded, "params": {}, "from_target": ["model.embed_tokens.weight", "lm_head.weight"]}
    view = engine_view(result, case, case.names, inert(case, result))
    assert view.outcome == "loads", view.reasons
    assert view.tensors["lm_head.weight"] == "unused"  # the target's: compared, not counted against the drafter
    without = engine_view(result, case, case.names)
    assert without.outcome == "degraded"
