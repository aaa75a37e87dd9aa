"""A checkpoint that is no drafter at all (a base model) under ``--engine``: the engine's verdict is one line saying
so, not an event per tensor and parameter (vLLM builds ``Eagle3`` + any architecture, so its EAGLE-3 loader is
replayed on every tensor of the base); a drafter keeps its events."""

from __future__ import annotations

import json
import shutil

import pytest

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_kimi_k2_base

DRAFTER = FIXTURES / "kimi-k2-eagle3-published"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    """A Kimi-K2 base (DeepseekV3ForCausalLM) cut to 6 layers of 2 experts: 193 tensors."""
    return str(write_kimi_k2_base(tmp_path_factory.mktemp("base") / "Kimi-K2-Instruct", layers=6, experts=2))


def test_a_base_model_under_vllm_is_one_line_saying_it_is_not_a_drafter(run_cli, base):
    result = run_cli(base, "--engine", "vllm")

    assert result.returncode == 1
    engine_lines = result.stdout.split("engines:\n")[1].splitlines()
    assert (
        engine_lines[0]
        == "  vllm A: fails — DeepseekV3ForCausalLM is not an EAGLE-3 drafter; 580 weights random (model.*)"
    )
    assert engine_lines[1].startswith(
        "    error [not_a_drafter] DeepseekV3ForCausalLM is not an EAGLE-3 drafter: its config.json has no Eagle3 "
        "class, eagle_config or speculators type, and vLLM's EAGLE-3 loader has no parameter for 192 of its 193 "
        "tensors (the first, model.embed_tokens.weight: unknown_name); 580 of the drafter's parameters would keep "
        "their initial values"
    )
    assert engine_lines[2:] == ["", "incompatible: 1 error (vllm A not_a_drafter)"]


def test_the_json_report_keeps_each_tensors_fate(run_cli, base):
    (engine,) = json.loads(run_cli(base, "--engine", "vllm", "--format", "json").stdout)["engines"]
    assert [event["code"] for event in engine["events"]] == ["not_a_drafter"]
    assert len(engine["tensors"]) == 193 and sum(t["fate"] == "error" for t in engine["tensors"]) == 192


def test_beside_a_drafter_only_the_base_side_is_folded(run_cli, base):
    document = json.loads(run_cli(base, str(DRAFTER), "--engine", "vllm", "--format", "json").stdout)
    a, b = document["engines"]
    assert [event["code"] for event in a["events"]] == ["not_a_drafter"]
    assert b["outcome"] == "loads"


def test_a_drafter_whose_config_lost_its_eagle3_signs_keeps_its_events(run_cli, tmp_path):
    """Most of its tensors have a place in the drafter: the events say which do not."""
    folder = tmp_path / "drafter"
    shutil.copytree(DRAFTER, folder)
    config = json.loads((folder / "config.json").read_text())
    del config["eagle_config"]
    config["architectures"] = ["DeepseekV3ForCausalLM"]
    (folder / "config.json").write_text(json.dumps(config))

    (engine,) = json.loads(run_cli(str(folder), "--engine", "vllm", "--format", "json").stdout)["engines"]

    codes = [event["code"] for event in engine["events"] if event["severity"] == "error"]
    assert codes == ["unknown_name"] * 3 and "not_a_drafter" not in codes
