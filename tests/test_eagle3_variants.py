"""The eagle3 family's variants (multi-layer, EAGLE 3.1, MLA) end to end: which norm each engine's later layers
read, which fc_norm keys each engine honours, the MLA drafter's fc, and the rebuilt K2.5 layouts on a K2.5 base."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ckptdiff.families.eagle3.spec import DrafterSpec
from ckptdiff.pipeline import compare_specs
from fixtures.generate import write_config, write_safetensors
from fixtures.published_drafters import (
    HIDDEN,
    KIMI_K25_MLA,
    KIMI_K26_MLA_31,
    MULTI_LAYER,
    ROOT,
    head,
    llama_layer,
    mla_layer,
)

REPO = Path(__file__).resolve().parent.parent
BASES = ROOT / "bases"


def engines(folder: Path, base: str) -> dict[str, Any]:
    report = compare_specs(str(folder), None, engines=("vllm", "sglang"), base=str(BASES / base))
    return {result.engine: result for result in report.engines}


def drafter(folder: Path, config: dict[str, Any], tensors: list[Any]) -> Path:
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", sorted(tensors), fill="zeros")
    return folder


def two_layers(tmp_path: Path, without: str) -> Path:
    tensors = llama_layer("layers.0.", first=True) + llama_layer("layers.1.", first=False) + head()
    tensors = [t for t in tensors if t[0] != f"layers.1.{without}.weight"]
    return drafter(tmp_path / without, MULTI_LAYER, tensors)


def codes(result: Any) -> set[str]:
    return {event.code for event in result.events}


def test_a_later_layer_without_hidden_norm_loads_under_vllm_and_degrades_under_sglang(tmp_path: Path) -> None:
    found = engines(two_layers(tmp_path, "hidden_norm"), "qwen3-8b")
    assert found["vllm"].outcome == "loads" and "unread" in codes(found["vllm"])
    assert found["sglang"].outcome == "degraded" and "random_init" in codes(found["sglang"])


def test_a_later_layer_without_input_layernorm_degrades_under_vllm_and_loads_under_sglang(tmp_path: Path) -> None:
    found = engines(two_layers(tmp_path, "input_layernorm"), "qwen3-8b")
    assert found["vllm"].outcome == "degraded" and "random_init" in codes(found["vllm"])
    assert found["sglang"].outcome == "loads" and "unread" in codes(found["sglang"])


def test_both_norms_stored_each_engine_loads_one_unread() -> None:
    found = engines(ROOT / "multi-layer-3-qwen3-8b", "qwen3-8b")
    for engine, norm in (("vllm", "hidden_norm"), ("sglang", "input_layernorm")):
        unread = sorted(e.tensor for e in found[engine].events if e.code == "loaded_unread")
        assert unread == [f"layers.1.{norm}.weight", f"layers.2.{norm}.weight"], engine


def test_use_aux_norm_builds_fc_norm_under_sglang_only(tmp_path: Path) -> None:
    config = copy.deepcopy(MULTI_LAYER) | {"num_hidden_layers": 1, "use_aux_norm": True}
    tensors = (
        llama_layer("midlayer.", first=True) + head() + [(f"fc_norm.{i}.weight", "BF16", [HIDDEN]) for i in range(3)]
    )
    found = engines(drafter(tmp_path / "d", config, tensors), "qwen3-8b")
    assert found["sglang"].outcome == "loads"
    assert found["vllm"].outcome == "fails" and "unknown_name" in codes(found["vllm"])


def test_fc_norm_nested_in_eagle_config_builds_nothing(tmp_path: Path) -> None:
    config = copy.deepcopy(MULTI_LAYER) | {"num_hidden_layers": 1}
    config["eagle_config"] = {**config.get("eagle_config", {}), "fc_norm": True}
    tensors = (
        llama_layer("midlayer.", first=True) + head() + [(f"fc_norm.{i}.weight", "BF16", [HIDDEN]) for i in range(3)]
    )
    found = engines(drafter(tmp_path / "d", config, tensors), "qwen3-8b")
    assert found["vllm"].outcome == "fails"
    assert found["sglang"].outcome == "degraded" and "skipped_unknown_name" in codes(found["sglang"])


def test_the_variants_are_named() -> None:
    assert DrafterSpec.of(KIMI_K25_MLA).variants == ("mla",)
    assert DrafterSpec.of(KIMI_K26_MLA_31).variants == ("mla", "eagle3.1")
    assert DrafterSpec.of(MULTI_LAYER).variants == ("multi-layer",)
    nested_false = {**KIMI_K25_MLA, "norm_before_fc": True, "eagle_config": {"norm_before_fc": False}}
    assert DrafterSpec.of(nested_false).norm_before_fc is False


@pytest.mark.parametrize("name", ["kimi-k2.5-eagle3-mla", "kimi-k2.6-eagle3.1-mla"])
def test_the_k25_mla_drafters_load_on_a_k25_base_from_the_command_line(run_cli, name: str) -> None:
    done = run_cli(
        str(ROOT / name),
        "--base",
        str(BASES / "kimi-k25"),
        "--engine",
        "vllm",
        "--engine",
        "sglang",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = {entry["engine"]: entry for entry in json.loads(done.stdout)["engines"]}
    assert found["vllm"]["outcome"] == found["sglang"]["outcome"] == "loads"
    aux = [e["message"] for e in found["sglang"]["events"] if e["code"] == "aux_ids"]
    assert aux and "[1, 29, 57] on this 61-layer DeepSeek-V2/V3 target" in aux[0]
    # the target's embedding replaces the drafter's through the MLA drafter class's own set_embed
    embedding = [e for e in found["sglang"]["events"] if e["code"] == "from_target" and "embed" in e["message"]]
    assert embedding and all("kimi_k25_eagle3.py:404 (Eagle3DeepseekV2ForCausalLM.set_embed)" in e["source"]
                             for e in embedding)  # fmt: skip


def test_vllm_mla_loads_fc_without_aux(tmp_path: Path) -> None:
    config = copy.deepcopy(KIMI_K25_MLA)
    config["eagle_config"] = {"use_aux_hidden_state": False}
    found = engines(
        drafter(tmp_path / "d", config, mla_layer("layers.0.") + head(d2t=False, t2d=False, rows=128)), "kimi-k25"
    )
    fates = {t[0]: t[1] for t in found["vllm"].tensors}
    assert fates["fc.weight"] == "loaded"
