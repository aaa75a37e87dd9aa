"""A quantized Qwen3-Next ``mtp.*`` block (FP8 blocks or per tensor) as each engine builds and loads it: which
linears each engine quantizes (its own reading of the ignore list, asked about its own module names), the scales
each of them takes, and what happens to a weight or scale that does not fit. Each test names the oracle case
(tests/oracle/mtp_catalogue.py, QWEN3_NEXT_QUANTIZED) that observed the same under the real loaders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_mtp import QN_CONFIG

from ckptdiff.families.mtp.engines import prefix_quant, sglang, vllm
from ckptdiff.formats.messages import event_message
from ckptdiff.pipeline import compare_specs
from fixtures.generate import write_config, write_safetensors

H, VOCAB, BLOCK = 16, 64, 8
CONFIG = QN_CONFIG
#: The published FP8 export's ignore list, as far as the MTP block goes (Qwen3-Next-80B-A3B-Instruct-FP8).
IGNORED = [
    "lm_head",
    "mtp.fc",
    "mtp.layers.0.mlp.gate",
    "mtp.layers.0.mlp.shared_expert_gate",
    "mtp.norm",
    "mtp.pre_fc_norm_embedding",
    "mtp.pre_fc_norm_hidden",
]
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]}
PUBLISHED = {**FP8, "modules_to_not_convert": IGNORED}
LINEARS = {
    "self_attn.q_proj": (2 * 2 * 8, H),
    "self_attn.k_proj": (8, H),
    "self_attn.v_proj": (8, H),
    "self_attn.o_proj": (H, 16),
    **{f"mlp.{e}.{w}_proj": (8, H) for e in ("experts.0", "experts.1", "shared_expert") for w in ("gate", "up")},
    **{f"mlp.{e}.down_proj": (H, 8) for e in ("experts.0", "experts.1", "shared_expert")},
}


def linear(name: str, rows: int, cols: int, scheme: str) -> list[tuple[str, str, list[int]]]:
    if scheme == "bf16":
        return [(f"{name}.weight", "BF16", [rows, cols])]
    scale = ("weight_scale_inv", [-(-rows // BLOCK), -(-cols // BLOCK)]) if scheme == "block" else ("weight_scale", [])
    return [(f"{name}.weight", "F8_E4M3", [rows, cols]), (f"{name}.{scale[0]}", "F32", scale[1])]


def block(scheme: str = "block", fc: str = "bf16", drop: tuple[str, ...] = ()) -> list[tuple[str, str, list[int]]]:
    """The target's embedding/head and its mtp.* block, the linears stored as ``scheme`` (block, tensor, bf16)."""
    out = [
        ("model.embed_tokens.weight", "BF16", [VOCAB, H]),
        ("lm_head.weight", "BF16", [VOCAB, H]),
        *linear("mtp.fc", H, 2 * H, fc),
        *((f"mtp.{n}.weight", "BF16", [H]) for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")),
    ]
    p = "mtp.layers.0."
    out += [(p + f"{n}.weight", "BF16", [H]) for n in ("input_layernorm", "post_attention_layernorm")]
    out += [(p + f"self_attn.{n}.weight", "BF16", [8]) for n in ("q_norm", "k_norm")]
    out += [(p + "mlp.gate.weight", "BF16", [2, H]), (p + "mlp.shared_expert_gate.weight", "BF16", [1, H])]
    for name, (rows, cols) in LINEARS.items():
        out += linear(p + name, rows, cols, scheme)
    return [t for t in out if not any(piece in t[0] for piece in drop)]


def run(folder: Path, tensors: list[tuple[str, str, list[int]]], quantization: dict[str, Any] | None) -> Any:
    write_config(folder, {**CONFIG, **({"quantization_config": quantization} if quantization else {})})
    write_safetensors(folder / "model.safetensors", tensors)
    return compare_specs(str(folder), None, engines=("vllm", "sglang"))


def result(report: Any, engine: str) -> Any:
    return next(r for r in report.engines if r.engine == engine)


def codes(report: Any, engine: str) -> dict[str, str]:
    return {e.code: e.severity for e in result(report, engine).events}


def params(report: Any, engine: str) -> dict[str, str]:
    return dict(result(report, engine).parameters)


def test_the_published_fp8_block_loads_its_scales_under_both_engines(tmp_path) -> None:
    """mtp_qn_fp8_published (SGLang observed; vLLM's FP8 block kernel is not on this CPU)."""
    report = run(tmp_path / "fp8", block(), PUBLISHED)
    assert {r.engine: r.outcome for r in report.engines} == {"vllm": "loads", "sglang": "loads"}
    tensors = {name: into for name, _, into in result(report, "vllm").tensors}
    assert tensors["mtp.layers.0.self_attn.k_proj.weight_scale_inv"] == (
        "model.layers.0.self_attn.qkv_proj.weight_scale_inv[k]"
    )
    assert tensors["mtp.layers.0.mlp.experts.1.up_proj.weight_scale_inv"] == (
        "model.layers.0.mlp.experts.routed_experts.w13_weight_scale_inv[1_up]"
    )
    assert params(report, "sglang")["model.layers.0.qkv_proj.weight_scale_inv[q]"] == "loaded"


def test_scales_missing_or_a_bf16_block_under_an_fp8_config_leave_garbage_scales_silently(tmp_path) -> None:
    """mtp_qn_fp8_no_scales, mtp_qn_fp8_bf16_block (SGLang), mtp_qn_fp8_pt_no_scales, mtp_qn_fp8_pt_bf16_block
    (vLLM, per tensor)."""
    bare = run(tmp_path / "bare", block(drop=("weight_scale_inv",)), PUBLISHED)
    for engine in ("vllm", "sglang"):
        assert result(bare, engine).outcome == "degraded"
        assert codes(bare, engine)["scale_missing"] == "warning"
    assert params(bare, "vllm")["model.layers.0.self_attn.o_proj.weight_scale_inv"] == "random"
    bf16 = run(tmp_path / "bf16", block("bf16"), PUBLISHED)
    assert codes(bf16, "sglang").keys() >= {"weight_cast_to_fp8", "scale_missing"}
    assert "missing_weight" not in codes(bf16, "vllm")  # a quantized target: vLLM's strict check is off


def test_an_ignore_list_naming_the_block_as_the_checkpoint_does_is_missed_by_sglang(tmp_path) -> None:
    """mtp_qn_fp8_block_ignored: vLLM asks about mtp.layers.0.* and builds the block BF16; SGLang asks about
    model.layers.0.* (its MTP layer's own prefix), builds it FP8 and casts the BF16 weights without scales."""
    names = ["mtp.layers.0.self_attn." + p for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    names += [f"mtp.layers.0.mlp.shared_expert.{p}_proj" for p in ("gate", "up", "down")]
    ignored = {**FP8, "modules_to_not_convert": [*IGNORED, *names, "mtp.layers.0.mlp.experts"]}
    report = run(tmp_path / "ignored", block("bf16"), ignored)
    assert result(report, "vllm").outcome == "loads"
    assert result(report, "sglang").outcome == "degraded"
    cast = {e.params["module"]: e for e in result(report, "sglang").events if e.code == "weight_cast_to_fp8"}
    qkv = event_message(cast["mtp.layers.0.self_attn.qkv_proj"])
    assert "but the engine asks about model.layers.0.self_attn.qkv_proj, which no entry names" in qkv


def test_mtp_fc_quantized_fails_sglang_whose_fc_is_a_plain_linear(tmp_path) -> None:
    """mtp_qn_fp8_fc_quantized: vLLM quantizes fc with the rest; SGLang's fc is an nn.Linear, so the FP8 weight is
    copied in unscaled and its weight_scale_inv has no parameter (KeyError)."""
    config = {**FP8, "modules_to_not_convert": [m for m in IGNORED if m != "mtp.fc"]}
    report = run(tmp_path / "fc", block(fc="block"), config)
    assert result(report, "vllm").outcome == "loads"
    assert codes(report, "sglang")["unknown_name"] == "error"
    assert codes(report, "sglang")["fp8_weight_unscaled"] == "warning"
    fates = {name: fate for name, fate, _ in result(report, "sglang").tensors}
    assert fates["mtp.fc.weight_scale_inv"] == "error"


def test_a_scale_of_the_wrong_shape_and_a_router_scale_fail_both(tmp_path) -> None:
    """mtp_qn_fp8_o_proj_scale_per_tensor, mtp_qn_fp8_router_scale (SGLang), mtp_qn_fp8_pt_router_scale (vLLM)."""
    tensors = [t for t in block() if t[0] != "mtp.layers.0.self_attn.o_proj.weight_scale_inv"]
    shape = run(
        tmp_path / "shape", [*tensors, ("mtp.layers.0.self_attn.o_proj.weight_scale_inv", "F32", [1])], PUBLISHED
    )
    router = run(tmp_path / "router", [*block(), ("mtp.layers.0.mlp.gate.weight_scale_inv", "F32", [1, 2])], PUBLISHED)
    for engine in ("vllm", "sglang"):
        assert codes(shape, engine)["shape_mismatch"] == "error"
        assert codes(router, engine)["unknown_name"] == "error"


def test_a_quantized_target_without_its_block_is_silent_under_vllm(tmp_path) -> None:
    """mtp_qn_fp8_pt_dropped: unquantized, vLLM's strict check refuses a missing block; quantized, it is off."""
    report = run(tmp_path / "dropped", block(drop=("mtp.",)), PUBLISHED)
    assert result(report, "vllm").outcome == "degraded"
    assert codes(report, "vllm")["mtp_layer_missing"] == "warning"
    assert set(params(report, "vllm").values()) == {"random", "from_target"}


def test_an_ignore_list_skipping_some_shards_of_a_fused_linear_is_refused_by_vllm(tmp_path) -> None:
    """mtp_qn_fp8_q_proj_ignored_alone: vLLM refuses at construction; SGLang never matches mtp.* names."""
    config = {**PUBLISHED, "modules_to_not_convert": [*IGNORED, "mtp.layers.0.self_attn.q_proj"]}
    report = run(tmp_path / "mixed", block(), config)
    assert codes(report, "vllm") == {"quantization_config_invalid": "error"}
    assert result(report, "sglang").outcome == "loads"


def test_each_engine_reads_its_own_ignore_keys_and_matching() -> None:
    """vLLM: ignored_layers, else modules_to_not_convert, exact names; SGLang: both spellings, model. added and
    removed, module-path boundaries."""
    spec = prefix_quant.fp8_scheme({"quant_method": "fp8", "ignored_layers": ["a"], "modules_to_not_convert": ["b"]},
                                   vllm.QN_QUANT.ignore_keys)  # fmt: skip
    assert spec is not None and spec.ignored == ("a",) and spec.block is None
    assert prefix_quant.fp8_scheme({"quant_method": "compressed-tensors"}, ()) is None
    assert sglang.QN_QUANT.normalise(["model.layers.0.mlp"]) == ["layers.0.mlp", "model.layers.0.mlp"]
    assert sglang.QN_QUANT.matches("layers.0.mlp", "model.layers.0.mlp.experts")
    assert not sglang.QN_QUANT.matches("mlp.gate", "model.layers.0.mlp.gate_up_proj")
    assert not vllm.QN_QUANT.matches("mtp.layers.0.mlp", "mtp.layers.0.mlp.experts")


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "drafters"


def test_the_rebuilt_fp8_export_loads_and_a_bf16_block_under_its_config_is_told_from_the_cli(tmp_path, run_cli) -> None:
    """fixtures/drafters/mtp-qwen3-next-80b-a3b-fp8 (rebuilt from Qwen/Qwen3-Next-80B-A3B-Instruct-FP8) loads under
    both engines; its config over the BF16 block (an FP8 export that left the block unquantized) is degraded under
    both, each layer named once."""
    from fixtures.published_drafters import MTP_LAYOUTS, qwen3_next_mtp_tensors, target_own

    published = run_cli(str(FIXTURES / "mtp-qwen3-next-80b-a3b-fp8"), "--engine", "vllm", "--engine", "sglang")
    assert published.returncode == 0, published.stdout + published.stderr
    assert "compatible: vllm A loads, sglang A loads" in published.stdout
    config, _, _ = MTP_LAYOUTS["mtp-qwen3-next-80b-a3b-fp8"]
    write_config(tmp_path / "bf16", config)
    write_safetensors(tmp_path / "bf16" / "model.safetensors", target_own() + qwen3_next_mtp_tensors())
    bf16 = run_cli(str(tmp_path / "bf16"), "--engine", "vllm", "--engine", "sglang")
    assert bf16.returncode == 1
    assert bf16.stdout.count("[weight_cast_to_fp8] mtp.layers.0.self_attn.qkv_proj: 3 weight(s) stored BF16") == 2
    assert "sglang A: degraded" in bf16.stdout and "vllm A: degraded" in bf16.stdout


def test_the_scale_grids_at_full_size_are_the_published_exports() -> None:
    """Qwen3-Next-80B-A3B's real widths under block 128: the weight_scale_inv shapes the FP8 export stores
    (q_proj [64, 16], k/v_proj [4, 16], o_proj [16, 32], an expert's gate/up [4, 16] and down [16, 4])."""
    from ckptdiff.families.mtp.engines.prefix import linears, vllm_moe_layer
    from ckptdiff.families.mtp.spec import MtpSpec

    real = {
        **CONFIG,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "num_experts": 512,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
    }
    config = {**PUBLISHED, "weight_block_size": [128, 128]}
    plan = prefix_quant.plan(vllm.QN_QUANT, config, linears(MtpSpec.of(real, ()), 1, vllm_moe_layer))
    assert plan is not None
    p = "layers.0."
    assert plan.scales[p + "self_attn.q_proj.weight_scale_inv"] == (64, 16)
    assert plan.scales[p + "self_attn.k_proj.weight_scale_inv"] == (4, 16)
    assert plan.scales[p + "self_attn.o_proj.weight_scale_inv"] == (16, 32)
    assert plan.scales[p + "mlp.experts.511.up_proj.weight_scale_inv"] == (4, 16)
    assert plan.scales[p + "mlp.experts.0.down_proj.weight_scale_inv"] == (16, 4)
    assert "fc.weight_scale_inv" not in plan.scales  # modules_to_not_convert names mtp.fc


def test_layers_that_are_not_whole_blocks_are_refused_when_built(tmp_path) -> None:
    """mtp_qn_fp8_block_48 (SGLang: qkv's shards), mtp_qn_fp8_only_experts_width_48_block_32 (vLLM) and
    mtp_qn_fp8_expert_width_48_block_32 (SGLang): a routed expert's width must be whole blocks for both engines; a
    fused layer's shards only for SGLang (vLLM lets such a fused layer through)."""
    config = {**PUBLISHED, "weight_block_size": [12, 12]}  # q_proj's 32 rows, k/v's 8: not whole blocks of 12
    fused = run(
        tmp_path / "fused", block(), {**config, "modules_to_not_convert": [*IGNORED, "mtp.layers.0.mlp.experts"]}
    )
    assert codes(fused, "sglang") == {"quantization_config_invalid": "error"}
    assert "quantization_config_invalid" not in codes(fused, "vllm")
    experts = run(tmp_path / "experts", block(), {**PUBLISHED, "weight_block_size": [16, 16]})  # experts 8 wide
    refusal = result(experts, "vllm").events[0]  # SGLang refuses qkv first (k/v's 8 rows)
    assert refusal.code == "quantization_config_invalid" and refusal.params["module"] == "mtp.layers.0.mlp.experts"
    assert codes(experts, "sglang") == {"quantization_config_invalid": "error"}


def test_an_fp8_block_without_a_quantization_config_fails_both_naming_the_lost_config(tmp_path) -> None:
    """mtp_qn_fp8_block_without_config: every linear built unquantized, so each scale has no parameter."""
    report = run(tmp_path / "lost", block(), None)
    for engine in ("vllm", "sglang"):
        assert result(report, engine).outcome == "fails"
        first = result(report, engine).events[0]
        assert first.code == "unknown_name" and "no quantization_config" in event_message(first)
        assert "mtp_quantized_block" not in codes(report, engine)
