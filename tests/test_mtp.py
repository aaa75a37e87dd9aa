"""The MTP family: MTP layers inside a target checkpoint (DeepSeek-V3/GLM ``model.layers.{N+i}``, Qwen3-Next
``mtp.*``) and standalone NextN exports, detected from config.json and replayed under each engine's loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptdiff.families import detect_family
from ckptdiff.formats.messages import engine_summary, event_message, finding_message
from ckptdiff.pipeline import compare_specs
from fixtures.generate import write_config, write_safetensors

HIDDEN, VOCAB, EXPERTS = 16, 64, 4


def deepseek_config(**overrides: Any) -> dict[str, Any]:
    """A DeepSeek-V3-class text config, scaled down (MLA attention, an MoE MLP, one MTP layer after 3 layers)."""
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": HIDDEN,
        "intermediate_size": 32,
        "moe_intermediate_size": 8,
        "num_hidden_layers": 3,
        "num_nextn_predict_layers": 1,
        "num_attention_heads": 2,
        "q_lora_rank": 12,
        "kv_lora_rank": 8,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
        "n_routed_experts": EXPERTS,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "topk_method": "noaux_tc",
        "vocab_size": VOCAB,
        "torch_dtype": "bfloat16",
    }
    config.update(overrides)
    return {key: value for key, value in config.items() if value is not None}


def mtp_layer(layer: int, *, embed: bool = True, head: bool = True) -> list[tuple[str, str, list[int]]]:
    """One DeepSeek-V3 MTP layer as the published checkpoints store it."""
    p = f"model.layers.{layer}."
    out = [
        (p + "enorm.weight", "BF16", [HIDDEN]),
        (p + "hnorm.weight", "BF16", [HIDDEN]),
        (p + "eh_proj.weight", "BF16", [HIDDEN, 2 * HIDDEN]),
        (p + "shared_head.norm.weight", "BF16", [HIDDEN]),
        (p + "input_layernorm.weight", "BF16", [HIDDEN]),
        (p + "post_attention_layernorm.weight", "BF16", [HIDDEN]),
        (p + "self_attn.q_a_proj.weight", "BF16", [12, HIDDEN]),
        (p + "self_attn.q_a_layernorm.weight", "BF16", [12]),
        (p + "self_attn.q_b_proj.weight", "BF16", [2 * 12, 12]),
        (p + "self_attn.kv_a_proj_with_mqa.weight", "BF16", [8 + 4, HIDDEN]),
        (p + "self_attn.kv_a_layernorm.weight", "BF16", [8]),
        (p + "self_attn.kv_b_proj.weight", "BF16", [2 * 16, 8]),
        (p + "self_attn.o_proj.weight", "BF16", [HIDDEN, 16]),
        (p + "mlp.gate.weight", "BF16", [EXPERTS, HIDDEN]),
        (p + "mlp.gate.e_score_correction_bias", "F32", [EXPERTS]),
        *[
            (p + f"mlp.experts.{e}.{w}_proj.weight", "BF16", [8, HIDDEN])
            for e in range(EXPERTS)
            for w in ("gate", "up")
        ],
        *[(p + f"mlp.experts.{e}.down_proj.weight", "BF16", [HIDDEN, 8]) for e in range(EXPERTS)],
        *[(p + f"mlp.shared_experts.{w}_proj.weight", "BF16", [8, HIDDEN]) for w in ("gate", "up")],
        (p + "mlp.shared_experts.down_proj.weight", "BF16", [HIDDEN, 8]),
    ]
    if embed:
        out.append((p + "embed_tokens.weight", "BF16", [VOCAB, HIDDEN]))
    if head:
        out.append((p + "shared_head.head.weight", "BF16", [VOCAB, HIDDEN]))
    return out


def target(folder: Path, *, config: dict[str, Any] | None = None, mtp_layers: tuple[int, ...] = (3,), **kw: Any) -> str:
    """A DeepSeek-V3-class target: its main layers (one tensor each stands for them), and its MTP layers."""
    settings = config or deepseek_config()
    tensors = [("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]), ("lm_head.weight", "BF16", [VOCAB, HIDDEN])]
    tensors += [(f"model.layers.{i}.input_layernorm.weight", "BF16", [HIDDEN]) for i in range(3)]
    tensors += [("model.norm.weight", "BF16", [HIDDEN])]
    for layer in mtp_layers:
        tensors += mtp_layer(layer, **kw)
    write_config(folder, settings)
    write_safetensors(folder / "model.safetensors", tensors)
    return str(folder)


def run(spec: str, *engines: str, b: str | None = None, profile: str = "auto") -> Any:
    return compare_specs(spec, b, engines=engines, profile=profile)


def outcomes(report: Any) -> dict[str, str]:
    return {result.engine: result.outcome for result in report.engines}


def events(report: Any, engine: str) -> dict[str, str]:
    return {e.code: e.severity for r in report.engines if r.engine == engine for e in r.events}


def test_a_target_with_mtp_layers_is_detected_as_the_mtp_family() -> None:
    assert detect_family(deepseek_config()) == "mtp"
    assert detect_family(deepseek_config(num_nextn_predict_layers=0)) is None  # Kimi-K2: none shipped
    assert detect_family({"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"]}) == "mtp"
    eagle3 = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "num_nextn_predict_layers": 1}
    assert detect_family(eagle3) == "eagle3"  # EAGLE-3 is asked first


def test_a_deepseek_v3_target_alone_reports_on_its_mtp_layer_and_loads_under_both_engines(tmp_path) -> None:
    report = run(target(tmp_path / "t"), "vllm", "sglang")

    assert outcomes(report) == {"vllm": "loads", "sglang": "loads"}
    vllm = next(r for r in report.engines if r.engine == "vllm")
    fates = {name: (fate, param) for name, fate, param in vllm.tensors}
    assert fates["model.layers.3.enorm.weight"] == ("loaded", "model.layers.3.enorm.weight")
    assert (
        fates["model.layers.3.self_attn.q_a_proj.weight"][1]
        == "model.layers.3.mtp_block.self_attn.fused_qkv_a_proj.weight[0]"
    )
    assert fates["model.layers.3.mlp.experts.0.up_proj.weight"][1] == (
        "model.layers.3.mtp_block.mlp.experts.routed_experts.w13_weight[0_up]"
    )
    assert fates["model.layers.0.input_layernorm.weight"] == ("skipped", None)  # the target's own layers
    sglang = next(r for r in report.engines if r.engine == "sglang")
    fates = {name: (fate, param) for name, fate, param in sglang.tensors}
    # SGLang skips the layer's copies and takes the target's embedding and head (set_embed_and_head)
    assert fates["model.layers.3.embed_tokens.weight"] == ("skipped", None)
    assert fates["model.layers.3.shared_head.head.weight"] == ("skipped", None)
    assert fates["model.layers.3.enorm.weight"] == ("renamed", "model.enorm.weight")
    assert fates["model.layers.3.self_attn.o_proj.weight"] == ("renamed", "model.decoder.self_attn.o_proj.weight")


def test_an_export_that_dropped_the_mtp_layer_fails_under_vllm_and_is_silently_random_under_sglang(tmp_path) -> None:
    report = run(target(tmp_path / "t", mtp_layers=()), "vllm", "sglang")

    assert outcomes(report) == {"vllm": "fails", "sglang": "degraded"}
    assert events(report, "vllm")["mtp_layer_missing"] == "error"
    assert events(report, "sglang")["mtp_layer_missing"] == "warning"
    message = next(event_message(e) for r in report.engines for e in r.events if e.code == "mtp_layer_missing")
    assert "model.layers.3" in message and "[" in message  # cites its source
    assert "MTP layer 3 not in the checkpoint" in engine_summary(report.engines[0])


def test_the_export_without_its_mtp_layer_is_named_when_compared_with_the_original(tmp_path) -> None:
    original, export = target(tmp_path / "a"), target(tmp_path / "b", mtp_layers=())
    report = run(original, b=export)

    assert report.profile == "mtp" and report.verdict == "incompatible"
    found = next(f for f in report.findings if f.code == "mtp_layers_missing")
    assert found.params["side"] == "B" and found.params["missing"] == [3]
    assert "model.layers.3.*" in finding_message(report, found)


def test_sglang_refuses_two_nextn_layers_and_vllm_needs_both(tmp_path) -> None:
    config = deepseek_config(num_nextn_predict_layers=2)
    both = run(target(tmp_path / "two", config=config, mtp_layers=(3, 4)), "vllm", "sglang")
    assert outcomes(both) == {"vllm": "loads", "sglang": "fails"}
    assert events(both, "sglang") == {"mtp_layer_count_unsupported": "error"}
    one = run(target(tmp_path / "one", config=config, mtp_layers=(3,)), "vllm")
    assert outcomes(one) == {"vllm": "fails"} and "mtp_layer_missing" in events(one, "vllm")


def test_a_standalone_nextn_export_loads_under_sglang_and_not_under_vllm(tmp_path) -> None:
    """SGLang reads layer 0 when num_hidden_layers is 1 (its "old design"); vLLM looks for layer 1."""
    config = deepseek_config(num_hidden_layers=1, architectures=["DeepseekV3ForCausalLMNextN"])
    folder = tmp_path / "nextn"
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", mtp_layer(0))
    report = run(str(folder), "vllm", "sglang")

    assert outcomes(report) == {"vllm": "fails", "sglang": "loads"}
    assert "mtp_layer_missing" in events(report, "vllm")


def test_a_missing_mtp_tensor_fails_vllms_strict_check_unless_the_target_is_quantized(tmp_path) -> None:
    tensors = [t for t in mtp_layer(3) if "eh_proj" not in t[0]]
    for name, config in (
        ("plain", deepseek_config()),
        ("fp8", deepseek_config(quantization_config={"quant_method": "fp8"})),
    ):
        folder = tmp_path / name
        write_config(folder, config)
        write_safetensors(folder / "model.safetensors", tensors)
        report = run(str(folder), "vllm", "sglang")
        vllm = events(report, "vllm")
        assert vllm == ({"missing_weight": "error"} if name == "plain" else {"random_init": "warning"}) | {
            k: v for k, v in vllm.items() if v == "info"
        }
        assert events(report, "sglang").get("random_init") == "warning"


def test_a_kimi_k2_target_has_no_mtp_drafter_in_vllm(tmp_path) -> None:
    """vLLM maps only deepseek_v3/v32 and glm_moe_dsa model types to DeepSeekMTP; Kimi-K2's kimi_k2 is not one."""
    report = run(target(tmp_path / "k", config=deepseek_config(model_type="kimi_k2")), "vllm", "sglang")
    assert outcomes(report) == {"vllm": "fails", "sglang": "loads"}
    assert "mtp_not_supported" in events(report, "vllm")


QN_CONFIG = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": HIDDEN,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "num_experts": 2,
    "moe_intermediate_size": 8,
    "shared_expert_intermediate_size": 8,
    "vocab_size": VOCAB,
}


def qwen3_next_mtp(layers: int = 1, drop: tuple[str, ...] = ()) -> list[tuple[str, str, list[int]]]:
    """Qwen3-Next's mtp.* block (gated q_proj: twice the heads), scaled down, with the target's embedding/head."""
    out = [
        ("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]),
        ("lm_head.weight", "BF16", [VOCAB, HIDDEN]),
        ("model.norm.weight", "BF16", [HIDDEN]),
        ("mtp.fc.weight", "BF16", [HIDDEN, 2 * HIDDEN]),
        *((f"mtp.{n}.weight", "BF16", [HIDDEN]) for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")),
    ]
    for layer in range(layers):
        p = f"mtp.layers.{layer}."
        out += [
            (p + "input_layernorm.weight", "BF16", [HIDDEN]),
            (p + "post_attention_layernorm.weight", "BF16", [HIDDEN]),
            (p + "self_attn.q_proj.weight", "BF16", [2 * 2 * 8, HIDDEN]),
            (p + "self_attn.k_proj.weight", "BF16", [8, HIDDEN]),
            (p + "self_attn.v_proj.weight", "BF16", [8, HIDDEN]),
            (p + "self_attn.o_proj.weight", "BF16", [HIDDEN, 16]),
            (p + "self_attn.q_norm.weight", "BF16", [8]),
            (p + "self_attn.k_norm.weight", "BF16", [8]),
            (p + "mlp.gate.weight", "BF16", [2, HIDDEN]),
            (p + "mlp.shared_expert_gate.weight", "BF16", [1, HIDDEN]),
        ]
        for expert in ("experts.0", "experts.1", "shared_expert"):
            out += [(p + f"mlp.{expert}.{w}_proj.weight", "BF16", [8, HIDDEN]) for w in ("gate", "up")]
            out += [(p + f"mlp.{expert}.down_proj.weight", "BF16", [HIDDEN, 8])]
    return [t for t in out if not any(piece in t[0] for piece in drop)]


def qwen3_next(folder: Path, tensors: list[tuple[str, str, list[int]]], **config: Any) -> str:
    write_config(folder, {**QN_CONFIG, **config})
    write_safetensors(folder / "model.safetensors", tensors)
    return str(folder)


def test_qwen3_next_mtp_block_is_stacked_into_each_engines_parameters(tmp_path) -> None:
    """q/k/v into qkv_proj, gate/up into gate_up_proj, the experts into the fused w13/w2, fc and the norms as they
    are: every mtp.* tensor fills its shard, the embedding and head come from the target (oracle: mtp_qn_full)."""
    report = run(qwen3_next(tmp_path / "full", qwen3_next_mtp()), "vllm", "sglang")
    assert outcomes(report) == {"vllm": "loads", "sglang": "loads"}
    vllm, sglang = ({name: param for name, _, param in r.tensors} for r in report.engines)
    assert vllm["mtp.layers.0.self_attn.k_proj.weight"] == "model.layers.0.self_attn.qkv_proj.weight[k]"
    assert sglang["mtp.layers.0.self_attn.k_proj.weight"] == "model.layers.0.qkv_proj.weight[k]"
    assert vllm["mtp.layers.0.mlp.experts.1.up_proj.weight"] == (
        "model.layers.0.mlp.experts.routed_experts.w13_weight[1_up]"
    )
    assert sglang["mtp.layers.0.mlp.experts.1.down_proj.weight"] == "model.layers.0.mlp.experts.w2_weight[1]"
    assert sglang["mtp.fc.weight"] == "fc.weight" and vllm["mtp.fc.weight"] == "model.fc.weight"
    assert vllm["lm_head.weight"] == "lm_head.weight" and sglang["lm_head.weight"] is None  # skipped
    for result in report.engines:
        assert "mtp_composition_unchecked" not in events(report, result.engine)
        assert {fate for name, fate, _ in result.tensors if name.startswith("mtp.")} == {"loaded"}
        assert dict(result.parameters)["lm_head.weight"] == "from_target"


@pytest.mark.parametrize(
    ("drop", "vllm", "sglang"),
    [
        # one q/k/v shard: qkv_proj partly written; exempt from vLLM's strict check, never checked by SGLang
        (("k_proj",), ("degraded", "random_init"), ("degraded", "random_init")),
        (("experts.1.",), ("degraded", "random_init"), ("degraded", "random_init")),
        (("shared_expert.",), ("degraded", "random_init"), ("degraded", "random_init")),
        (("mtp.fc.",), ("degraded", "random_init"), ("degraded", "random_init")),
        # an RMSNorm has no quantization method: vLLM's strict check names it
        (("pre_fc_norm_hidden",), ("fails", "missing_weight"), ("degraded", "random_init")),
        (("q_norm",), ("fails", "missing_weight"), ("degraded", "random_init")),
        (("mtp.",), ("fails", "mtp_layer_missing"), ("degraded", "mtp_layer_missing")),
    ],
)
def test_a_missing_piece_of_the_qwen3_next_block(tmp_path, drop, vllm, sglang) -> None:
    report = run(qwen3_next(tmp_path / "q", qwen3_next_mtp(drop=drop)), "vllm", "sglang")
    assert outcomes(report) == {"vllm": vllm[0], "sglang": sglang[0]}
    assert vllm[1] in events(report, "vllm") and sglang[1] in events(report, "sglang")


def test_qwen3_next_layers_against_num_nextn_predict_layers(tmp_path) -> None:
    """vLLM builds num_nextn_predict_layers MTP layers (1 when absent), SGLang always one: a second stored layer
    is unknown to either without the key, a second announced but absent layer fails vLLM's strict check only."""
    extra = run(qwen3_next(tmp_path / "extra", qwen3_next_mtp(layers=2)), "vllm", "sglang")
    assert outcomes(extra) == {"vllm": "fails", "sglang": "fails"}
    assert events(extra, "vllm")["unknown_name"] == events(extra, "sglang")["unknown_name"] == "error"
    two = run(qwen3_next(tmp_path / "two", qwen3_next_mtp(layers=2), num_nextn_predict_layers=2), "vllm", "sglang")
    assert outcomes(two) == {"vllm": "loads", "sglang": "fails"}
    short = run(qwen3_next(tmp_path / "short", qwen3_next_mtp(), num_nextn_predict_layers=2), "vllm", "sglang")
    assert outcomes(short) == {"vllm": "fails", "sglang": "loads"}


def test_qwen3_next_shapes_against_the_config(tmp_path) -> None:
    """An ungated q_proj (half the rows) raises in the stacked copy; k/v for more KV heads are cut silently; an
    extra expert is skipped by vLLM and a KeyError in SGLang; a narrow fc is a shape error in both."""
    base = qwen3_next_mtp(drop=("q_proj", "k_proj", "v_proj"))
    attention = [("mtp.layers.0.self_attn.q_proj.weight", "BF16", [16, HIDDEN])]
    attention += [(f"mtp.layers.0.self_attn.{p}_proj.weight", "BF16", [8, HIDDEN]) for p in ("k", "v")]
    ungated = run(qwen3_next(tmp_path / "ungated", base + attention), "vllm", "sglang")
    assert outcomes(ungated) == {"vllm": "fails", "sglang": "fails"}
    assert events(ungated, "vllm")["shape_mismatch"] == "error"
    wide = [("mtp.layers.0.self_attn.q_proj.weight", "BF16", [32, HIDDEN])]
    wide += [(f"mtp.layers.0.self_attn.{p}_proj.weight", "BF16", [16, HIDDEN]) for p in ("k", "v")]
    cut = run(qwen3_next(tmp_path / "cut", base + wide), "vllm", "sglang")
    assert outcomes(cut) == {"vllm": "degraded", "sglang": "degraded"}
    assert "shard_truncated" in events(cut, "sglang")
    expert = [(f"mtp.layers.0.mlp.experts.2.{w}_proj.weight", "BF16", [8, HIDDEN]) for w in ("gate", "up")]
    extra = run(qwen3_next(tmp_path / "extra", qwen3_next_mtp() + expert), "vllm", "sglang")
    assert outcomes(extra) == {"vllm": "degraded", "sglang": "fails"}


def test_a_qwen3_next_block_quantized_other_than_fp8_is_checked_for_presence_only_and_says_so(tmp_path) -> None:
    """FP8 blocks are modelled (test_mtp_quantized.py); compressed-tensors, AWQ, GPTQ and ModelOpt are not."""
    compressed = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {}}
    folder = qwen3_next(tmp_path / "ct", qwen3_next_mtp(), quantization_config=compressed)
    report = run(folder, "vllm", "sglang")
    for result in report.engines:
        assert "mtp_composition_unchecked" in events(report, result.engine)
        assert {fate for name, fate, _ in result.tensors if name.startswith("mtp.")} == {"unchecked"}


def test_an_export_that_lost_its_qwen3_next_block_is_a_finding(tmp_path) -> None:
    full = qwen3_next(tmp_path / "full", qwen3_next_mtp())
    export = qwen3_next(tmp_path / "export", qwen3_next_mtp(drop=("mtp.",)))
    report = run(full, b=export)
    assert [f.code for f in report.findings if f.code.startswith("mtp_")] == ["mtp_layers_missing"]


def test_engines_without_mtp_rules_say_so_and_all_runs_those_with_rules(tmp_path, run_cli) -> None:
    spec = target(tmp_path / "t")
    done = run_cli(spec, "--engine", "all", "--format", "json")
    document = json.loads(done.stdout)
    assert [e["engine"] for e in document["engines"]] == ["sglang", "vllm"]
    assert done.returncode == 0
    trt = run_cli(spec, "--engine", "trtllm", "--format", "json")
    (entry,) = json.loads(trt.stdout)["engines"]
    assert trt.returncode == 1 and entry["events"][0]["code"] == "family_not_modelled"


@pytest.mark.parametrize("forced", ["eagle3", "mtp"])
def test_profile_forces_the_family_replayed(tmp_path, forced: str) -> None:
    report = run(target(tmp_path / "t"), "sglang", profile=forced)
    codes = events(report, "sglang")
    assert ("architecture_not_eagle3" in codes) == (forced == "eagle3")


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "drafters"


@pytest.mark.parametrize(
    ("layout", "base", "expected"),
    [
        ("mtp-deepseek-v3", None, {"vllm": "loads", "sglang": "loads"}),
        ("mtp-deepseek-v3-dropped", None, {"vllm": "fails", "sglang": "degraded"}),
        ("mtp-deepseek-v3-nextn-export", "bases/deepseek-v3", {"vllm": "fails", "sglang": "loads"}),
        ("mtp-glm-4.5-air", None, {"vllm": "loads", "sglang": "loads"}),
        ("mtp-qwen3-next-80b-a3b", None, {"vllm": "loads", "sglang": "loads"}),
        # "0 of 15 mtp.* tensors exported": vLLM's strict check raises, SGLang serves a random block silently
        ("mtp-qwen3-next-80b-a3b-dropped", None, {"vllm": "fails", "sglang": "degraded"}),
    ],
)
def test_rebuilt_published_mtp_layouts(layout: str, base: str | None, expected: dict[str, str], run_cli) -> None:
    """The rebuilt layouts (fixtures/published_drafters.py MTP_LAYOUTS) from the CLI, as a user checks them."""
    args = [str(FIXTURES / layout), "--engine", "all", "--format", "json"]
    if base is not None:
        args += ["--base", str(FIXTURES / base)]
    document = json.loads(run_cli(*args).stdout)
    assert {e["engine"]: e["outcome"] for e in document["engines"]} == expected


def test_a_standalone_export_beside_its_target_is_read_at_the_targets_index(tmp_path) -> None:
    """vLLM serves an export given as speculative_config.model at the target's num_hidden_layers (observed by the
    oracle: mtp_nextn_export_*): an export renumbered to layer 0 is missing layer N there; stored at the
    target's N, it loads. SGLang reads the export's own index (0 for a one-layer export)."""
    export = tmp_path / "export"
    write_config(export, deepseek_config(num_hidden_layers=1))
    write_safetensors(export / "model.safetensors", mtp_layer(3))
    base = target(tmp_path / "base", mtp_layers=())
    report = compare_specs(str(export), None, engines=("vllm", "sglang"), base=base)
    assert outcomes(report) == {"vllm": "loads", "sglang": "degraded"}
    assert events(report, "sglang")["mtp_layer_missing"] == "warning"


def test_the_outside_tensors_of_a_qwen3_next_target_are_worded_truly(tmp_path, run_cli) -> None:
    done = run_cli(qwen3_next(tmp_path / "q", qwen3_next_mtp()), "--engine", "vllm", "--engine", "sglang", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "MTP layers []" not in text
    assert "3 tensors outside mtp.* are the target's own: Qwen3NextForCausalLMMTP skips" in text


def test_a_mimo_target_keeps_its_mtp_layer_under_mtp_layers_whose_loaders_are_not_modelled(run_cli) -> None:
    """MiMo-7B stores its MTP layer as model.mtp_layers.0.*: it is that layout, not a DeepSeek-V3 target missing
    model.layers.36; both engines build a MiMo MTP class from it, whose loaders ckptdiff does not replay, so each
    says so and the gate fails rather than guess."""
    done = run_cli(str(FIXTURES / "mtp-mimo-7b"), "--engine", "all", "--format", "json")
    document = json.loads(done.stdout)
    assert document["findings"] == []
    assert document["a"]["variants"] == ["mimo_layers"]
    codes = {e["engine"]: [event["code"] for event in e["events"]] for e in document["engines"]}
    assert codes == {"vllm": ["mtp_not_modelled"], "sglang": ["mtp_not_modelled"]}
    text = run_cli(str(FIXTURES / "mtp-mimo-7b"), "--engine", "vllm").stdout
    assert "vLLM builds MiMoMTPModel from the MTP layers of architectures[0] MiMoForCausalLM" in text


def test_a_mimo_export_without_its_mtp_layer_is_named_against_the_original(run_cli) -> None:
    done = run_cli(str(FIXTURES / "mtp-mimo-7b"), str(FIXTURES / "mtp-mimo-7b-dropped"), "--format", "json")
    findings = json.loads(done.stdout)["findings"]
    assert [(f["code"], f["params"]["side"], f["params"]["missing"]) for f in findings] == [
        ("mtp_layers_missing", "B", [0])
    ]
    assert "stores none of model.mtp_layers.0.*" in findings[0]["message"]


def test_convert_refuses_mimo_mtp_layers_naming_where_they_are(tmp_path, run_cli) -> None:
    done = run_cli("convert", str(FIXTURES / "mtp-mimo-7b"), str(tmp_path / "out"), "--to", "vllm")
    assert done.returncode == 2
    assert "keeps its MTP layers under model.mtp_layers.* (MiMo)" in done.stdout + done.stderr


def test_a_glm_4_7_flash_target_is_built_by_both_engines_whose_loaders_are_not_modelled(tmp_path) -> None:
    """GLM-4.7-Flash (Glm4MoeLiteForCausalLM) keeps its MTP layer after the main ones as DeepSeek-V3 does; vLLM
    builds Glm4MoeLiteMTPModel and SGLang Glm4MoeLiteForCausalLMNextN from it: not "no class", but not replayed."""
    config = deepseek_config(architectures=["Glm4MoeLiteForCausalLM"], model_type="glm4_moe_lite")
    report = run(target(tmp_path / "flash", config=config), "vllm", "sglang")
    assert report.findings == ()
    assert events(report, "vllm") == events(report, "sglang") == {"mtp_not_modelled": "error"}
    (vllm,) = [e for r in report.engines if r.engine == "vllm" for e in r.events]
    assert "Glm4MoeLiteMTPModel" in event_message(vllm)


def qwen3_5(folder: Path, *, mtp: bool = True, count: int = 1) -> str:
    """A Qwen3.5 checkpoint as published: the multimodal wrapper, its text model under model.language_model., the
    MTP block under mtp.* as Qwen3-Next's, counted by the text config's mtp_num_hidden_layers."""
    tensors = [
        ("model.language_model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]),
        ("model.language_model.norm.weight", "BF16", [HIDDEN]),
        ("lm_head.weight", "BF16", [VOCAB, HIDDEN]),
    ]
    if mtp:
        tensors += [
            ("mtp.fc.weight", "BF16", [HIDDEN, 2 * HIDDEN]),
            ("mtp.norm.weight", "BF16", [HIDDEN]),
            ("mtp.pre_fc_norm_embedding.weight", "BF16", [HIDDEN]),
            ("mtp.pre_fc_norm_hidden.weight", "BF16", [HIDDEN]),
            ("mtp.layers.0.input_layernorm.weight", "BF16", [HIDDEN]),
        ]
    text = {"model_type": "qwen3_5_text", "num_hidden_layers": 4, "mtp_num_hidden_layers": count}
    write_config(folder, {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                          "text_config": text | {"hidden_size": HIDDEN, "vocab_size": VOCAB}})  # fmt: skip
    write_safetensors(folder / "model.safetensors", tensors)
    return str(folder)


def test_a_qwen3_5_checkpoints_mtp_block_is_recognised_and_its_loaders_are_not_modelled(tmp_path) -> None:
    """Qwen3.5 keeps its MTP block under mtp.* (mtp_num_hidden_layers in its text config): both engines build a
    drafter from it (vLLM Qwen3_5MTP, SGLang Qwen3_5ForCausalLMMTP), not an EAGLE-3 drafter they refuse."""
    report = run(qwen3_5(tmp_path / "q"), "vllm", "sglang")
    assert report.a.variants == ("mtp_block",)
    assert events(report, "vllm") == events(report, "sglang") == {"mtp_not_modelled": "error"}


def test_a_qwen3_5_export_without_its_mtp_block_is_named(tmp_path) -> None:
    report = compare_specs(qwen3_5(tmp_path / "a"), qwen3_5(tmp_path / "b", mtp=False))
    assert [(f.code, f.params["side"]) for f in report.findings] == [("mtp_layers_missing", "B")]


def test_a_qwen3_5_that_announces_no_mtp_layer_is_not_an_mtp_checkpoint(tmp_path) -> None:
    folder = Path(qwen3_5(tmp_path / "none", mtp=False, count=0))
    assert detect_family(json.loads((folder / "config.json").read_text())) is None


def test_a_glm_5_target_is_served_by_each_engines_own_dsa_class_which_is_not_modelled(tmp_path) -> None:
    """GLM-5 (GlmMoeDsaForCausalLM): vLLM builds DeepseekV32MTPModel (its MTP layer carries the DSA indexer), SGLang
    its own subclass, GlmMoeDsaForCausalLMNextN; neither is replayed: not "no class", nor the indexer's tensors
    called unknown names."""
    config = deepseek_config(architectures=["GlmMoeDsaForCausalLM"], model_type="glm_moe_dsa")
    report = run(target(tmp_path / "glm5", config=config), "vllm", "sglang")
    assert events(report, "vllm") == events(report, "sglang") == {"mtp_not_modelled": "error"}
    classes = {r.engine: e.params["cls"] for r in report.engines for e in r.events}
    assert classes["vllm"] == "DeepseekV32MTPModel"


def ernie(folder: Path, *, mtp: bool = True) -> str:
    """An ERNIE-4.5 MoE target as published: its MTP layer i under model.mtp_emb_norm.{i}, mtp_hidden_norm.{i},
    mtp_linear_proj.{i} and the block model.mtp_block.{i}, counted from 0."""
    tensors = [("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]), ("lm_head.weight", "BF16", [VOCAB, HIDDEN])]
    if mtp:
        tensors += [
            ("model.mtp_emb_norm.0.weight", "BF16", [HIDDEN]),
            ("model.mtp_hidden_norm.0.weight", "BF16", [HIDDEN]),
            ("model.mtp_linear_proj.0.weight", "BF16", [HIDDEN, 2 * HIDDEN]),
            ("model.mtp_block.0.input_layernorm.weight", "BF16", [HIDDEN]),
            ("model.mtp_block.0.self_attn.o_proj.weight", "BF16", [HIDDEN, HIDDEN]),
        ]
    config = {"architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe", "num_hidden_layers": 4,
              "num_nextn_predict_layers": 1, "hidden_size": HIDDEN, "vocab_size": VOCAB}  # fmt: skip
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", tensors)
    return str(folder)


def test_an_ernie_target_keeps_its_mtp_layer_under_names_of_its_own(tmp_path, run_cli) -> None:
    """ERNIE-4.5's MTP layer is not model.layers.{N}: compared with itself it is complete (no mtp_layers_missing);
    both engines build a drafter from it (vLLM ErnieMTPModel, SGLang Ernie4_5_MoeForCausalLMMTP), not replayed."""
    full = ernie(tmp_path / "full")
    report = compare_specs(full, full, engines=("vllm", "sglang"))
    assert report.findings == ()
    assert report.a.variants == ("ernie_layers",)
    assert events(report, "vllm") == events(report, "sglang") == {"mtp_not_modelled": "error"}
    dropped = compare_specs(full, ernie(tmp_path / "dropped", mtp=False))
    assert [(f.code, f.params["side"]) for f in dropped.findings] == [("mtp_layers_missing", "B")]
    assert "stores none of model.mtp_block.0.*" in finding_message(dropped, dropped.findings[0])
    done = run_cli("convert", full, str(tmp_path / "out"), "--to", "sglang")
    assert "keeps its MTP layers under model.mtp_block.* (ERNIE-4.5)" in done.stdout + done.stderr


def test_mtp_tensors_under_a_layout_ckptdiff_does_not_know_are_not_called_missing(tmp_path) -> None:
    """A target announcing an MTP layer it keeps under names of another layout (model.mtp.layers.0.*, as
    LongCat-Flash's loaders read it) is not "missing" its layer: ckptdiff says it does not know the layout."""
    folder = tmp_path / "other"
    tensors = [("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]), ("model.layers.0.input_layernorm.weight",
               "BF16", [HIDDEN]), ("model.mtp.layers.0.enorm.m.weight", "BF16", [HIDDEN]),
               ("model.mtp.layers.0.eh_proj.weight", "BF16", [HIDDEN, 2 * HIDDEN])]  # fmt: skip
    write_config(folder, deepseek_config(architectures=["LongcatFlashForCausalLM"], model_type="longcat_flash"))
    write_safetensors(folder / "model.safetensors", tensors)
    report = compare_specs(str(folder), str(folder))
    assert [(f.code, f.severity) for f in report.findings] == [("mtp_layout_unknown", "warning")] * 2
    assert "model.mtp.layers.0.eh_proj.weight" in finding_message(report, report.findings[0])
    assert report.verdict == "compatible"
    assert report.a.variants == ("unknown_layout",)  # not "DeepSeek-V3/GLM-4.5 MTP layers"


@pytest.mark.parametrize(
    ("architecture", "model_type", "vllm", "sglang"),
    [
        ("LongcatFlashForCausalLM", "longcat_flash", "LongCatFlashMTPModel", "LongcatFlashForCausalLMNextN"),
        ("Step3p5ForCausalLM", "step3p5", "Step3p5MTP", "Step3p5MTP"),
        ("MiMoV2FlashForCausalLM", "mimo_v2_flash", "MiMoV2MTPModel", "MiMoV2MTP"),
    ],
)
def test_targets_the_engines_build_an_mtp_drafter_for_are_not_modelled_not_unsupported(
    tmp_path, architecture: str, model_type: str, vllm: str, sglang: str
) -> None:
    """Each engine maps these targets to an MTP class of its own (vLLM's hf_config_override, SGLang's draft
    architecture override): ckptdiff does not replay them, and says so rather than "no class"."""
    config = deepseek_config(architectures=[architecture], model_type=model_type)
    report = run(target(tmp_path / "t", config=config), "vllm", "sglang")
    assert events(report, "vllm") == events(report, "sglang") == {"mtp_not_modelled": "error"}
    classes = {r.engine: e.params["cls"] for r in report.engines for e in r.events}
    assert classes == {"vllm": vllm, "sglang": sglang}
