"""The oracle's case generator (runs in the default suite, no engine needed): the cases are what they claim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from cases import TARGET_NAME, Case, digest, tensors_of, write_all  # noqa: E402
from catalogue import CASES  # noqa: E402
from compare import ckptdiff_view, engine_view, environment_failure  # noqa: E402
from compare_diff import disagreements, runner_capture  # noqa: E402

REPO = HERE.parent.parent


def test_there_are_at_least_150_distinct_cases(tmp_path: Path) -> None:
    """Distinct as the engines see them: the drafter's files and the target it is checked against."""
    written = write_all(tmp_path, CASES)
    assert len(written) >= 150
    targets = {case.name: case.target.name for case in CASES}
    digests = {name: digest(path) + targets[name] for name, path in written.items()}
    same = [name for name in digests if list(digests.values()).count(digests[name]) > 1]
    assert not same, f"cases with identical files: {same}"


def test_the_cases_are_written_byte_for_byte_the_same_each_time(tmp_path: Path) -> None:
    first = write_all(tmp_path / "one", CASES)
    second = write_all(tmp_path / "two", CASES)
    assert {n: digest(p) for n, p in first.items()} == {n: digest(p) for n, p in second.items()}
    assert digest(tmp_path / "one" / TARGET_NAME) == digest(tmp_path / "two" / TARGET_NAME)


def test_a_case_is_data_over_the_base_drafter(tmp_path: Path) -> None:
    case = Case(
        "example",
        "no hidden_norm, aux ids at the top level",
        config={"x.y": 3, "vocab_size": None},
        drop=("midlayer.hidden_norm.weight",),
        prefix="model.",
    )
    directory = write_all(tmp_path, [case])["example"]
    config = json.loads((directory / "config.json").read_text())
    assert config["x"] == {"y": 3} and "vocab_size" not in config
    names = set(tensors_of(case))
    assert "model.midlayer.hidden_norm.weight" not in names
    assert {"d2t", "t2d", "model.fc.weight"} <= names


def test_a_drop_of_a_name_the_drafter_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="does not have"):
        tensors_of(Case("typo", "a misspelt drop", drop=("midlayer.hiden_norm.weight",)))


def test_not_comparable_cases_say_why() -> None:
    for case in CASES:
        for engine, why in case.not_comparable.items():
            assert engine in ("vllm", "sglang") and len(why) > 20, case.name


def test_ckptdiff_reports_on_each_kind_of_case(tmp_path: Path) -> None:
    """Each kind of case (plain, speculators, MLA, FP8, prefixed) is a checkpoint ckptdiff reports on under both
    engines (exit 0 or 1, never 2)."""
    written = write_all(tmp_path, CASES)
    for name in ("basic", "speculators", "mla_basic", "fp8_with_quantization_config", "model_prefixed"):
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "ckptdiff",
                str(written[name]),
                "--base",
                str(tmp_path / TARGET_NAME),
                "--engine",
                "vllm",
                "--engine",
                "sglang",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"},
        )
        assert completed.returncode in (0, 1), (name, completed.stderr)
        assert {e["engine"] for e in json.loads(completed.stdout)["engines"]} == {"vllm", "sglang"}


BASIC = next(case for case in CASES if case.name == "basic")


def _observed(**changes: object) -> dict:
    """A worker result for the basic case under vLLM, as recorded from vLLM 0.33.0, with ``changes``."""
    params = {
        "draft_id_to_target_id": "loaded",
        "lm_head.weight": "loaded",
        "model.embed_tokens.weight": "unwritten",
        "model.fc.weight": "loaded",
        "model.layers.0.self_attn.qkv_proj.weight": "loaded",
        "model.norm.weight": "loaded",
    }
    result = {
        "raised": None,
        "stage": "done",
        "loaded": [n for n in tensors_of(BASIC) if n != "t2d"],
        "params": params,
        "from_target": ["model.embed_tokens.weight"],
        "float_into_int": [],
        "aux": {"ids": None, "outputs": [1, 15, 28], "fc_in": 192, "uses_aux": True},
        "embed_width": 64,
        "head_rows": 128,
    }
    result.update(changes)
    return result


def test_the_mapping_reads_a_clean_load_as_loads() -> None:
    view = engine_view(_observed(), BASIC)
    assert view.outcome == "loads", view.reasons
    assert view.tensors["t2d"] == "unused" and view.tensors["fc.weight"] == "used"
    assert view.parameters["model.embed_tokens.weight"] == "from_target"


def test_the_mapping_reads_an_unwritten_parameter_as_degraded() -> None:
    view = engine_view(_observed(params={**_observed()["params"], "model.norm.weight": "unwritten"}), BASIC)
    assert view.outcome == "degraded" and "model.norm.weight unwritten" in view.reasons


def test_the_mapping_reads_a_raise_as_fails() -> None:
    raised = {"type": "ValueError", "message": "There is no module or parameter named 'model'"}
    assert engine_view(_observed(raised=raised, stage="load"), BASIC).outcome == "fails"


def test_the_mapping_reads_too_few_captured_states_as_fails() -> None:
    aux = {"ids": [1, 15, 40], "outputs": [1, 15], "fc_in": 192, "uses_aux": True}
    view = engine_view(_observed(aux=aux), BASIC)
    assert view.outcome == "fails" and "fc reads 192" in view.reasons[0]


def test_the_mapping_reads_other_captured_layers_than_trained_as_degraded() -> None:
    aux = {"ids": [2, 16, 29], "outputs": [2, 16, 29], "fc_in": 192, "uses_aux": True}
    assert engine_view(_observed(aux=aux), BASIC).outcome == "degraded"


def test_every_difference_is_listed() -> None:
    engine = engine_view(_observed(params={**_observed()["params"], "model.norm.weight": "unwritten"}), BASIC)
    ckptdiff_entry = {
        "engine": "vllm",
        "outcome": "loads",
        "events": [],
        "tensors": [{"name": n, "fate": "loaded", "parameter": None} for n in tensors_of(BASIC)],
        "parameters": [
            {"name": "model.layers.0.self_attn.qkv_proj.weight[q]", "fate": "loaded"},
            {"name": "model.layers.0.self_attn.qkv_proj.weight[k]", "fate": "random"},
        ],
    }
    found = disagreements("basic", "vllm", ckptdiff_view(ckptdiff_entry), engine)
    subjects = {d.subject: (d.ckptdiff, d.engine_did) for d in found}
    assert subjects["outcome"][0] == "loads" and subjects["outcome"][1].startswith("degraded")
    assert subjects["tensor t2d"] == ("used", "unused")
    assert subjects["parameter model.layers.0.self_attn.qkv_proj.weight"] == ("partial", "loaded")
    assert subjects["parameter model.norm.weight"] == ("(no such parameter)", "unwritten")


def _entry(outcome: str, events: list[dict], fates: dict[str, str] | None = None) -> dict:
    """A ckptdiff engines[] entry for the basic case: every tensor loaded unless ``fates`` says otherwise."""
    fates = fates or {}
    return {
        "engine": "vllm",
        "outcome": outcome,
        "events": events,
        "tensors": [{"name": n, "fate": fates.get(n, "loaded"), "parameter": None} for n in tensors_of(BASIC)],
        "parameters": [],
    }


def _error(code: str, tensor: str | None = None, message: str = "") -> dict:
    return {"severity": "error", "code": code, "tensor": tensor, "message": message}


def test_both_failing_on_different_tensors_is_a_disagreement() -> None:
    raised = {"type": "ValueError", "message": "Attempted to load weight"}
    engine = engine_view(_observed(raised=raised, stage="load", loading="fc.weight"), BASIC)
    assert engine.tensors["fc.weight"] == "error"
    ours = ckptdiff_view(_entry("fails", [_error("shape_mismatch", "norm.weight")], {"norm.weight": "error"}))
    subjects = {d.subject: d for d in disagreements("basic", "vllm", ours, engine)}
    assert "failure" in subjects and "tensor fc.weight" in subjects
    assert "load tensor fc.weight" in subjects["failure"].engine_did


def test_both_failing_on_the_same_tensor_agrees() -> None:
    raised = {"type": "ValueError", "message": "Attempted to load weight"}
    engine = engine_view(_observed(raised=raised, stage="load", loading="fc.weight"), BASIC)
    ours = ckptdiff_view(_entry("fails", [_error("shape_mismatch", "fc.weight")], {"fc.weight": "error"}))
    assert disagreements("basic", "vllm", ours, engine) == []


def test_both_failing_at_different_stages_is_a_disagreement() -> None:
    raised = {"type": "AttributeError", "message": "'LlamaConfig' object has no attribute 'draft_vocab_size'"}
    engine = engine_view(_observed(raised=raised, stage="construct"), BASIC)
    assert engine.failures[0].subject == "draft_vocab_size"
    ours = ckptdiff_view(_entry("fails", [_error("unknown_name", "fc.weight")], {"fc.weight": "error"}))
    assert [d.subject for d in disagreements("basic", "vllm", ours, engine)] == ["failure"]
    named = _error("draft_vocab_size_absent", None, "config.json has no draft_vocab_size key")
    assert disagreements("basic", "vllm", ckptdiff_view(_entry("fails", [named])), engine) == []
    unnamed = _error("draft_vocab_size_absent", None, "a construction error about something else")
    assert [d.subject for d in disagreements("basic", "vllm", ckptdiff_view(_entry("fails", [unnamed])), engine)] == [
        "failure"
    ]


def test_an_error_code_the_mapping_does_not_know_is_a_disagreement() -> None:
    raised = {"type": "ValueError", "message": "x"}
    engine = engine_view(_observed(raised=raised, stage="config"), BASIC)
    ours = ckptdiff_view(_entry("fails", [_error("some_new_code")]))
    found = disagreements("basic", "vllm", ours, engine)
    assert [d.subject for d in found] == ["failure"] and "unmapped:some_new_code" in found[0].ckptdiff


def test_forward_defects_are_compared() -> None:
    aux = {"ids": [1, 15, 40], "outputs": [1, 15], "fc_in": 192, "uses_aux": True}
    engine = engine_view(_observed(aux=aux), BASIC)
    right = ckptdiff_view(_entry("fails", [_error("aux_id_out_of_range")]))
    wrong = ckptdiff_view(_entry("fails", [_error("embed_width_mismatch")]))
    assert "failure" not in {d.subject for d in disagreements("basic", "vllm", right, engine)}
    assert "failure" in {d.subject for d in disagreements("basic", "vllm", wrong, engine)}


def test_an_error_fate_is_compared_when_the_engine_loaded() -> None:
    engine = engine_view(_observed(), BASIC)
    ours = ckptdiff_view(_entry("loads", [], {"fc.weight": "error"}))
    assert ("tensor fc.weight", "error", "used") in {
        (d.subject, d.ckptdiff, d.engine_did) for d in disagreements("basic", "vllm", ours, engine)
    }


def test_an_environment_failure_names_what_the_machine_lacks() -> None:
    kernel = {
        "type": "NotImplementedError",
        "message": "Could not run 'sgl_kernel::fused_add' with arguments from the 'CPU' backend.",
    }
    assert environment_failure(_observed(raised=kernel, stage="load")) == "CPU kernel sgl_kernel::fused_add"
    isa = {"type": "RuntimeError", "message": "AMX instructions are required by this kernel"}
    assert environment_failure(_observed(raised=isa, stage="construct")) == "instruction set AMX"
    drafter = {"type": "ValueError", "message": "There is no module or parameter named 'model.x'"}
    assert environment_failure(_observed(raised=drafter, stage="load")) is None


def test_the_oracle_job_without_engines_fails_in_one_line(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "oracle",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "tests/oracle/test_oracle.py",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "CKPTDIFF_ORACLE_HOME": str(tmp_path)},
    )
    assert completed.returncode == 1, completed.stdout[-2000:]
    lines = [line for line in completed.stdout.splitlines() if "not installed" in line]
    assert len(lines) == 1 and "install_engines.sh" in lines[0], completed.stdout[-2000:]
    assert "passed" not in completed.stdout and "skipped" not in completed.stdout


def test_the_v1_runner_variant_has_its_own_worker_cache_and_cases(tmp_path: Path) -> None:
    """vLLM's V1 runner is compared as an engine of its own: its own worker module (so the V2 results stay
    cached), ckptdiff run with --vllm-runner v1, at least 10 distinct cases, each written as its family writes it."""
    from oracle_families import ORACLE_VARIANTS

    (variant,) = [v for v in ORACLE_VARIANTS if v.name == "vllm_v1"]
    assert variant.engine == "vllm" and variant.args == ("--vllm-runner", "v1")
    assert (HERE / f"worker_{variant.driver}{variant.engine}.py").is_file() and variant.driver
    cases = variant.cases()
    assert len({c.name for c in cases}) == len(cases) >= 10
    written = write_all(tmp_path, cases)
    assert len({digest(path) + case.target.name for case, path in zip(cases, written.values())}) == len(cases)
    text = (HERE / "worker_v1_vllm.py").read_text()
    assert 'os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"' in text and "ckptdiff" not in text.split('"""')[2]


def test_the_v2_runner_variant_runs_the_runners_own_load_model_on_its_own_cases(tmp_path: Path) -> None:
    """vLLM's default runner driven through its own load_model is compared as an engine of its own: its own worker
    module (so the EAGLE-3 job's results stay cached), ckptdiff with its default runner, distinct cases where
    use_aux_hidden_state is false, null, 0, absent, true or a string, over capturing and refusing target classes."""
    from oracle_families import ORACLE_VARIANTS

    (variant,) = [v for v in ORACLE_VARIANTS if v.name == "vllm_v2"]
    assert variant.engine == "vllm" and variant.args == () and variant.driver == "v2_"
    cases = variant.cases()
    assert len({c.name for c in cases}) == len(cases) >= 30
    written = write_all(tmp_path, cases)
    assert len({digest(path) + case.target.name for case, path in zip(cases, written.values())}) == len(cases)
    flags = set()
    for path in written.values():
        config = json.loads((path / "config.json").read_text())
        holder = config.get("transformer_layer_config", config) if "speculators_model_type" in config else config
        eagle = holder.get("eagle_config") or {}
        flags.add(repr(eagle.get("use_aux_hidden_state", "absent")))
    assert {"False", "None", "0", "'absent'", "True", "'false'"} <= flags
    classes = {case.target.model_class for case in cases}
    capturing = {"llama", "qwen3", "qwen2", "qwen3_moe", "deepseek_v3", "gpt_oss"}
    assert capturing | {"gemma2", "mixtral", "glm4_moe"} <= classes
    text = (HERE / "worker_v2_vllm.py").read_text()
    assert "runner.load_model(model=target)" in text and "ckptdiff" not in text.split('"""')[2]


def _runner_observed(uses: bool, outputs: list[int] | None = None, **aux: object) -> dict:
    seen = {"uses_aux": True, "runner_uses_aux": uses, "runner": "v2", "set_up_called": uses, **aux}
    if outputs is not None:
        seen["outputs"] = outputs
    return {"raised": None, "stage": "done", "aux": seen}


def _capture_event(code: str, captured: list[int] | None = None) -> dict:
    params = {"captured": captured} if captured is not None else {}
    return {"severity": "info", "code": code, "tensor": None, "message": "", "params": params}


def test_a_runners_capture_decision_is_compared_with_aux_capture_off_and_the_layers_captured() -> None:
    off = _entry("loads", [_capture_event("aux_capture_off")])
    on = _entry("loads", [_capture_event("aux_ids", [1, 15, 28])])
    assert runner_capture("c", "vllm_v2", _runner_observed(False, []), off) == []
    assert runner_capture("c", "vllm_v2", _runner_observed(True, [1, 15, 28]), on) == []
    said = runner_capture("c", "vllm_v2", _runner_observed(False, []), on)
    assert [(d.subject, d.ckptdiff) for d in said] == [("capture set-up", "a capture set up")]
    said = runner_capture("c", "vllm_v2", _runner_observed(True, [1, 15, 28]), off)
    assert [d.subject for d in said] == ["capture set-up"]
    moved = runner_capture("c", "vllm_v2", _runner_observed(True, [0, 14, 27]), on)
    assert [(d.subject, d.ckptdiff, d.engine_did) for d in moved] == [
        ("runner_capture", "outputs [1, 15, 28]", "outputs [0, 14, 27]")
    ]
    refused = _runner_observed(True, None, capture_error="RuntimeError: Model does not support EAGLE3 interface")
    assert runner_capture("c", "vllm_v2", refused, _entry("fails", [_error("target_class_not_eagle3")])) == []
    # The EAGLE-3 job sets the capture up itself (no runner flag): not judged here.
    assert runner_capture("c", "vllm", {"raised": None, "aux": {"outputs": [1, 15, 28]}}, off) == []


def test_without_a_capture_the_v2_runner_never_runs_fc_and_v1_does() -> None:
    """V2's speculator hands the drafter the last hidden state when nothing was captured (no fc: an MLA drafter's
    fc, built regardless, never runs); V1's proposer calls combine_hidden_states whatever was captured."""
    base = {"uses_aux": True, "runner_uses_aux": False, "fc_in": 192, "outputs": []}
    v2 = engine_view(_observed(aux={**base, "runner": "v2"}), BASIC)
    v1 = engine_view(_observed(aux={**base, "runner": "v1"}), BASIC)
    assert v2.outcome != "fails" and v1.outcome == "fails"
