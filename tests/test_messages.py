"""The message catalogue words findings from their code and params alone; profiles and --values build data only.

A reader of the JSON report can do the same: every EAGLE-3 and --values finding's ``message`` is a function of
its ``code`` and ``params``.
"""

from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path

import pytest

from ckptdiff.families.eagle3.messages import FINDINGS as EAGLE3
from ckptdiff.formats import messages
from ckptdiff.formats.values_messages import VALUES, value_note_text
from ckptdiff.report import EngineEvent, EngineResult, Finding, ValueNote

ROOT = Path(__file__).resolve().parent.parent
DRAFTERS = ROOT / "fixtures" / "drafters"
KIMI = ["kimi-k2-eagle3-published", "kimi-k25-eagle3-ours", "kimi-k25-eagle3-two-aux", "kimi-k2-eagle3-no-lm-head"]


def codes_built_in(path: Path) -> set[str]:
    """The finding codes a module builds: the second argument of each ``found.add(...)`` / ``Finding(...)``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        code = node.args[1]
        if name in ("add", "Finding") and isinstance(code, ast.Constant) and isinstance(code.value, str):
            out.add(code.value)
    return out


@pytest.mark.parametrize("module", ["families/eagle3/profile.py", "values/findings.py"])
def test_every_code_a_module_builds_has_its_words_in_the_catalogue(module: str) -> None:
    built = codes_built_in(ROOT / "ckptdiff" / module)
    assert built and built <= set(messages.finding_catalogue())
    if module == "values/findings.py":  # chosen by a condition: "values_changed" if changed else "values_equal"
        assert {"values_changed", "values_equal"} <= set(VALUES)


def test_the_catalogue_words_a_finding_from_its_params_alone() -> None:
    finding = Finding(
        "error",
        "aux_layer_out_of_range",
        subject="eagle_aux_hidden_state_layer_ids",
        params={
            "setting": "eagle_aux_hidden_state_layer_ids=[2, 30, 58]",
            "outside": [58],
            "base": {"num_hidden_layers": 40},
            "sides": ["A", "B"],
        },
    )
    assert finding.message == ""  # no text is stored with it
    assert EAGLE3["aux_layer_out_of_range"](finding.params) == (
        "A and B: eagle_aux_hidden_state_layer_ids=[2, 30, 58] names layer(s) [58] but the base has "
        "num_hidden_layers=40 (ids must be < 40; mind the SGLang/vLLM off-by-one)"
    )


def test_aux_layer_ids_worded_with_the_engines_unless_the_engine_view_dropped_the_shift() -> None:
    params = {"key": "eagle_aux_hidden_state_layer_ids", "a": [2, 30, 58], "b": [3, 31, 59]}
    difference = "eagle_aux_hidden_state_layer_ids differs: A [2, 30, 58], B [3, 31, 59]"
    assert EAGLE3["aux_layer_ids_differ"]({**params, "shift": 1}) == (
        f"{difference}; B's ids are A's +1: SGLang and vLLM read these ids off by one from each other, so one of "
        "the two was probably written for the other engine"
    )
    assert "the drafters fuse different target layers" in EAGLE3["aux_layer_ids_differ"]({**params, "shift": 0})
    assert EAGLE3["aux_layer_ids_differ"](params) == difference  # --engine: each engine's events say the rest


def test_a_values_note_is_data_worded_by_the_formats() -> None:
    assert value_note_text(ValueNote(widened=("BF16", "F32"))) == "BF16 vs F32, compared as float32"
    assert value_note_text(ValueNote(widened=("BF16", "F32"), nonfinite=3)) == (
        "BF16 vs F32, compared as float32; 3 non-finite element(s) left out of the statistics"
    )
    assert value_note_text(ValueNote(not_widened="F4")) == "dtype F4 is not widened to float32"
    assert value_note_text(ValueNote(not_widened="F4", bytes_compared=True)) == (
        "dtype F4 is not widened to float32; bytes compared"
    )


def test_a_values_summary_names_a_bytes_only_change_by_its_note() -> None:
    """As a report written before bytes-only changes were named apart has them, among the largest."""
    params = {
        "compared": 3,
        "equal": 1,
        "changed": 2,
        "largest": [
            {"tensor": "fc.weight", "rel_l2": 0.0123, "cosine": 0.99987654, "max_abs": 0.5},
            {"tensor": "w4", "rel_l2": None, "cosine": None, "max_abs": None,
             "note": {"not_widened": "F4", "bytes_compared": True}},
        ],
    }  # fmt: skip
    assert VALUES["values_changed"](params) == (
        "3 tensors compared by value: 1 equal, 2 changed; largest: fc.weight (rel L2 0.0123, cos 0.999877, "
        "max |Δ| 0.5), w4 (dtype F4 is not widened to float32; bytes compared)"
    )


def test_a_values_summary_names_changes_it_cannot_measure_apart() -> None:
    """Bytes-only changes (F4, F6) have no size: named after the largest measured ones, the rest counted."""
    fp4 = {"rel_l2": None, "cosine": None, "max_abs": None, "note": {"not_widened": "F4", "bytes_compared": True}}
    params = {
        "compared": 9,
        "equal": 1,
        "changed": 8,
        "largest": [{"tensor": "fc.weight", "rel_l2": 0.0123, "cosine": 0.99987654, "max_abs": 0.5}],
        "unmeasured": [{"tensor": f"experts.{n}.w", **fp4} for n in range(5)],
        "unmeasured_count": 7,
    }
    assert VALUES["values_changed"](params) == (
        "9 tensors compared by value: 1 equal, 8 changed; largest: fc.weight (rel L2 0.0123, cos 0.999877, "
        "max |Δ| 0.5); changed, not measured: "
        + ", ".join(f"experts.{n}.w (dtype F4 is not widened to float32; bytes compared)" for n in range(5))
        + ", +2 more"
    )


@pytest.fixture(scope="module")
def json_report(tmp_path_factory):
    """``ckptdiff args --format json`` (in this process: the words are the point, not the process), each command
    line run once for the module's tests."""
    from conftest import cli_env, run_in_process
    from report_json import validate_if_report

    env = cli_env(tmp_path_factory.mktemp("messages"), None)
    reports: dict[tuple[str, ...], dict] = {}

    def report(*args: str) -> dict:
        if args not in reports:
            done = run_in_process([*args, "--format", "json"], env, ROOT)
            assert done.returncode in (0, 1), done.stderr
            validate_if_report(done.stdout)
            reports[args] = json.loads(done.stdout)
        return reports[args]

    return report


PAIRS = [
    *itertools.combinations([f"fixtures/{name}" for name in KIMI], 2),
    ("fixtures/drafters/specforge-qwen3-8b", "fixtures/drafters/fp8-qwen3-8b"),
    ("fixtures/drafters/modelopt-llama3.1-8b", "fixtures/drafters/yuhuili-eagle3-llama3.1-8b"),
]
BASES = {"qwen3": "qwen3-8b", "llama3.1": "llama3.1-8b"}


@pytest.mark.parametrize("a, b", PAIRS)
def test_a_json_reports_profile_findings_are_worded_again_from_their_params(json_report, a: str, b: str) -> None:
    base = next((f"fixtures/drafters/bases/{v}" for k, v in BASES.items() if k in a), "fixtures/drafters/bases/kimi-k2")
    for args in ((a, b), (a, b, "--base", base), (a, b, "--base", base, "--engine", "all")):
        for found in json_report(*args)["findings"]:
            if found["code"] in EAGLE3:
                assert EAGLE3[found["code"]](messages.shown_params(found.get("params", {}))) == found["message"], found


@pytest.mark.parametrize("a, b", PAIRS)
def test_a_json_reports_engine_events_are_worded_again_from_their_wording_and_params(
    json_report, a: str, b: str
) -> None:
    base = next((f"fixtures/drafters/bases/{v}" for k, v in BASES.items() if k in a), "fixtures/drafters/bases/kimi-k2")
    events = [
        event
        for args in ((a, b, "--engine", "all"), (a, b, "--base", base, "--engine", "all"))
        for entry in json_report(*args)["engines"]
        for event in entry["events"]
    ]
    assert events
    for found in events:
        event = EngineEvent(
            found["severity"], found["code"], found["tensor"], found["wording"], found.get("params", {}),
            found.get("source"),
        )  # fmt: skip
        assert found["wording"] in messages.event_catalogue().words, found
        assert messages.event_message(event) == found["message"], found
        assert "?" not in found["message"].replace("?)", ""), found  # every field its words name was given


def test_the_report_model_holds_no_words_for_engine_events() -> None:
    """An event is its code, wording key, params and citation; its text exists only where a format renders it."""
    assert "message" not in EngineEvent.__struct_fields__ and "summary" not in EngineResult.__struct_fields__


def test_an_engine_event_quotes_its_tensor_as_the_tables_write_names() -> None:
    """A backslash doubled, a control character escaped, in the event's words and in its engine's headline."""
    event = EngineEvent("warning", "dropped", "a\\t\x1b.weight", "eagle3.sglang.dropped", {"name": "a\\t\x1b.weight"})
    assert messages.event_message(event) == "a\\\\t\\x1b.weight is not used by SGLang (skipped by load_weights)"
    result = EngineResult("sglang", "A", (event,))
    assert messages.headline(result) == "sglang A: degraded — dropped (a\\\\t\\x1b.weight)"
