"""The targets vLLM builds an MTP drafter for beyond those ckptdiff replays (vllm/config/speculative.py
hf_config_override, as data in ckptdiff/families/mtp/engines/vllm_types.py): each is named as the class vLLM builds,
its loader not modelled, never "no MTP class"."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mtp import deepseek_config, run, target

from ckptdiff.families.mtp.engines.vllm_types import OVERRIDES
from ckptdiff.formats.messages import event_message


def _configs() -> list[tuple[str, dict[str, object]]]:
    """One config per model type, architecture and model-type piece of each class in the table."""
    out: list[tuple[str, dict[str, object]]] = []
    for name, _, types, architectures, pieces in OVERRIDES:
        out += [(name, deepseek_config(model_type=t, architectures=["SomeForCausalLM"])) for t in types]
        out += [(name, deepseek_config(model_type="some_model", architectures=[a])) for a in architectures]
        out += [(name, deepseek_config(model_type=f"{p}_vl", architectures=["SomeForCausalLM"])) for p in pieces]
    return out


@pytest.mark.parametrize(("cls", "config"), _configs())
def test_each_target_vllm_builds_an_mtp_drafter_for_is_named_unmodelled(tmp_path: Path, cls: str, config) -> None:
    report = run(target(tmp_path / "t", config=config), "vllm")
    (result,) = report.engines
    assert [e.code for e in result.events] == ["mtp_not_modelled"]
    event = result.events[0]
    assert f"vLLM builds {cls} " in event_message(event)
    assert "vllm/config/speculative.py:" in event.source and "v0.33.0" in event.source


def test_a_type_vllm_does_not_map_is_still_no_class(tmp_path: Path) -> None:
    config = deepseek_config(model_type="exaone4", architectures=["SomeForCausalLM"])
    (result,) = run(target(tmp_path / "t", config=config), "vllm").engines
    assert [e.code for e in result.events] == ["mtp_not_supported"]
