"""SGLang's block-FP8 NextN layer (ckptdiff/families/mtp/engines/sglang.py ``FP8``): the scales it builds beside
each quantized weight, eh_proj built plain, and the loaders that refuse a wider tensor. Each rule is also checked
against SGLang's own loader by the oracle's ``mtp_ds_fp8_*`` cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_mtp import deepseek_config

from ckptdiff.pipeline import compare_specs
from fixtures.generate import write_config, write_safetensors

HIDDEN, VOCAB, EXPERTS, BLOCK = 16, 64, 2, 8
FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]}
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "drafters"

CONFIG = deepseek_config(n_routed_experts=EXPERTS, quantization_config=FP8)

Tensor = tuple[str, str, list[int]]


def _linear(name: str, rows: int, cols: int, dtype: str) -> list[Tensor]:
    if dtype != "F8_E4M3":
        return [(f"{name}.weight", dtype, [rows, cols])]
    return [
        (f"{name}.weight", "F8_E4M3", [rows, cols]),
        (f"{name}.weight_scale_inv", "F32", [-(-rows // BLOCK), -(-cols // BLOCK)]),
    ]


def mtp_layer(dtypes: dict[str, str] | None = None) -> list[Tensor]:
    """Layer 3 of the target, its linears FP8 with their block scales (``dtypes``: piece → dtype, BF16 ones
    stored without scales); eh_proj in BF16 as DeepSeek-V3 stores it."""
    dtypes = {"eh_proj": "BF16", **(dtypes or {})}

    def dtype(name: str) -> str:
        return next((d for piece, d in dtypes.items() if piece in name), "F8_E4M3")

    p, a, m = "model.layers.3.", "model.layers.3.self_attn.", "model.layers.3.mlp."
    out: list[Tensor] = [
        (p + "enorm.weight", "BF16", [HIDDEN]),
        (p + "hnorm.weight", "BF16", [HIDDEN]),
        (p + "shared_head.norm.weight", "BF16", [HIDDEN]),
        (p + "shared_head.head.weight", "BF16", [VOCAB, HIDDEN]),
        (p + "embed_tokens.weight", "BF16", [VOCAB, HIDDEN]),
        (p + "input_layernorm.weight", "BF16", [HIDDEN]),
        (p + "post_attention_layernorm.weight", "BF16", [HIDDEN]),
        (a + "q_a_layernorm.weight", "BF16", [12]),
        (a + "kv_a_layernorm.weight", "BF16", [8]),
        (m + "gate.weight", "BF16", [EXPERTS, HIDDEN]),
        (m + "gate.e_score_correction_bias", "F32", [EXPERTS]),
    ]
    linears = [
        (p + "eh_proj", HIDDEN, 2 * HIDDEN),
        (a + "q_a_proj", 12, HIDDEN),
        (a + "q_b_proj", 24, 12),
        (a + "kv_a_proj_with_mqa", 12, HIDDEN),
        (a + "kv_b_proj", 32, 8),
        (a + "o_proj", HIDDEN, 16),
    ]
    for expert in [*(f"experts.{e}" for e in range(EXPERTS)), "shared_experts"]:
        linears += [(f"{m}{expert}.gate_proj", 8, HIDDEN), (f"{m}{expert}.up_proj", 8, HIDDEN)]
        linears += [(f"{m}{expert}.down_proj", HIDDEN, 8)]
    for name, rows, cols in linears:
        out += _linear(name, rows, cols, dtype(name))
    return out


def target(folder: Path, layer: list[Tensor], **config: Any) -> str:
    tensors = [("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]), ("lm_head.weight", "BF16", [VOCAB, HIDDEN])]
    write_config(folder, {**CONFIG, **config})
    write_safetensors(folder / "model.safetensors", tensors + layer)
    return str(folder)


def sglang(spec: str) -> Any:
    return next(iter(compare_specs(spec, None, engines=("sglang",)).engines))


def codes(result: Any) -> dict[str, list[str | None]]:
    found: dict[str, list[str | None]] = {}
    for event in result.events:
        found.setdefault(event.code, []).append(event.tensor or event.params.get("param"))
    return found


def test_a_complete_block_fp8_layer_fills_every_scale_parameter_sglang_builds(tmp_path) -> None:
    result = sglang(target(tmp_path / "t", mtp_layer()))
    assert result.outcome == "loads"
    scales = {name: fate for name, fate in result.parameters if "scale" in name}
    assert set(scales.values()) == {"loaded"}
    assert {name.split("[")[0] for name in scales} == {
        f"model.decoder.{rest}.weight_scale_inv"
        for rest in (
            "self_attn.fused_qkv_a_proj_with_mqa",
            "self_attn.q_b_proj",
            "self_attn.kv_b_proj",
            "self_attn.o_proj",
            "mlp.shared_experts.gate_up_proj",
            "mlp.shared_experts.down_proj",
        )
    } | {"model.decoder.mlp.experts.w13_weight_scale_inv", "model.decoder.mlp.experts.w2_weight_scale_inv"}


def test_an_fp8_eh_proj_beside_its_scale_is_read_unscaled(tmp_path) -> None:
    result = sglang(target(tmp_path / "t", mtp_layer({"eh_proj": "F8_E4M3"})))
    assert result.outcome == "degraded"
    assert codes(result)["fp8_weight_unscaled"] == ["model.layers.3.eh_proj.weight"]
    fates = {name: fate for name, fate, _ in result.tensors}
    assert fates["model.layers.3.eh_proj.weight_scale_inv"] == "skipped"
    assert fates["model.layers.3.eh_proj.weight"] in ("loaded", "renamed")
    assert "model.eh_proj.weight_scale_inv" not in dict(result.parameters)


def test_an_fp8_eh_proj_without_a_scale_is_copied_exactly(tmp_path) -> None:
    layer = [t for t in mtp_layer({"eh_proj": "F8_E4M3"}) if t[0] != "model.layers.3.eh_proj.weight_scale_inv"]
    assert sglang(target(tmp_path / "t", layer)).outcome == "loads"


def test_a_bf16_mtp_layer_in_an_fp8_target_is_refused_by_the_column_parallel_loaders(tmp_path) -> None:
    bf16 = {piece: "BF16" for piece in ("q_a", "q_b", "kv_a", "kv_b", "o_proj", "experts")}
    result = sglang(target(tmp_path / "t", mtp_layer(bf16)))
    assert result.outcome == "fails"
    assert sorted(codes(result)["dtype_refused"]) == [  # type: ignore[type-var]
        "model.layers.3.self_attn.kv_b_proj.weight",
        "model.layers.3.self_attn.q_b_proj.weight",
    ]
    refused = next(e for e in result.events if e.code == "dtype_refused")
    assert refused.params["got"] == "BF16" and refused.params["want"] == "F8_E4M3"


def test_a_bf16_linear_whose_loader_does_not_check_loads_with_an_unwritten_scale(tmp_path) -> None:
    result = sglang(target(tmp_path / "t", mtp_layer({"o_proj": "BF16"})))
    assert result.outcome == "degraded"
    assert codes(result)["random_init"] == ["model.decoder.self_attn.o_proj.weight_scale_inv"]


def test_a_missing_scale_of_a_joined_projection_leaves_the_joined_scale_unwritten(tmp_path) -> None:
    layer = [t for t in mtp_layer() if t[0] != "model.layers.3.self_attn.q_a_proj.weight_scale_inv"]
    result = sglang(target(tmp_path / "t", layer))
    assert result.outcome == "degraded"
    assert codes(result)["random_init"] == ["model.decoder.self_attn.fused_qkv_a_proj_with_mqa.weight_scale_inv"]
    fates = {name: fate for name, fate, _ in result.tensors}
    assert fates["model.layers.3.self_attn.kv_a_proj_with_mqa.weight_scale_inv"] == "skipped"


def test_a_scale_wider_than_float32_is_refused(tmp_path) -> None:
    layer = [(n, "F64" if n.endswith("kv_b_proj.weight_scale_inv") else d, s) for n, d, s in mtp_layer()]
    result = sglang(target(tmp_path / "t", layer))
    assert result.outcome == "fails"
    assert codes(result)["dtype_refused"] == ["model.layers.3.self_attn.kv_b_proj.weight_scale_inv"]


def test_per_tensor_fp8_is_not_modelled_so_its_scales_are_taken_as_they_come(tmp_path) -> None:
    per_tensor = {k: v for k, v in FP8.items() if k != "weight_block_size"}
    result = sglang(target(tmp_path / "t", mtp_layer({"kv_b": "BF16"}), quantization_config=per_tensor))
    assert "dtype_refused" not in codes(result)
    assert not any("kv_b_proj.weight_scale" in name for name, _ in result.parameters)


def test_the_cli_shows_a_bf16_mtp_layer_refused_in_an_fp8_deepseek_v3(run_cli) -> None:
    """fixtures/drafters/mtp-deepseek-v3-mtp-bf16: DeepSeek-V3's layout, its MTP layer left in BF16."""
    done = run_cli(str(FIXTURES / "mtp-deepseek-v3-mtp-bf16"), "--engine", "sglang")
    assert done.returncode == 1, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "sglang A: fails" in text
    assert (
        "model.layers.61.self_attn.kv_b_proj.weight is BF16 but SGLang's model.decoder.self_attn.kv_b_proj.weight"
        in text
    )
    assert "Downcasting not allowed" in text and "parameter.py:33-79" in text
    document = json.loads(run_cli(str(FIXTURES / "mtp-deepseek-v3"), "--engine", "sglang", "--format", "json").stdout)
    assert [e["outcome"] for e in document["engines"]] == ["loads"]
