"""DFlash settings the engines read as they build the drafter or start: the attention sink biases a MiMo-style config
asks for, where the mask token id is looked up (a null in dflash_config included), and a block size written as a
string. Each against the rebuilt z-lab layout (fixtures/dflash/) and its Qwen3-8B base, as the oracle's
dflash_setting_cases.py proves them against the engines."""

from __future__ import annotations

import json
from pathlib import Path

from test_dflash import MASK, QWEN3_BASE, codes, drafter, engines

from ckptdiff.families.engine_settings import EngineSettings, using
from ckptdiff.formats.messages import event_message
from ckptdiff.pipeline import compare_specs
from fixtures.dflash_drafters import DRAFTER, HEADS

LAYERS = DRAFTER["num_hidden_layers"]
SINKS = [(f"layers.{i}.self_attn.attention_sink_bias", "F32", [HEADS]) for i in range(LAYERS)]
ASKS_FOR_SINKS = {"dflash_config": {**MASK, "attention_sink_bias": True}}


def fates(result, piece: str) -> set[str]:
    return {fate for name, fate in result.parameters if piece in name}


def test_sink_biases_the_config_asks_for_and_the_checkpoint_lacks(tmp_path: Path) -> None:
    found = engines(drafter(tmp_path / "d", config=ASKS_FOR_SINKS), QWEN3_BASE)
    vllm, sglang = found["vllm"], found["sglang"]
    # vLLM builds them at -inf: the layers attend as if they had no sink bias; SGLang's stay uninitialised
    assert vllm.outcome == "degraded" and codes(vllm) == ["sink_bias_default"] * LAYERS
    assert fates(vllm, "attention_sink_bias") == {"default"}
    assert "attends as if it had no sink bias" in event_message(vllm.events[0])
    assert sglang.outcome == "degraded" and codes(sglang) == ["random_init"] * LAYERS
    assert fates(sglang, "attention_sink_bias") == {"random"}


def test_shipped_sink_biases_load_where_the_flag_builds_them(tmp_path: Path) -> None:
    found = engines(drafter(tmp_path / "a", config=ASKS_FOR_SINKS, add=SINKS), QWEN3_BASE)
    assert found["vllm"].outcome == found["sglang"].outcome == "loads"
    assert fates(found["vllm"], "attention_sink_bias") == fates(found["sglang"], "attention_sink_bias") == {"loaded"}
    # MiMo's top-level key: vLLM falls back to it, SGLang reads dflash_config's only and skips the biases
    found = engines(drafter(tmp_path / "b", config={"add_swa_attention_sink_bias": True}, add=SINKS), QWEN3_BASE)
    assert found["vllm"].outcome == "loads" and fates(found["vllm"], "attention_sink_bias") == {"loaded"}
    assert found["sglang"].outcome == "loads" and fates(found["sglang"], "attention_sink_bias") == set()
    # no flag at all: vLLM has no parameter for them
    found = engines(drafter(tmp_path / "c", add=SINKS), QWEN3_BASE)
    assert found["vllm"].outcome == "fails" and set(codes(found["vllm"])) == {"unknown_name"}


def test_a_null_mask_token_id_in_dflash_config_hides_the_top_level_one(tmp_path: Path) -> None:
    # 200000 is past the base's vocabulary of 151936: read, it would be an error under both engines
    config = {"mask_token_id": 200000, "dflash_config": {**MASK, "mask_token_id": None}}
    folder = drafter(tmp_path / "d", config=config)
    found = engines(folder, QWEN3_BASE)
    vllm = found["vllm"]
    assert vllm.outcome == "fails" and codes(vllm) == ["mask_token_null"]
    assert "int(None) raises TypeError at start-up" in event_message(vllm.events[0])
    assert "mask_token_out_of_vocab" not in codes(found["sglang"])
    report = compare_specs(str(folder), None, base=str(QWEN3_BASE))
    assert "dflash_mask_token_out_of_vocab" not in {f.code for f in report.findings}
    # vLLM's V1 runner takes the null as it is (no int())
    with using(EngineSettings(vllm_runner="v1")):
        assert "mask_token_null" not in codes(engines(folder, QWEN3_BASE)["vllm"])
    # absent from dflash_config, the top-level key is read by both
    found = engines(drafter(tmp_path / "t", config={"mask_token_id": 200000, "dflash_config": {}}), QWEN3_BASE)
    assert "mask_token_out_of_vocab" in codes(found["sglang"]) and "mask_token_out_of_vocab" in codes(found["vllm"])


def test_no_mask_token_id_anywhere_stops_vllm_at_start_up(tmp_path: Path) -> None:
    config = {"dflash_config": {"target_layer_ids": MASK["target_layer_ids"]}}
    vllm = engines(drafter(tmp_path / "d", config=config), QWEN3_BASE)["vllm"]
    assert codes(vllm) == ["mask_token_missing"]
    assert "dflash_config.mask_token_id" in event_message(vllm.events[0])


def test_a_block_size_written_as_a_string_is_read_as_sglang_reads_it(tmp_path: Path, run_cli) -> None:
    folder = drafter(tmp_path / "d", config={"block_size": "16"})
    found = engines(folder, QWEN3_BASE)
    assert found["vllm"].outcome == found["sglang"].outcome == "loads"
    # compared with the same drafter saying 16, the setting is the same one
    other = drafter(tmp_path / "e", config={"block_size": 16})
    report = compare_specs(str(folder), str(other))
    assert "dflash_setting_differs" not in {f.code for f in report.findings}
    done = run_cli(str(folder), str(other), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["a"] is not None
    # a word int() refuses is SGLang's config refusal, not a file defect
    sglang = engines(drafter(tmp_path / "w", config={"block_size": "sixteen"}), QWEN3_BASE)["sglang"]
    assert codes(sglang) == ["dflash_config_refused"] and 'block_size is "sixteen"' in event_message(sglang.events[0])
