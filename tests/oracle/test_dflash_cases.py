"""The oracle's DFlash cases on the family registry (default suite, no engine needed): their names are namespaced,
ckptdiff serves each as a DFlash drafter under both engines, and the family's judge finds what differs."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from dflash_cases import names_of, write_cases  # noqa: E402
from dflash_judge import judge  # noqa: E402
from dflash_setting_cases import ALL_CASES as CASES  # noqa: E402
from oracle_families import all_cases, family_of, oracle_family  # noqa: E402

from ckptdiff.pipeline import compare_specs  # noqa: E402


def test_the_dflash_cases_are_on_the_registry_with_namespaced_names() -> None:
    family = oracle_family("dflash")
    assert family.judge is not None and family.driver == "dflash_"
    cases = [c for c in all_cases() if family_of(c) == "dflash"]
    assert len(cases) == len(CASES) >= 28
    assert all(c.name.startswith("dflash_") and c.split == "main" for c in cases)
    assert "basic" in {c.name for c in all_cases()}  # EAGLE-3's, no longer shadowed by DFlash's


def test_every_dflash_case_is_served_as_a_dflash_drafter_by_both_engines(tmp_path: Path) -> None:
    written = write_cases(tmp_path, CASES)
    for case in CASES:
        folder, target = written[case.name]
        assert sorted(p.name for p in folder.iterdir()) >= ["config.json"], case.name
        assert names_of(case), case.name
        report = compare_specs(str(folder), None, engines=("vllm", "sglang"), base=str(target))
        assert [r.engine for r in report.engines] == ["vllm", "sglang"], case.name
        for result in report.engines:  # DFlash's load rules spoke, in their words
            assert result.events and all(e.wording.startswith("dflash.") for e in result.events), case.name


def _entry(parameters: dict[str, str], tensors: dict[str, str]) -> dict[str, object]:
    return {
        "engine": "sglang",
        "outcome": "loads",
        "events": [],
        "parameters": [{"name": n, "fate": f} for n, f in parameters.items()],
        "tensors": [{"name": n, "fate": f} for n, f in tensors.items()],
    }


def test_the_judge_finds_a_parameter_the_engine_left_unwritten() -> None:
    case = next(c for c in CASES if c.name == "dflash_basic")
    said = _entry({"fc.weight": "loaded", "mask_embedding": "not_needed"}, {"fc.weight": "loaded"})
    did = {"raised": None, "params": {"fc.weight": "loaded", "mask_embedding": "unwritten"}, "loaded": ["fc.weight"]}
    assert judge(case, "sglang", did, said) == []
    did_not = {**did, "params": {"fc.weight": "unwritten", "mask_embedding": "unwritten"}, "loaded": []}
    subjects = {d.subject for d in judge(case, "sglang", did_not, said)}
    assert subjects == {"outcome"}


def test_the_judge_takes_a_sink_bias_left_at_its_built_value_as_its_default() -> None:
    case = next(c for c in CASES if c.name == "dflash_sink_bias_not_shipped")
    sink = "model.layers.0.self_attn.attention_sink_bias"
    said = _entry({"model.fc.weight": "loaded", sink: "default"}, {"fc.weight": "loaded"})
    said |= {"engine": "vllm", "outcome": "degraded"}
    did = {
        "raised": None,
        "params": {"model.fc.weight": "loaded", sink: "unwritten"},
        "loaded": ["fc.weight"],
        "built_fill": [sink],
    }
    assert judge(case, "vllm", did, said) == []
    # not built at -inf: an unwritten parameter is random, which the report does not say
    assert {d.subject for d in judge(case, "vllm", {**did, "built_fill": []}, said)} == {f"parameter {sink}"}
