"""Published drafter layouts (fixtures/drafters/, scaled down from their configs and tensor names) each pinned to
what the engines do with them, and the layouts where an engine breaks or degrades, which must not pass as loads."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ckptdiff.formats.messages import engine_summary, event_message
from ckptdiff.pipeline import compare_specs
from fixtures.generate import write_config, write_safetensors
from fixtures.published_drafters import (
    DRAFTERS,
    HIDDEN,
    MLA,
    MODELOPT,
    NVFP4,
    ROOT,
    SPECFORGE_QWEN3,
    head,
    linear,
    llama_layer,
    mla_layer,
    write_all,
)

BASES = ROOT / "bases"

#: drafter → (the base it serves, outcome under sglang, vllm, trtllm).
PINNED: dict[str, tuple[str, str, str, str]] = {
    "yuhuili-eagle3-llama3.1-8b": ("llama3.1-8b", "loads", "loads", "loads"),
    "specforge-qwen3-8b": ("qwen3-8b", "loads", "loads", "loads"),
    "specforge-kimi-k2": ("kimi-k2", "loads", "loads", "loads"),
    # SGLang and TensorRT-LLM do not read the speculators format (architectures: Eagle3Speculator)
    "redhat-speculators-llama3.1-8b": ("llama3.1-8b", "fails", "loads", "fails"),
    "modelopt-llama3.1-8b": ("llama3.1-8b", "loads", "loads", "loads"),
    "modelopt-llama3.1-8b-speculators": ("llama3.1-8b", "fails", "loads", "fails"),
    # layers.{i} names: TensorRT-LLM asks for midlayer.{i} (inferred)
    "multi-layer-qwen3-8b": ("qwen3-8b", "loads", "loads", "fails"),
    # TensorRT-LLM registers no EAGLE3DeepseekV2ForCausalLM (TRT-LLM PR#15426)
    "mla-kimi-k25": ("kimi-k2", "loads", "loads", "fails"),
    # rebuilt from lightseekorg's cards (issue #27), against the Kimi-K2.5 wrapper (text model in text_config)
    "kimi-k2.5-eagle3-mla": ("kimi-k25", "loads", "loads", "fails"),
    "kimi-k2.6-eagle3.1-mla": ("kimi-k25", "loads", "loads", "fails"),
    "multi-layer-3-qwen3-8b": ("qwen3-8b", "loads", "loads", "fails"),
    # SGLang builds the drafter from its quantization_config (the target's --quantization is the default, and a
    # draft checkpoint naming another method takes its own), its fc a plain nn.Linear: both load.
    # ignored_layers ["lm_head", "fc"]: vLLM's fp8 method matches full names (model.fc), so fc is quantized and its
    # weight_scale never written (the oracle's gen_ignored_layers_suffixes shows it)
    "fp8-qwen3-8b": ("qwen3-8b", "loads", "degraded", "loads"),
    "modelopt-nvfp4-llama3.1-8b": ("llama3.1-8b", "loads", "loads", "loads"),
}


def outcomes(spec: str | Path, base: str | Path | None = None, engines: tuple[str, ...] = ("all",)) -> dict[str, Any]:
    report = compare_specs(str(spec), None, engines=engines, base=str(base) if base else None)
    return {result.engine: result for result in report.engines}


def drafter(folder: Path, config: dict[str, Any], tensors: list[Any]) -> Path:
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", sorted(tensors), fill="zeros")
    return folder


def test_the_bundled_fixtures_are_what_the_generator_writes(tmp_path):
    write_all(tmp_path)
    for name in [*DRAFTERS, "bases/kimi-k2", "bases/kimi-k25"]:
        for file in ("config.json", "model.safetensors"):
            assert (tmp_path / name / file).read_bytes() == (ROOT / name / file).read_bytes(), f"{name}/{file}"


def test_the_fixtures_stay_small():
    assert sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file()) < 425_000


@pytest.mark.parametrize("name", list(PINNED))
def test_each_published_layout_gives_the_engines_outcome(name):
    base, *expected = PINNED[name]
    results = outcomes(ROOT / name, BASES / base)
    got = [results[engine].outcome for engine in ("sglang", "vllm", "trtllm")]
    assert got == expected, {e: (r.outcome, engine_summary(r)) for e, r in results.items()}
    for engine, outcome in zip(("sglang", "vllm", "trtllm"), expected):
        if outcome == "loads":  # every tensor reaches a parameter, none is left random or raised on
            assert {fate for _, fate, _ in results[engine].tensors} <= {"loaded", "renamed", "skipped"}
            assert "random" not in {fate for _, fate in results[engine].parameters}


def test_a_drafter_without_aux_ids_is_information_not_damage(run_cli):
    """The yuhuili and speculators configs name no aux ids: trained on the engine's default capture."""
    done = run_cli(str(ROOT / "yuhuili-eagle3-llama3.1-8b"), "--engine", "vllm", "--format", "json")
    document = json.loads(done.stdout)
    vllm = document["engines"][0]
    assert vllm["outcome"] == "loads" and done.returncode == 0
    default = next(e for e in vllm["events"] if e["code"] == "aux_ids_default")
    assert default["severity"] == "info" and "eagle3_utils.py" in default["message"]


# --- where an engine breaks or degrades: never "loads" -------------------------------------------------------


def test_a_second_layer_the_checkpoint_does_not_store(tmp_path):
    """num_hidden_layers: 2, one stored layer: random under vLLM and SGLang, a KeyError in TensorRT-LLM."""
    config = SPECFORGE_QWEN3 | {"num_hidden_layers": 2}
    results = outcomes(drafter(tmp_path / "d", config, llama_layer("midlayer.", first=True) + head()))
    assert results["vllm"].outcome == results["sglang"].outcome == "degraded"
    assert dict(results["vllm"].parameters)["model.layers.1.self_attn.qkv_proj.weight[q]"] == "random"
    assert dict(results["sglang"].parameters)["model.layers.1.mlp.down_proj.weight"] == "random"
    assert results["trtllm"].outcome == "fails"


def test_two_aux_ids_against_an_fc_three_hidden_states_wide(tmp_path):
    config = copy.deepcopy(SPECFORGE_QWEN3) | {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 18]}}
    results = outcomes(drafter(tmp_path / "d", config, llama_layer("midlayer.", first=True) + head()))
    for engine in ("sglang", "vllm"):
        assert results[engine].outcome == "fails"
        event = next(e for e in results[engine].events if e.code in ("shape_mismatch", "aux_count_mismatch"))
        assert "fc" in event_message(event)


def test_aux_ids_vllm_captures_but_fc_is_not_sized_for(tmp_path):
    """vLLM sizes fc from eagle_config's ids (else 3) but captures the top-level ones: two ids, fc for three."""
    config = SPECFORGE_QWEN3 | {"eagle_aux_hidden_state_layer_ids": [2, 18]}
    vllm = outcomes(drafter(tmp_path / "d", config, llama_layer("midlayer.", first=True) + head()), engines=("vllm",))
    event = next(e for e in vllm["vllm"].events if e.code == "aux_count_mismatch")
    assert vllm["vllm"].outcome == "fails" and event_message(event).startswith("2 target hidden states are captured")


@pytest.mark.parametrize(("engine", "ids"), [("sglang", [2, 18, 35]), ("vllm", [2, 18, 37])])
def test_aux_ids_past_the_bases_last_layer_are_never_captured(tmp_path, engine, ids):
    """36 layers: SGLang captures before layer id+1, so id 35 never comes; vLLM before layer id, up to id 36."""
    key = {"sglang": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}, "vllm": {}}[engine]
    config = SPECFORGE_QWEN3 | key | ({"eagle_aux_hidden_state_layer_ids": ids} if engine == "vllm" else {})
    spec = drafter(tmp_path / "d", config, llama_layer("midlayer.", first=True) + head())
    result = outcomes(spec, BASES / "qwen3-8b", (engine,))[engine]
    event = next(e for e in result.events if e.code == "aux_id_out_of_range")
    assert result.outcome == "fails" and f"[{ids[-1]}]" in event_message(event)


def test_d2t_stored_as_bf16(tmp_path):
    tensors = [(n, "BF16" if n == "d2t" else d, s) for n, d, s in llama_layer("midlayer.", first=True) + head()]
    results = outcomes(drafter(tmp_path / "d", SPECFORGE_QWEN3, tensors), engines=("vllm", "sglang"))
    assert results["vllm"].outcome == "degraded" and "rounded" in event_message(results["vllm"].events[0])
    assert results["sglang"].outcome == "degraded" and results["sglang"].events[0].code == "d2t_dtype"


def test_d2t_of_another_length_under_sglang(tmp_path):
    for length, sglang_outcome in ((16, "fails"), (64, "degraded")):  # the head has 32 rows
        tensors = [(n, d, [length] if n == "d2t" else s) for n, d, s in llama_layer("midlayer.", first=True) + head()]
        spec = drafter(tmp_path / str(length), SPECFORGE_QWEN3, tensors)
        results = outcomes(spec, engines=("vllm", "sglang"))
        assert results["sglang"].outcome == sglang_outcome and results["sglang"].events[0].code == "d2t_length"
        assert results["vllm"].outcome == "fails" and results["vllm"].events[0].code == "shape_mismatch"


def test_a_d2t_with_one_vocabulary_is_consumed_by_sglang_and_refused_by_vllm(tmp_path):
    """vLLM builds draft_id_to_target_id only when the vocabularies differ; SGLang always consumes d2t."""
    config = SPECFORGE_QWEN3 | {"draft_vocab_size": 128}
    tensors = [(n, d, [128, HIDDEN] if n == "lm_head.weight" else [128] if n == "d2t" else s)
               for n, d, s in llama_layer("midlayer.", first=True) + head()]  # fmt: skip
    results = outcomes(drafter(tmp_path / "d", config, tensors), engines=("vllm", "sglang"))
    assert results["sglang"].outcome == "loads"
    assert dict((n, (f, p)) for n, f, p in results["sglang"].tensors)["d2t"] == ("renamed", "hot_token_id")
    assert results["vllm"].outcome == "fails"
    assert "no module or parameter named 'draft_id_to_target_id'" in event_message(results["vllm"].events[0])


def test_an_own_embedding_narrower_than_the_target_replaced_by_sglang(tmp_path):
    """The drafter is 16 wide with its own embedding; the 32-wide target's replaces it under SGLang."""
    base = tmp_path / "base"
    write_config(base, {"model_type": "qwen3", "hidden_size": 32, "num_hidden_layers": 36, "vocab_size": 128})
    write_safetensors(base / "model.safetensors", [("model.embed_tokens.weight", "BF16", [128, 32])])
    spec = drafter(tmp_path / "d", SPECFORGE_QWEN3, llama_layer("midlayer.", first=True) + head(embed=True))
    sglang = outcomes(spec, base, ("sglang",))["sglang"]
    assert sglang.outcome == "fails" and "embed_width_mismatch" in {e.code for e in sglang.events}


def test_an_mla_labelled_drafter_carrying_llama_attention(tmp_path):
    tensors = [t for t in llama_layer("layers.0.", first=True) + head()]
    results = outcomes(drafter(tmp_path / "d", MLA, tensors), BASES / "kimi-k2", ("vllm", "sglang"))
    assert results["vllm"].outcome == "fails"  # q_proj/k_proj/v_proj: no such parameter
    sglang = results["sglang"]
    assert sglang.outcome == "degraded"  # skipped silently, the MLA projections stay random
    assert dict(sglang.parameters)["model.midlayer.self_attn.kv_b_proj.weight"] == "random"


def test_an_fp8_drafter_without_quantization_config(tmp_path):
    config = {k: v for k, v in json.loads((ROOT / "fp8-qwen3-8b/config.json").read_text()).items()}
    del config["quantization_config"]
    tensors = [(n, d, s) for n, (d, s) in _header(ROOT / "fp8-qwen3-8b").items()]
    results = outcomes(drafter(tmp_path / "d", config, tensors), BASES / "qwen3-8b", ("vllm", "sglang"))
    assert results["vllm"].outcome == "fails"  # weight_scale: no such parameter
    assert results["sglang"].outcome == "degraded"  # scales skipped silently; quantized values cast unscaled
    skipped = {e.tensor for e in results["sglang"].events if e.code == "skipped_unknown_name"}
    assert "midlayer.self_attn.q_proj.weight_scale" in skipped


def test_an_nvfp4_drafter_whose_ignore_list_misses_the_first_layers_attention(tmp_path):
    """vllm PR#48068: first-layer q/k/v stored unquantized (2 x hidden wide), but not in the ignore list."""
    config = copy.deepcopy(NVFP4)
    config["quantization_config"]["exclude_modules"] = ["lm_head", "fc"]
    tensors = llama_layer("midlayer.", first=True, quantized={"mlp.gate_proj": "nvfp4"}) + head(t2d=False)
    results = outcomes(drafter(tmp_path / "d", config, tensors), BASES / "llama3.1-8b", ("vllm",))
    vllm = results["vllm"]
    wrong = next(e for e in vllm.events if e.tensor == "midlayer.self_attn.q_proj.weight")
    assert vllm.outcome == "fails" and wrong.code == "shape_mismatch" and "[16, 16]" in event_message(wrong)


# --- supported layouts: no false alarm ----------------------------------------------------------------------


def test_a_trtllm_multi_layer_drafter_names_its_layers_midlayer_i(tmp_path):
    config = SPECFORGE_QWEN3 | {"num_hidden_layers": 2}
    tensors = llama_layer("midlayer.0.", first=True) + llama_layer("midlayer.1.", first=False) + head()
    trtllm = outcomes(drafter(tmp_path / "d", config, tensors), BASES / "qwen3-8b", ("trtllm",))["trtllm"]
    assert trtllm.outcome == "loads"


def test_fc_bias_under_bias_true(tmp_path):
    """SGLang and TensorRT-LLM build fc with bias=config.bias; vLLM builds it without and drops the bias."""
    config = SPECFORGE_QWEN3 | {"bias": True}
    tensors = llama_layer("midlayer.", first=True) + head() + [("fc.bias", "BF16", [HIDDEN])]
    results = outcomes(drafter(tmp_path / "d", config, tensors), BASES / "qwen3-8b")
    assert results["trtllm"].outcome == "loads"  # (inferred)
    assert results["vllm"].outcome == "degraded"
    assert [e.tensor for e in results["vllm"].events if e.code == "bias_ignored"] == ["fc.bias"]
    # SGLang's LlamaDecoderLayer gives o_proj a bias under bias: true as well
    assert dict(results["sglang"].parameters)["model.layers.0.self_attn.o_proj.bias"] == "random"
    tensors += [("midlayer.self_attn.o_proj.bias", "BF16", [HIDDEN])]
    sglang = outcomes(drafter(tmp_path / "o", config, tensors), BASES / "qwen3-8b", ("sglang",))["sglang"]
    assert sglang.outcome == "loads" and dict(sglang.parameters)["model.fc.bias"] == "loaded"


def test_an_mla_drafter_with_fc_norm_loads_and_without_it_is_refused_by_vllm(tmp_path):
    published = outcomes(ROOT / "mla-kimi-k25", BASES / "kimi-k2", ("sglang", "vllm"))
    assert {engine: result.outcome for engine, result in published.items()} == {"sglang": "loads", "vllm": "loads"}
    config = MLA | {"fc_norm": False}
    tensors = mla_layer("layers.0.") + head() + [(f"fc_norm.{i}.weight", "BF16", [HIDDEN]) for i in range(3)]
    results = outcomes(drafter(tmp_path / "d", config, tensors), BASES / "kimi-k2", ("sglang", "vllm"))
    assert results["vllm"].outcome == "fails" and results["sglang"].outcome == "degraded"


def test_modelopt_layout_and_scales_reach_parameters():
    vllm = outcomes(ROOT / "modelopt-nvfp4-llama3.1-8b", BASES / "llama3.1-8b", ("vllm",))["vllm"]
    fates = {name: (fate, param) for name, fate, param in vllm.tensors}
    assert fates["midlayer.mlp.down_proj.weight_scale_2"] == ("renamed", "model.layers.0.mlp.down_proj.weight_scale_2")
    assert fates["midlayer.mlp.up_proj.weight_scale"] == ("renamed", "model.layers.0.mlp.gate_up_proj.weight_scale")
    assert dict(vllm.parameters)["model.layers.0.mlp.gate_up_proj.weight_scale"] == "loaded"
    assert fates["midlayer.mlp.gate_proj.weight"] == ("renamed", "model.layers.0.mlp.gate_up_proj.weight[0]")
    assert MODELOPT["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 15, 28]
    assert linear("x", 4, 32, "BF16", "nvfp4")[0] == ("x.weight", "U8", [4, 16])


def _header(folder: Path) -> dict[str, tuple[str, list[int]]]:
    raw = (folder / "model.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    return {n: (v["dtype"], v["shape"]) for n, v in header.items() if n != "__metadata__"}


# --- what the oracle run showed (tests/oracle, vLLM 0.33.0 and SGLang 0.5.23 on CPU) -------------------------


def test_vllm_turns_a_deepseek_v3_draft_into_an_mtp_model(tmp_path):
    """SpeculativeConfig.hf_config_override: model_type deepseek_v3 → DeepSeekMTPModel, which has no EAGLE-3 class."""
    tensors = mla_layer("layers.0.") + head() + [(f"fc_norm.{i}.weight", "BF16", [HIDDEN]) for i in range(3)]
    spec = drafter(tmp_path / "d", MLA | {"model_type": "deepseek_v3"}, tensors)
    results = outcomes(spec, BASES / "kimi-k2", ("vllm", "sglang"))
    assert results["vllm"].outcome == "fails" and "Eagle3DeepSeekMTPModel" in event_message(results["vllm"].events[0])
    assert results["sglang"].outcome == "loads"


def test_an_absent_q_lora_rank_is_the_config_class_default_and_a_null_one_a_plain_q_proj(tmp_path):
    config = {k: v for k, v in MLA.items() if k != "q_lora_rank"}
    sglang = outcomes(drafter(tmp_path / "a", config, mla_layer("layers.0.") + head()), engines=("sglang",))["sglang"]
    wrong = next(e for e in sglang.events if e.tensor == "layers.0.self_attn.q_a_proj.weight")
    assert sglang.outcome == "fails" and "is [1536, 32]" in event_message(wrong)  # DeepseekV2Config's q_lora_rank
    nulled = outcomes(drafter(tmp_path / "n", MLA | {"q_lora_rank": None}, mla_layer("layers.0.") + head()))
    assert nulled["sglang"].events[0].code == "mla_needs_q_lora_rank"


def test_sglang_needs_the_draft_vocab_size_key(tmp_path):
    config = {k: v for k, v in SPECFORGE_QWEN3.items() if k != "draft_vocab_size"}
    tensors = [
        (n, d, [128, HIDDEN] if n == "lm_head.weight" else s) for n, d, s in llama_layer("midlayer.", first=True)
    ]
    tensors += head(d2t=False)[:2] + [("lm_head.weight", "BF16", [128, HIDDEN])]
    results = outcomes(drafter(tmp_path / "d", config, tensors), engines=("sglang", "vllm"))
    assert results["sglang"].outcome == "fails" and results["sglang"].events[0].code == "draft_vocab_size_absent"
    assert results["vllm"].outcome == "loads"
    results = outcomes(drafter(tmp_path / "n", config | {"draft_vocab_size": None}, tensors), engines=("sglang",))
    assert results["sglang"].outcome == "loads"


def test_a_repeated_aux_id_is_captured_once(tmp_path):
    config = copy.deepcopy(SPECFORGE_QWEN3) | {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 15]}}
    sglang = outcomes(
        drafter(tmp_path / "d", config, llama_layer("midlayer.", first=True) + head()), engines=("sglang",)
    )
    assert sglang["sglang"].outcome == "fails"
    assert event_message(sglang["sglang"].events[0]).startswith("2 target hidden states are captured")


def test_sglang_builds_fc_even_without_aux_hidden_states(tmp_path):
    config = copy.deepcopy(SPECFORGE_QWEN3) | {"eagle_config": {"use_aux_hidden_state": False}}
    tensors = llama_layer("midlayer.", first=True) + head()
    results = outcomes(drafter(tmp_path / "d", config, tensors), engines=("sglang", "vllm"))
    assert results["sglang"].outcome == "loads" and dict(results["sglang"].parameters)["model.fc.weight"] == "loaded"
    assert results["vllm"].outcome == "degraded" and codes_of(results["vllm"]) >= {"fc_unused"}


def codes_of(result: Any) -> set[str]:
    return {event.code for event in result.events}


@pytest.mark.parametrize(("fmt", "bits", "refused"), [("int-quantized", 8, True), ("pack-quantized", 4, False)])
def test_sglang_has_no_scheme_for_int_weights_unless_pack_quantized(tmp_path, fmt, bits, refused):
    """compressed-tensors int weights per channel, no activations: SGLang's WNA16 path, pack-quantized only."""
    config = json.loads((ROOT / "fp8-qwen3-8b/config.json").read_text())
    group = {"targets": ["Linear"], "weights": {"num_bits": bits, "type": "int", "strategy": "channel"}}
    config["quantization_config"] = {"quant_method": "compressed-tensors", "format": fmt, "config_groups": {"g": group}}
    tensors = [(n, d, s) for n, (d, s) in _header(ROOT / "fp8-qwen3-8b").items()]
    results = outcomes(drafter(tmp_path / "d", config, tensors), BASES / "qwen3-8b", ("sglang",))

    codes = {e.code for e in results["sglang"].events}
    assert ("quantization_scheme_unsupported" in codes) is refused
    if refused:
        assert results["sglang"].outcome == "fails"
