"""The DFlash family: the spec read from config.json, vLLM's and SGLang's DFlash loaders replayed (each tensor's and
parameter's fate, what each takes from the target, where they split), the checks against the other side and the
base, and the rebuilt published layout in fixtures/dflash/, end to end from the command line."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from ckptdiff.families import detect_family
from ckptdiff.families.dflash.spec import DFlashSpec
from ckptdiff.formats.messages import event_message
from ckptdiff.pipeline import compare_specs
from fixtures.dflash_drafters import DRAFTER, SOURCE, drafter_tensors, write_dflash
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_config, write_safetensors

PUBLISHED = FIXTURES / "dflash" / "qwen3-8b-dflash-b16"
QWEN3_BASE = FIXTURES / "dflash" / "qwen3-8b-base-header-only"
LLAMA_BASE = FIXTURES / "dflash" / "llama3.1-8b-base-header-only"


def drafter(folder: Path, *, config: dict[str, Any] | None = None, drop: tuple[str, ...] = (), add=(), rename=None):
    """The rebuilt z-lab layout with edits: config keys merged (``dflash_config`` replaced whole), tensors
    dropped, added, or renamed by a function."""
    merged = {**DRAFTER, **(config or {})}
    write_config(folder, {k: v for k, v in merged.items() if v is not None})
    tensors = [t for t in drafter_tensors(DRAFTER) if t[0] not in drop]
    if rename is not None:
        tensors = [(rename(name), dtype, shape) for name, dtype, shape in tensors]
    write_safetensors(folder / "model.safetensors", [*tensors, *add])
    return folder


def engines(spec: Path, base: Path | None = None) -> dict[str, Any]:
    report = compare_specs(str(spec), None, engines=("vllm", "sglang"), base=str(base) if base else None)
    return {result.engine: result for result in report.engines}


def codes(result) -> list[str]:
    return [event.code for event in result.events if event.severity != "info"]


def test_the_rebuilt_layout_names_its_source_and_is_what_the_generator_writes(tmp_path) -> None:
    with open(PUBLISHED / "model.safetensors", "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        metadata = json.loads(handle.read(size))["__metadata__"]
    assert SOURCE in metadata["rebuilt_from"] and "rebuilt" in metadata["rebuilt_from"]
    written = write_dflash(tmp_path)
    for folder in written:
        for path in folder.iterdir():
            assert path.read_bytes() == (FIXTURES / "dflash" / folder.name / path.name).read_bytes(), path


def test_the_spec_reads_each_dflash_key_where_the_engines_read_it() -> None:
    spec = DFlashSpec.of(json.loads((PUBLISHED / "config.json").read_text()))
    assert detect_family(spec.config) == "dflash"
    assert (spec.block_size.value, spec.block_size.key) == (16, "block_size")
    assert spec.target_layer_ids.value == (1, 9, 17, 25, 33)
    assert spec.target_layer_ids.key == "dflash_config.target_layer_ids"
    assert (spec.mask_token_id.value, spec.num_target_layers, spec.layers) == (151669, 36, 5)
    assert spec.features(spec.target_layer_ids.value) == 5 and spec.features(None) == 5


def test_the_published_layout_loads_in_both_engines_with_the_targets_embedding_and_head(run_cli) -> None:
    done = run_cli(str(PUBLISHED), "--engine", "vllm", "--engine", "sglang", "--base", str(QWEN3_BASE), "-v")
    assert done.returncode == 0, done.stdout
    assert "vllm A: loads" in done.stdout and "sglang A: loads" in done.stdout
    assert "lm_head.weight: the drafter has none of its own; the target's is used" in done.stdout
    report = json.loads(
        run_cli(str(PUBLISHED), "--engine", "all", "--base", str(QWEN3_BASE), "--format", "json").stdout
    )
    assert [(e["engine"], e["outcome"]) for e in report["engines"]] == [("sglang", "loads"), ("vllm", "loads")]
    vllm = next(e for e in report["engines"] if e["engine"] == "vllm")
    fates = {entry["name"]: entry["fate"] for entry in vllm["parameters"]}
    assert fates["model.layers.4.self_attn.qkv_proj.weight"] == "loaded"
    assert fates["model.embed_tokens.weight"] == fates["lm_head.weight"] == "from_target"
    assert fates["model.mask_embedding"] == "not_needed"


def test_against_a_target_it_does_not_fit_each_engine_says_where_it_fails(run_cli) -> None:
    done = run_cli(str(PUBLISHED), "--engine", "vllm", "--engine", "sglang", "--base", str(LLAMA_BASE))
    assert done.returncode == 1
    by_engine = engines(PUBLISHED, LLAMA_BASE)
    # SGLang checks the ids against the target's depth at start-up; vLLM captures 4 of 5 states and fails on the
    # first forward, and its mask token lies outside the Llama vocabulary.
    assert codes(by_engine["sglang"]) == ["target_layer_out_of_range"]
    assert sorted(codes(by_engine["vllm"])) == ["mask_token_out_of_vocab", "target_layer_not_captured"]
    assert "spec_aux_hidden_state.py:247" in by_engine["sglang"].events[0].source
    # V2 (the default runner) combines the captured states first in start-up's profiling run, not the first forward
    assert "vLLM fails at start-up, where the profiling run's dummy draft combines them, with ValueError" in done.stdout
    assert "spec_decode/dflash/speculator.py:418 (_store_hidden_states)" in done.stdout


def test_a_target_class_without_dflash_capture_is_refused_by_the_engine_that_lacks_it(tmp_path) -> None:
    # SGLang's Qwen2 class has no set_dflash_layers_to_capture; vLLM's has the EAGLE-3 interface DFlash uses.
    qwen2 = tmp_path / "qwen2"
    shutil.copytree(QWEN3_BASE, qwen2)
    write_config(qwen2, {**json.loads((QWEN3_BASE / "config.json").read_text()), "architectures": ["Qwen2ForCausalLM"]})
    by_engine = engines(PUBLISHED, qwen2)
    assert codes(by_engine["sglang"]) == ["target_not_capturable"]
    assert "attention_backend_setup.py:62" in by_engine["sglang"].events[0].source
    assert by_engine["vllm"].outcome == "loads"
    # A class in neither table is not guessed: the verdict says what it assumes.
    other = tmp_path / "other"
    shutil.copytree(QWEN3_BASE, other)
    write_config(other, {**json.loads((QWEN3_BASE / "config.json").read_text()), "architectures": ["NewForCausalLM"]})
    for result in engines(PUBLISHED, other).values():
        assert result.outcome == "loads" and "target_class_unknown" in [e.code for e in result.events]


def test_top_level_ids_are_read_by_vllms_default_runner_and_not_by_its_v1_runner(tmp_path) -> None:
    folder = drafter(
        tmp_path / "d",
        config={"dflash_config": {"mask_token_id": 151669}, "target_layer_ids": [1, 9, 17, 25, 33]},
    )
    vllm = engines(folder, QWEN3_BASE)["vllm"]
    assert vllm.outcome == "loads"  # the V2 runner (the default for DFlash) reads the top-level ids
    (v1,) = [event for event in vllm.events if event.code == "v1_runner_capture_differs"]
    assert v1.params["v1"] is None and v1.params["fails"] is True
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in event_message(v1) and "first forward fails" in event_message(v1)


def test_without_a_base_the_verdict_says_what_it_assumes_of_the_target() -> None:
    for result in engines(PUBLISHED).values():
        assert result.outcome == "loads"
        (assumed,) = [event for event in result.events if event.code == "target_unknown"]
        assert "more than 33 layers" in event_message(assumed) and "151669" in event_message(assumed)


def test_a_name_neither_loader_knows_fails_vllm_and_is_skipped_by_sglang(tmp_path) -> None:
    folder = drafter(tmp_path / "d", add=[("extra_proj.weight", "BF16", [4, 16])])
    by_engine = engines(folder, QWEN3_BASE)
    assert codes(by_engine["vllm"]) == ["unknown_name"] and by_engine["vllm"].outcome == "fails"
    assert by_engine["sglang"].outcome == "loads"
    assert ("extra_proj.weight", "skipped", None) in by_engine["sglang"].tensors
    # A rotary cache is dropped by vLLM's AutoWeightsLoader before any lookup (and skipped by SGLang).
    cached = drafter(tmp_path / "r", add=[("rotary_emb.inv_freq", "F32", [4])])
    assert {result.outcome for result in engines(cached, QWEN3_BASE).values()} == {"loads"}


def test_model_prefixed_names_load_in_sglang_and_not_in_vllm(tmp_path) -> None:
    folder = drafter(tmp_path / "d", rename=lambda name: "model." + name)
    by_engine = engines(folder, QWEN3_BASE)
    assert by_engine["sglang"].outcome == "loads"
    assert by_engine["vllm"].outcome == "fails" and "unknown_name" in codes(by_engine["vllm"])
    (first, *_) = [e for e in by_engine["vllm"].events if e.code == "unknown_name"]
    assert first.params["candidate"].startswith("model.model.")


def test_a_speculators_midlayer_name_is_read_by_vllm_and_left_random_by_sglang(tmp_path) -> None:
    folder = drafter(tmp_path / "d", rename=lambda name: name.replace("layers.0.", "midlayer.", 1))
    by_engine = engines(folder, QWEN3_BASE)
    assert by_engine["vllm"].outcome == "loads"
    assert by_engine["sglang"].outcome == "degraded"
    assert dict(by_engine["sglang"].parameters)["layers.0.self_attn.qkv_proj.weight"] == "random"


def test_a_mask_hidden_weight_is_refused_by_vllm_only(tmp_path) -> None:
    folder = drafter(tmp_path / "d", add=[("mask_hidden", "BF16", [1, 16])])
    by_engine = engines(folder, QWEN3_BASE)
    assert codes(by_engine["vllm"]) == ["mask_hidden_refused"]
    assert by_engine["sglang"].outcome == "loads"


def test_eagle_aux_ids_change_vllms_fc_width_and_not_sglangs(tmp_path) -> None:
    # vLLM reads eagle_aux_hidden_state_layer_ids before dflash_config.target_layer_ids (eagle3_utils.py), SGLang
    # only the DFlash keys: three ids make vLLM's fc 3 x hidden wide, and the stored 5 x hidden fc does not fit.
    folder = drafter(tmp_path / "d", config={"eagle_aux_hidden_state_layer_ids": [2, 18, 34]})
    by_engine = engines(folder, QWEN3_BASE)
    assert codes(by_engine["vllm"]) == ["fc_width_mismatch"]
    assert by_engine["sglang"].outcome == "loads"


def test_a_missing_drafter_layer_stays_random_in_both_and_is_named_against_the_config(tmp_path, run_cli) -> None:
    folder = drafter(tmp_path / "d", drop=tuple(n for n, _, _ in drafter_tensors(DRAFTER) if n.startswith("layers.4.")))
    for result in engines(folder, QWEN3_BASE).values():
        assert result.outcome == "degraded" and set(codes(result)) == {"random_init"}
    report = json.loads(run_cli(str(PUBLISHED), str(folder), "--format", "json").stdout)
    (finding,) = [f for f in report["findings"] if f["code"] == "dflash_layers_mismatch"]
    assert finding["params"]["missing"] == [4] and "layers [4] are missing" in finding["message"]


def test_a_drafter_trained_on_other_target_layers_is_not_a_drop_in(tmp_path, run_cli) -> None:
    other = drafter(
        tmp_path / "d",
        config={"dflash_config": {"mask_token_id": 151669, "target_layer_ids": [2, 12, 22, 32]}},
        drop=("fc.weight",),
        add=[("fc.weight", "BF16", [16, 64])],
    )
    done = run_cli(str(PUBLISHED), str(other), "--format", "json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    (differs,) = [f for f in report["findings"] if f["code"] == "dflash_setting_differs"]
    assert differs["params"]["a"] == [1, 9, 17, 25, 33] and differs["params"]["b"] == [2, 12, 22, 32]
    assert {row["name"]: row["status"] for row in report["tensors"]}["fc.weight"] == "shape_mismatch"


def test_an_fc_the_config_does_not_describe_is_named_and_refused_by_both(tmp_path, run_cli) -> None:
    folder = drafter(tmp_path / "d", drop=("fc.weight",), add=[("fc.weight", "BF16", [16, 64])])
    for result in engines(folder, QWEN3_BASE).values():
        assert codes(result) == ["fc_width_mismatch"]
    report = json.loads(run_cli(str(folder), str(folder), "--format", "json").stdout)
    found = [f for f in report["findings"] if f["code"] == "dflash_fc_width_mismatch"]
    assert [f["params"]["side"] for f in found] == ["A", "B"] and found[0]["params"]["want"] == [16, 80]


def test_against_the_base_the_profile_names_what_does_not_fit(tmp_path, run_cli) -> None:
    # Compared as a pair, --base reads the embedding and head the engines take: a base with its shard (sparse).
    base = tmp_path / "llama"
    config = json.loads((LLAMA_BASE / "config.json").read_text())
    write_config(base, config)
    shape = [config["vocab_size"], config["hidden_size"]]
    write_safetensors(
        base / "model.safetensors", [("lm_head.weight", "BF16", shape), ("model.embed_tokens.weight", "BF16", shape)]
    )
    done = run_cli(str(PUBLISHED), str(PUBLISHED), "--base", str(base), "--format", "json")
    report = json.loads(done.stdout)
    found = {f["code"] for f in report["findings"] if f["params"].get("side") == "A"}
    assert {"dflash_target_layer_out_of_range", "dflash_mask_token_out_of_vocab"} <= found
    assert done.returncode == 1


@pytest.mark.parametrize(
    ("config", "engine", "code"),
    [
        ({"architectures": ["DFlash2DraftModel"]}, "vllm", "dflash_not_supported"),
        ({"num_hidden_layers": None}, "sglang", "layers_required"),
        ({"dflash_config": {"mask_token_id": 151669, "target_layer_ids": 9}}, "sglang", "target_layer_ids_malformed"),
        # parse_dflash_draft_config reads a present [] as given and raises "must be non-empty"; only null is unset
        ({"dflash_config": {"mask_token_id": 151669, "target_layer_ids": []}}, "sglang", "target_layer_ids_malformed"),
        (
            {"dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 40]}},
            "sglang",
            "target_layer_out_of_range",
        ),
    ],
)
def test_config_refusals(tmp_path, config, engine, code) -> None:
    folder = drafter(tmp_path / "d", config=config)
    result = engines(folder, QWEN3_BASE)[engine]
    assert result.outcome == "fails" and codes(result)[0] == code
    assert all(event.source for event in result.events)


def test_string_target_layer_ids_pass_sglang_and_stop_vllm(tmp_path) -> None:
    # SGLang int()s each id as it parses the config; vLLM adds 1 to each as it sizes fc and raises TypeError
    ids = ["1", "9", "17", "25", "33"]
    folder = drafter(tmp_path / "d", config={"dflash_config": {"mask_token_id": 151669, "target_layer_ids": ids}})
    found = engines(folder, QWEN3_BASE)
    assert found["sglang"].outcome == "loads"
    assert found["vllm"].outcome == "fails" and codes(found["vllm"])[0] == "target_layer_ids_malformed"
    word = drafter(tmp_path / "w", config={"dflash_config": {"mask_token_id": 151669, "target_layer_ids": ["one"]}})
    assert codes(engines(word, QWEN3_BASE)["sglang"])[0] == "target_layer_ids_malformed"


@pytest.mark.parametrize("odd", ["\u00b3", "1" + "0" * 5000], ids=["superscript", "past-int-digit-limit"])
def test_string_ids_int_refuses_are_malformed_to_both_engines_not_a_crash(tmp_path, odd) -> None:
    # "³" passes str.isdigit() and int() refuses it; 5,001 digits pass it too and int() refuses them past its limit
    config = {"dflash_config": {"mask_token_id": 151669, "target_layer_ids": [odd, "9"]}}
    report = compare_specs(str(drafter(tmp_path / "a")), str(drafter(tmp_path / "b", config=config)), engines=("all",))
    outcomes = {(result.engine, result.side): result.outcome for result in report.engines}
    assert outcomes == {(e, "A"): "loads" for e in ("sglang", "vllm")} | {(e, "B"): "fails" for e in ("sglang", "vllm")}
    b_codes = {codes(result)[0] for result in report.engines if result.side == "B"}
    assert b_codes == {"target_layer_ids_malformed"}


NEMOTRON_35 = {
    "has_embed_tokens": True,
    "has_lm_head": False,
    "quantization_config": {"quant_algo": "W4A16_NVFP4"},
    "eagle_aux_hidden_state_layer_ids": [2, 10, 18, 26, 34],
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33], "sample_from_anchor": False},
}


def test_a_nemotron_3_5_draft_with_top_level_sinks_needs_sglangs_trtllm_mha_backend(tmp_path) -> None:
    folder = drafter(tmp_path / "d", config={**NEMOTRON_35, "attention_sink_bias": True})
    result = engines(folder, QWEN3_BASE)["sglang"]
    assert result.outcome == "fails" and codes(result)[0] == "sink_backend_required"
    assert "trtllm_mha" in event_message(result.events[0])


def test_a_nemotron_3_5_draft_keeps_its_own_embedding_under_sglang(tmp_path) -> None:
    result = engines(drafter(tmp_path / "d", config=NEMOTRON_35), QWEN3_BASE)["sglang"]
    fates = dict(result.parameters)
    assert fates["embed_tokens.weight"] == "random" and fates["lm_head.weight"] == "from_target"
    assert "mask_embedding" not in fates


MASK = {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"block_size": 0}, "block_size is 0: SGLang's parse_dflash_draft_config takes a whole number of 1 or more"),
        ({"num_target_layers": 0}, "num_target_layers is 0"),
        ({"num_hidden_layers": 0}, "num_hidden_layers is 0"),
        ({"dflash_config": {**MASK, "block_size": 0}}, "dflash_config.block_size is 0"),
        (
            {"dflash_config": {**MASK, "conv_kernel_size": 3}},
            "dflash_config.conv_kernel_size is 3 and dflash_config.conv_group_size is unset (0): SGLang's "
            "parse_dflash_draft_config takes both set (non-zero) or neither",
        ),
        ({"dflash_config": {**MASK, "selector_top_k": 8}}, "dflash_config.selector_rank is unset (0)"),
        ({"dflash_config": {**MASK, "output_multiplier": 0}}, "dflash_config.output_multiplier is 0"),
        ({"dflash_config": {**MASK, "output_multiplier": None}}, "null raises TypeError"),
        ({"dflash_config": {**MASK, "final_logit_softcapping": "high"}}, 'final_logit_softcapping is "high"'),
        ({"dflash_config": {**MASK, "mask_token": ""}}, 'dflash_config.mask_token is ""'),
        ({"mask_token": 7}, "mask_token is 7: SGLang's parse_dflash_draft_config takes a non-empty string"),
        ({"dflash_config": {**MASK, "mask_token_id": -1}}, "an integer of 0 or more"),
        ({"dflash_config": {**MASK, "attention_sink_bias": None}}, "attention_sink_bias is null"),
        ({"dflash_config": {**MASK, "attention_value_scale": "0.5"}}, 'attention_value_scale is "0.5"'),
    ],
)
def test_config_settings_sglang_refuses_at_start_up_and_vllm_reads_unchecked(tmp_path, config, says) -> None:
    folder = drafter(tmp_path / "d", config=config)
    found = engines(folder, QWEN3_BASE)
    sglang = found["sglang"]
    assert sglang.outcome == "fails" and codes(sglang) == ["dflash_config_refused"]
    message = event_message(sglang.events[0])
    assert says in message and "refuses the drafter's config at start-up" in message
    assert "dflash_utils.py:" in message
    assert "dflash_config_refused" not in codes(found["vllm"])


@pytest.mark.parametrize(
    "config",
    [
        # int() takes "0": both selector settings are unset, whatever the string's truth
        {"dflash_config": {**MASK, "selector_rank": "0"}},
        {"dflash_config": {**MASK, "conv_kernel_size": 3, "conv_group_size": 2, "output_multiplier": 0.5}},
        {"dflash_config": {**MASK, "mask_token": None, "attention_sink_bias": True, "attention_value_scale": 2}},
    ],
)
def test_config_settings_sglang_takes(tmp_path, config) -> None:
    folder = drafter(tmp_path / "d", config=config)
    assert "dflash_config_refused" not in codes(engines(folder, QWEN3_BASE)["sglang"])


@pytest.mark.parametrize(
    ("setting", "first"),
    [({"output_multiplier": 0}, "dflash_config_refused"), ({"mask_token": ""}, "target_layer_ids_malformed")],
)
def test_sglang_refuses_the_first_bad_setting_in_its_parse_order(tmp_path, setting, first) -> None:
    # parse_dflash_draft_config reads output_multiplier before the target layer ids, mask_token after them
    config = {"dflash_config": {"mask_token_id": 151669, "target_layer_ids": [], **setting}}
    assert codes(engines(drafter(tmp_path / "d", config=config), QWEN3_BASE)["sglang"]) == [first]


def test_a_null_in_dflash_config_hides_the_top_level_ids_from_sglang_only(tmp_path) -> None:
    # parse_dflash_draft_config reads dflash_cfg.get("target_layer_ids", <top level>): a present null is its value,
    # so SGLang builds its default ids (1, 9, 17, 25, 33 for 5 layers of a 36-layer target); vLLM reads on
    config = {
        "target_layer_ids": [1, 9, 17, 25, 40],
        "dflash_config": {"mask_token_id": 151669, "target_layer_ids": None},
    }
    found = engines(drafter(tmp_path / "d", config=config), QWEN3_BASE)
    assert found["sglang"].outcome == "loads"
    assert found["vllm"].outcome == "fails" and "target_layer_not_captured" in codes(found["vllm"])


def test_every_dflash_event_and_finding_is_worded(tmp_path) -> None:
    from ckptdiff.families.dflash import engine_messages, messages

    folder = drafter(tmp_path / "d", add=[("mask_hidden", "BF16", [1, 16]), ("bogus", "BF16", [2])])
    for result in engines(folder, LLAMA_BASE).values():
        for event in result.events:
            assert event.wording in engine_messages.EVENTS, event.wording
            assert "{" not in event_message(event)
    from ckptdiff.report import Finding

    finding = Finding(
        "error", "dflash_hidden_mismatch", subject="hidden_size", params={"side": "A", "hidden": 8, "target_hidden": 16}
    )
    assert "dflash_hidden_mismatch" in messages.FINDINGS and "16 wide" in messages.FINDINGS[finding.code](
        finding.params
    )


def test_a_drafter_attention_other_than_the_targets_runs_in_both_and_is_said(tmp_path, run_cli) -> None:
    # KV-cache spec unification (#27): neither engine checks the drafter's head_dim / KV heads against the target's
    config = {**DRAFTER, "num_key_value_heads": 2}
    folder = tmp_path / "kv2"
    write_config(folder, config)
    kv = [(n, d, [2 * 8, shape[1]] if n.endswith(("k_proj.weight", "v_proj.weight")) else shape)
          for n, d, shape in drafter_tensors(config)]  # fmt: skip
    write_safetensors(folder / "model.safetensors", kv)
    done = run_cli(str(folder), "--engine", "vllm", "--engine", "sglang", "--base", str(QWEN3_BASE), "-v")
    assert done.returncode == 0, done.stdout
    assert "vllm A: loads" in done.stdout and "sglang A: loads" in done.stdout
    assert "(head_dim 8, 2 KV heads) is not the target's (head_dim 8, 1 KV heads): vLLM runs it" in done.stdout
    assert "kv_cache_planning.py:1143" in done.stdout and "dflash_utils.py:121" in done.stdout
    report = json.loads(
        run_cli(str(folder), "--engine", "sglang", "--base", str(QWEN3_BASE), "--format", "json").stdout
    )
    (event,) = [e for e in report["engines"][0]["events"] if e["code"] == "draft_kv_cache"]
    assert event["severity"] == "info"
    # 2 KV heads x (k + v) x head_dim 8 x 5 layers x 2 bytes (bfloat16)
    assert event["params"]["bytes_per_token"] == 2 * 2 * 8 * 5 * 2
    assert "a KV pool of its own" in event["message"]


def test_an_mla_target_is_named_and_the_same_attention_says_nothing(tmp_path) -> None:
    mla = tmp_path / "mla-base"
    shutil.copytree(QWEN3_BASE, mla)
    target = json.loads((mla / "config.json").read_text())
    (mla / "config.json").write_text(json.dumps({**target, "kv_lora_rank": 32, "qk_rope_head_dim": 8}))
    said = engines(PUBLISHED, mla)
    for result in said.values():
        (event,) = [e for e in result.events if e.code == "draft_kv_cache"]
        assert event.params["target_mla"] and event.params["target_head_dim"] == 40
        assert "MLA, one 40-wide latent per token" in event_message(event)
    same = engines(PUBLISHED, QWEN3_BASE)
    assert not [e for result in same.values() for e in result.events if e.code == "draft_kv_cache"]


# use_aux_hidden_state false under vLLM: the drafter builds no fc (qwen3_dflash.py:476) and hands the captured states
# on as they are (:833), while both model runners capture for DFlash regardless (V2 eagle3_utils.py:22, V1
# gpu_model_runner.py:647). So the captured states must themselves be the drafter's hidden size wide: one state.
# SGLang never reads the flag (spec_aux_hidden_state.py:279 captures, dflash.py:764 builds fc). Observed by the
# oracle's DFlash cases dflash_use_aux_*.
ONE_ID = {"dflash_config": {"mask_token_id": 151669, "target_layer_ids": [17], "use_aux_hidden_state": False}}


@pytest.mark.parametrize("flag", [False, None, 0])
def test_use_aux_false_under_vllm_hands_five_captured_states_to_a_drafter_without_fc(tmp_path, run_cli, flag) -> None:
    section = {**DRAFTER["dflash_config"], "use_aux_hidden_state": flag}
    folder = tmp_path / "d"
    write_config(folder, {**DRAFTER, "dflash_config": section})  # null kept: vLLM tests the flag's truth
    write_safetensors(folder / "model.safetensors", drafter_tensors(DRAFTER))
    by_engine = engines(folder, QWEN3_BASE)
    vllm = by_engine["vllm"]
    assert vllm.outcome == "fails" and codes(vllm) == ["aux_states_unprojected", "fc_unused"]
    (failed,) = [event for event in vllm.events if event.code == "aux_states_unprojected"]
    assert (failed.params["captured"], failed.params["width"], failed.params["hidden"]) == (5, 80, 16)
    assert failed.params["outputs"] == [1, 9, 17, 25, 33]
    assert "eagle3_utils.py:22" in failed.source and "qwen3_dflash.py:833" in failed.source
    assert "dflash/speculator.py:417" in failed.source
    assert ("fc.weight", "skipped", None) in vllm.tensors
    assert "model.fc.weight" not in dict(vllm.parameters)
    assert by_engine["sglang"].outcome == "loads"  # builds and loads fc whatever the flag says

    done = run_cli(str(folder), "--engine", "vllm", "--base", str(QWEN3_BASE), "-v")
    assert done.returncode == 1
    assert "vllm A: fails — no fc, 5 captured target states (80 wide) for hidden_size 16" in done.stdout
    assert "start-up's profiling run, raises RuntimeError" in done.stdout
    v1 = run_cli(str(folder), "--engine", "vllm", "--vllm-runner", "v1", "--base", str(QWEN3_BASE), "-v")
    assert v1.returncode == 1 and "the first draft raises AssertionError" in v1.stdout
    assert "llm_base_proposer.py:552" in v1.stdout


def test_use_aux_false_with_one_id_runs_on_that_state_and_drops_a_shipped_fc(tmp_path, run_cli) -> None:
    shipped = drafter(tmp_path / "fc", config=ONE_ID)  # fc still stored five states wide
    vllm = engines(shipped, QWEN3_BASE)["vllm"]
    assert vllm.outcome == "degraded" and codes(vllm) == ["fc_unused"]
    (as_is,) = [event for event in vllm.events if event.code == "aux_state_as_is"]
    assert as_is.params["outputs"] == [17] and "reaches the drafter as it is" in event_message(as_is)
    bare = drafter(tmp_path / "bare", config=ONE_ID, drop=("fc.weight",))
    done = run_cli(str(bare), "--engine", "vllm", "--engine", "sglang", "--base", str(QWEN3_BASE))
    # vLLM needs no fc here; SGLang builds one regardless and leaves it random.
    assert "vllm A: loads" in done.stdout and "sglang A: degraded — 1 weight random (fc.weight)" in done.stdout


def test_use_aux_false_in_an_eagle_config_section_is_read_by_vllm_and_without_a_base_too(tmp_path) -> None:
    folder = drafter(tmp_path / "d", config={"eagle_config": {"use_aux_hidden_state": False}})
    assert codes(engines(folder, QWEN3_BASE)["vllm"]) == ["aux_states_unprojected", "fc_unused"]
    # No base: five ids capture five states, which no target of the drafter's width makes 16 wide.
    alone = engines(folder)["vllm"]
    (failed,) = [event for event in alone.events if event.code == "aux_states_unprojected"]
    assert failed.params["assumed"] and failed.params["width"] == 80
    # dflash_config's value wins over eagle_config's (vLLM overlays one with the other).
    both = {"eagle_config": {"use_aux_hidden_state": False}, "dflash_config": {**DRAFTER["dflash_config"],
            "use_aux_hidden_state": True}}  # fmt: skip
    assert engines(drafter(tmp_path / "both", config=both), QWEN3_BASE)["vllm"].outcome == "loads"
