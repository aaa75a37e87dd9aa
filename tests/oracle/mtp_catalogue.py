"""The MTP family's oracle cases, as data (mtp_cases.py builds them): each name says what it tests.

``MTP_CASES``: targets carrying their MTP layers (DeepSeek-V3 class, Kimi-K2 class, GLM-4.5), one to three nextn
layers, dense and MoE MTP layers, pieces missing or extra, FP8 block-quantized, and standalone NextN exports
beside their target.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from mtp_cases import (
    FP8_CONFIG,
    QN_FP8_CONFIG,
    E,
    H,
    MtpCase,
    Q,
    V,
    deepseek_config,
    glm_config,
    main_tensors,
    mtp_case,
    mtp_layer,
    qwen3_next_config,
    qwen3_next_mtp,
)

MAIN = main_tensors()


def _ds(name: str, about: str, tensors: list[Any], **config: Any) -> MtpCase:
    return mtp_case(name, about, deepseek_config(**config), tensors)


def _fp8(name: str, about: str, tensors: list[Any], **config: Any) -> MtpCase:
    """A block-FP8 target (DeepSeek-V3's quantization_config): SGLang builds its NextN draft with it, as its own
    loader passes it (loader.py:837-843); vLLM's CPU build has no FP8 block kernel without AMX (an environment
    raise: not comparable there by itself)."""
    return _ds(name, about, tensors, quantization_config=FP8_CONFIG, **config)


def _in_bf16(tensors: list[Any], *pieces: str) -> list[Any]:
    """``tensors`` with the FP8 weights whose names hold one of ``pieces`` stored in BF16, without their scales (a
    quantizer that left those linears out)."""
    out = []
    for name, dtype, shape in tensors:
        if any(piece in name for piece in pieces):
            if name.endswith("weight_scale_inv"):
                continue
            dtype = "BF16" if dtype == "F8_E4M3" else dtype
        out.append((name, dtype, shape))
    return out


def _glm(name: str, about: str, tensors: list[Any], **config: Any) -> MtpCase:
    return mtp_case(name, about, glm_config(**config), tensors)


def _standalone(
    name: str, about: str, tensors: list[Any], target: dict[str, Any], base: Any = deepseek_config, **config: Any
) -> MtpCase:
    return mtp_case(name, about, base(**config), tensors, target=target)


INSIDE: list[MtpCase] = [
    # ---- one MTP layer at N = num_hidden_layers
    _ds("mtp_ds_full", "a DeepSeek-V3 target with its MoE MTP layer at N=2", MAIN + mtp_layer(2)),
    _ds("mtp_ds_dropped", "the export dropped the MTP layer (announced, none stored)", MAIN),
    _ds("mtp_ds_dense_layer", "a dense MTP layer (first_k_dense_replace past it)", MAIN + mtp_layer(2, moe=False),
        first_k_dense_replace=8),
    _ds("mtp_ds_moe_freq2_odd_layer", "moe_layer_freq 2 and the MTP layer at 3: dense by index, stored as MoE",
        MAIN + mtp_layer(3), num_hidden_layers=3, moe_layer_freq=2),
    _ds("mtp_ds_depth61", "DeepSeek-V3's real depth: 61 layers, the MTP layer at 61", MAIN + mtp_layer(61),
        num_hidden_layers=61),
    _ds("mtp_ds_depth61_layer_at_62", "61 layers, the MTP layer stored at 62", MAIN + mtp_layer(62),
        num_hidden_layers=61),
    _ds("mtp_ds_depth3", "num_hidden_layers 3: the MTP layer at 3", MAIN + mtp_layer(3), num_hidden_layers=3),
    _ds("mtp_ds_layer_at_wrong_index", "the MTP layer stored at N+1 instead of N", MAIN + mtp_layer(3)),
    _ds("mtp_ds_layer_at_old_index", "the MTP layer stored at N-1 (a main layer's index)",
        MAIN + mtp_layer(1, drop=("input_layernorm",))),
    # ---- missing pieces
    _ds("mtp_ds_no_enorm", "the MTP layer without enorm", MAIN + mtp_layer(2, drop=("enorm",))),
    _ds("mtp_ds_no_hnorm", "the MTP layer without hnorm", MAIN + mtp_layer(2, drop=("hnorm",))),
    _ds("mtp_ds_no_eh_proj", "the MTP layer without eh_proj", MAIN + mtp_layer(2, drop=("eh_proj",))),
    _ds("mtp_ds_no_shared_head_norm", "the MTP layer without shared_head.norm",
        MAIN + mtp_layer(2, drop=("shared_head.norm",))),
    _ds("mtp_ds_no_shared_head_head", "the MTP layer without shared_head.head", MAIN + mtp_layer(2, head=False)),
    _ds("mtp_ds_no_layer_embed", "the MTP layer without its embed_tokens copy", MAIN + mtp_layer(2, embed=False)),
    _ds("mtp_ds_no_embed_anywhere", "no embed_tokens at all (neither the layer's nor the target's)",
        main_tensors(embed=False) + mtp_layer(2, embed=False)),
    _ds("mtp_ds_no_expert", "one routed expert missing", MAIN + mtp_layer(2, drop=("experts.1.",))),
    _ds("mtp_ds_no_shared_experts", "the shared experts missing", MAIN + mtp_layer(2, drop=("shared_experts",))),
    _ds("mtp_ds_no_router_bias", "the router's e_score_correction_bias missing",
        MAIN + mtp_layer(2, drop=("e_score_correction_bias",))),
    _ds("mtp_ds_no_attention", "the MTP layer's attention missing", MAIN + mtp_layer(2, drop=("self_attn.",))),
    _ds("mtp_ds_no_q_a_proj", "q_a_proj missing (kv_a_proj_with_mqa kept)", MAIN + mtp_layer(2, drop=("q_a_proj",))),
    _ds("mtp_ds_no_kv_a_proj", "kv_a_proj_with_mqa missing (q_a_proj kept)",
        MAIN + mtp_layer(2, drop=("kv_a_proj_with_mqa",))),
    _ds("mtp_ds_spec_weights_only", "only enorm/hnorm/eh_proj/shared_head (no decoder block)",
        MAIN + [t for t in mtp_layer(2) if any(k in t[0] for k in ("norm.", "eh_proj", "shared_head", "embed"))
                and "layernorm" not in t[0]]),
    # ---- extra or foreign pieces
    _ds("mtp_ds_extra_hidden_norm", "an extra hidden_norm in the MTP layer (EAGLE-3 naming)",
        MAIN + mtp_layer(2) + [("model.layers.2.hidden_norm.weight", "BF16", (H,))]),
    _ds("mtp_ds_extra_unknown_weight", "an unknown weight in the MTP layer's block",
        MAIN + mtp_layer(2) + [("model.layers.2.self_attn.extra_proj.weight", "BF16", (H, H))]),
    _ds("mtp_ds_extra_expert", "a third routed expert stored, two configured",
        MAIN + mtp_layer(2) + [(f"model.layers.2.mlp.experts.2.{w}_proj.weight", "BF16", (32, H) if w != "down"
                                else (H, 32)) for w in ("gate", "up", "down")]),
    # ---- shapes against the config
    _ds("mtp_ds_eh_proj_narrow", "eh_proj [H, H] instead of [H, 2H]",
        MAIN + mtp_layer(2, drop=("eh_proj",)) + [("model.layers.2.eh_proj.weight", "BF16", (H, H))]),
    _ds("mtp_ds_head_vocab_short", "shared_head.head with 128 rows for a 256-token vocabulary",
        MAIN + mtp_layer(2, head=False) + [("model.layers.2.shared_head.head.weight", "BF16", (128, H))]),
    _ds("mtp_ds_layer_embed_vocab_short", "the layer's embed_tokens with 128 rows",
        MAIN + mtp_layer(2, embed=False) + [("model.layers.2.embed_tokens.weight", "BF16", (128, H))]),
    _ds("mtp_ds_enorm_wide", "enorm of width 2H", MAIN + mtp_layer(2, drop=("enorm",))
        + [("model.layers.2.enorm.weight", "BF16", (2 * H,))]),
    # ---- num_nextn_predict_layers against the layers present
    _ds("mtp_ds_nextn2_both", "num_nextn_predict_layers 2, layers 2 and 3 stored",
        MAIN + mtp_layer(2) + mtp_layer(3), num_nextn_predict_layers=2),
    _ds("mtp_ds_nextn2_first_only", "num_nextn_predict_layers 2, only layer 2 stored",
        MAIN + mtp_layer(2), num_nextn_predict_layers=2),
    _ds("mtp_ds_nextn2_second_only", "num_nextn_predict_layers 2, only layer 3 stored",
        MAIN + mtp_layer(3), num_nextn_predict_layers=2),
    _ds("mtp_ds_nextn2_second_no_embed", "num_nextn_predict_layers 2, the second layer without embed_tokens",
        MAIN + mtp_layer(2) + mtp_layer(3, embed=False), num_nextn_predict_layers=2),
    _ds("mtp_ds_nextn3_all", "num_nextn_predict_layers 3, layers 2..4 stored, dense",
        MAIN + mtp_layer(2, moe=False) + mtp_layer(3, moe=False) + mtp_layer(4, moe=False),
        num_nextn_predict_layers=3, first_k_dense_replace=8),
    _ds("mtp_ds_nextn1_two_stored", "num_nextn_predict_layers 1, layers 2 and 3 stored",
        MAIN + mtp_layer(2) + mtp_layer(3)),
    _ds("mtp_ds_nextn_absent_layer_stored", "no num_nextn_predict_layers key, an MTP layer stored",
        MAIN + mtp_layer(2), num_nextn_predict_layers=None),
    # ---- model types and architectures
    _ds("mtp_kimi_k2_model_type", "model_type kimi_k2 (Kimi-K2: DeepseekV3ForCausalLM) with an MTP layer",
        MAIN + mtp_layer(2), model_type="kimi_k2"),
    # ---- quantized
    _fp8("mtp_ds_fp8_full", "FP8 block-quantized target and MTP layer (weight_scale_inv)",
         main_tensors() + mtp_layer(2, fp8=True)),
    _fp8("mtp_ds_fp8_dropped", "FP8 target whose quantization dropped the MTP layer", MAIN),
    _fp8("mtp_ds_fp8_no_eh_proj", "FP8 target, the MTP layer without eh_proj",
         MAIN + mtp_layer(2, fp8=True, drop=("eh_proj",))),
    _fp8("mtp_ds_fp8_bf16_layer", "FP8 target, MTP layer left in BF16 (no scales)", MAIN + mtp_layer(2)),
    _fp8("mtp_ds_fp8_no_scales", "FP8 MTP layer weights without their weight_scale_inv",
         MAIN + mtp_layer(2, fp8=True, drop=("weight_scale_inv",))),
    _fp8("mtp_ds_fp8_eh_proj_bf16", "FP8 MTP layer with eh_proj in BF16 (as the rebuilt DeepSeek-V3 layout stores it)",
         MAIN + _in_bf16(mtp_layer(2, fp8=True), "eh_proj")),
    _fp8("mtp_ds_fp8_eh_proj_unscaled", "FP8 MTP layer, eh_proj FP8 without its weight_scale_inv",
         MAIN + mtp_layer(2, fp8=True, drop=("eh_proj.weight_scale_inv",))),
    _fp8("mtp_ds_fp8_kv_b_bf16", "FP8 MTP layer, kv_b_proj alone left in BF16",
         MAIN + _in_bf16(mtp_layer(2, fp8=True), "kv_b_proj")),
    _fp8("mtp_ds_fp8_o_proj_bf16", "FP8 MTP layer, o_proj alone left in BF16 (a loader without a dtype check)",
         MAIN + _in_bf16(mtp_layer(2, fp8=True), "o_proj")),
    _fp8("mtp_ds_fp8_experts_bf16", "FP8 MTP layer, the routed and shared experts left in BF16",
         MAIN + _in_bf16(mtp_layer(2, fp8=True), "experts")),
    _fp8("mtp_ds_fp8_no_q_a_scale", "FP8 MTP layer without q_a_proj's weight_scale_inv",
         MAIN + mtp_layer(2, fp8=True, drop=("q_a_proj.weight_scale_inv",))),
    _fp8("mtp_ds_fp8_scale_f64", "FP8 MTP layer, kv_b_proj's weight_scale_inv stored in F64",
         MAIN + [(n, "F64" if n.endswith("kv_b_proj.weight_scale_inv") else d, s)
                 for n, d, s in mtp_layer(2, fp8=True)]),
    # ---- GLM-4.5
    _glm("mtp_glm_full", "a GLM-4.5 target with its MoE MTP layer", MAIN + mtp_layer(2, family="glm")),
    _glm("mtp_glm_dropped", "a GLM-4.5 target whose export dropped the MTP layer", MAIN),
    _glm("mtp_glm_no_eh_proj", "GLM-4.5, the MTP layer without eh_proj",
         MAIN + mtp_layer(2, family="glm", drop=("eh_proj",))),
    _glm("mtp_glm_no_bias", "GLM-4.5, the MTP layer's q/k/v biases missing",
         MAIN + mtp_layer(2, family="glm", drop=("_proj.bias",))),
    _glm("mtp_glm_depth46", "GLM-4.5-Air's depth: 46 layers, the MTP layer at 46",
         MAIN + mtp_layer(46, family="glm"), num_hidden_layers=46),
    _glm("mtp_glm_dense_layer", "GLM-4.5 with a dense MTP layer (first_k_dense_replace past it)",
         MAIN + mtp_layer(2, family="glm", moe=False), first_k_dense_replace=8),
    _glm("mtp_glm_nextn2_both", "GLM-4.5 with two MTP layers, both stored",
         MAIN + mtp_layer(2, family="glm") + mtp_layer(3, family="glm"), num_nextn_predict_layers=2),
    _glm("mtp_glm_no_layer_embed", "GLM-4.5, the MTP layer without its embed_tokens",
         MAIN + mtp_layer(2, family="glm", embed=False)),
]  # fmt: skip

#: The target a standalone export is served beside: a 2-layer DeepSeek-V3 with one announced MTP layer.
TARGET = deepseek_config()
STANDALONE: list[MtpCase] = [
    _standalone("mtp_nextn_export_layer0", "a NextN export (num_hidden_layers 1, the layer at 0) beside its target",
                mtp_layer(0), TARGET, num_hidden_layers=1),
    _standalone("mtp_nextn_export_layer_n", "a NextN export keeping the target's index (layer 2, num_hidden_layers 2)",
                mtp_layer(2), TARGET),
    _standalone("mtp_nextn_export_layer0_deep_target", "a NextN export at layer 0 beside a 3-layer target",
                mtp_layer(0), deepseek_config(num_hidden_layers=3), num_hidden_layers=1),
    _standalone("mtp_nextn_export_n1_layer_at_target_index",
                "an export saying num_hidden_layers 1 but storing its layer at the target's N=2",
                mtp_layer(2), TARGET, num_hidden_layers=1),
    _standalone("mtp_nextn_export_glm_layer0", "a GLM-4.5 NextN export at layer 0 beside its GLM target",
                mtp_layer(0, family="glm"), glm_config(), base=glm_config, num_hidden_layers=1),
    _standalone("mtp_nextn_export_layer0_no_embed", "a NextN export at layer 0 without embed_tokens",
                mtp_layer(0, embed=False), TARGET, num_hidden_layers=1),
]  # fmt: skip


def _published(name: str, about: str, layout: str, base: str | None = None, bf16: bool = False) -> MtpCase:
    """A rebuilt published layout from fixtures/published_drafters.py (its config and tensors as written there);
    ``bf16``: its FP8 weights stored in BF16 without their scales and quantization_config (the layout's names, in a
    form the engines can load on this CPU)."""
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.append(repo)
    from fixtures.published_drafters import BASES, MTP_LAYOUTS

    config, tensors, _ = MTP_LAYOUTS[layout]
    config = dict(config)
    tensors = list(tensors)
    if bf16:
        config.pop("quantization_config", None)
        tensors = [(n, "BF16" if d == "F8_E4M3" else d, s) for n, d, s in tensors if not n.endswith("_scale_inv")]
    target = None
    if base is not None:
        target = {**BASES[base], "hidden_size": config["hidden_size"], "vocab_size": config["vocab_size"]}
        target.pop("quantization_config", None) if bf16 else None
    return mtp_case(name, about, config, [(n, d, tuple(s)) for n, d, s in tensors], target=target)


PUBLISHED: list[MtpCase] = [
    _published("mtp_published_glm_4_5_air", "GLM-4.5-Air's layout rebuilt (fixtures/drafters/mtp-glm-4.5-air)",
               "mtp-glm-4.5-air"),
    _published("mtp_published_deepseek_v3_bf16", "DeepSeek-V3's layout rebuilt (layer 61), weights in BF16",
               "mtp-deepseek-v3", bf16=True),
    _published("mtp_published_deepseek_v3_nextn_export_bf16",
               "the lmsys-style NextN export rebuilt, weights in BF16, beside its DeepSeek-V3 target",
               "mtp-deepseek-v3-nextn-export", base="deepseek-v3", bf16=True),
    _published("mtp_published_qwen3_next_80b_a3b",
               "Qwen3-Next-80B-A3B's mtp.* block rebuilt (fixtures/drafters/mtp-qwen3-next-80b-a3b)",
               "mtp-qwen3-next-80b-a3b"),
    _published("mtp_published_qwen3_next_80b_a3b_fp8",
               "Qwen3-Next-80B-A3B-Instruct-FP8's mtp.* block rebuilt (fixtures/drafters/mtp-qwen3-next-80b-a3b-fp8)",
               "mtp-qwen3-next-80b-a3b-fp8"),
    _published("mtp_published_qwen3_next_80b_a3b_dropped",
               "Qwen3-Next-80B-A3B rebuilt, exported without its mtp.* tensors", "mtp-qwen3-next-80b-a3b-dropped"),
]  # fmt: skip


#: Both engines copy the first rows of a q/k/v shard longer than its slot (QKVParallelLinear.weight_loader narrows
#: it): read in their code, not observable here, where every tensor holds one marker value throughout.
TRUNCATED = {
    engine: "a truncated copy looks complete to the oracle (one marker value per tensor)"
    for engine in ("vllm", "sglang")
}


def _qn(name: str, about: str, tensors: list[Any], **config: Any) -> MtpCase:
    return mtp_case(name, about, qwen3_next_config(**config), tensors)


QN = qwen3_next_mtp()


#: Qwen3-Next targets carrying their MTP block under mtp.* (checked with no --base, as users check a target).
QWEN3_NEXT: list[MtpCase] = [
    _qn("mtp_qn_full", "a Qwen3-Next target with its complete mtp.* block", MAIN + QN),
    _qn("mtp_qn_dropped", "the export dropped every mtp.* tensor (0 of 15 exported)", MAIN),
    _qn("mtp_qn_no_q_proj", "mtp.* without the MTP layer's q_proj (k_proj, v_proj kept)",
        MAIN + qwen3_next_mtp(drop=("q_proj",))),
    _qn("mtp_qn_no_k_proj", "mtp.* without the MTP layer's k_proj", MAIN + qwen3_next_mtp(drop=("k_proj",))),
    _qn("mtp_qn_no_expert", "one routed expert missing", MAIN + qwen3_next_mtp(drop=("experts.1.",))),
    _qn("mtp_qn_no_expert_down", "one routed expert's down_proj missing",
        MAIN + qwen3_next_mtp(drop=("experts.1.down_proj",))),
    _qn("mtp_qn_no_shared_expert", "the shared expert missing (its gate kept)",
        MAIN + qwen3_next_mtp(drop=("shared_expert.",))),
    _qn("mtp_qn_no_shared_expert_gate", "the shared expert's gate missing",
        MAIN + qwen3_next_mtp(drop=("shared_expert_gate",))),
    _qn("mtp_qn_no_fc", "mtp.fc missing", MAIN + qwen3_next_mtp(drop=("mtp.fc.",))),
    _qn("mtp_qn_no_pre_fc_norm_hidden", "mtp.pre_fc_norm_hidden missing",
        MAIN + qwen3_next_mtp(drop=("pre_fc_norm_hidden",))),
    _qn("mtp_qn_no_final_norm", "mtp.norm missing", MAIN + qwen3_next_mtp(drop=("mtp.norm.",))),
    _qn("mtp_qn_no_q_norm", "the MTP layer's q_norm missing", MAIN + qwen3_next_mtp(drop=("q_norm",))),
    _qn("mtp_qn_no_router", "the MTP layer's router (mlp.gate) missing", MAIN + qwen3_next_mtp(drop=("mlp.gate.",))),
    _qn("mtp_qn_extra_layer", "two MTP layers stored, num_nextn_predict_layers absent (one built)",
        MAIN + qwen3_next_mtp(layers=2)),
    _qn("mtp_qn_nextn2_two_layers", "num_nextn_predict_layers 2, two MTP layers stored",
        MAIN + qwen3_next_mtp(layers=2), num_nextn_predict_layers=2),
    _qn("mtp_qn_nextn2_one_layer", "num_nextn_predict_layers 2, one MTP layer stored",
        MAIN + QN, num_nextn_predict_layers=2),
    _qn("mtp_qn_nextn1", "num_nextn_predict_layers 1 written out", MAIN + QN, num_nextn_predict_layers=1),
    _qn("mtp_qn_extra_expert", "a third routed expert stored, two configured",
        MAIN + QN + [(f"mtp.layers.0.mlp.experts.2.{w}_proj.weight", "BF16", (32, H) if w != "down" else (H, 32))
                     for w in ("gate", "up", "down")]),
    _qn("mtp_qn_unknown_weight", "an unknown weight in the MTP layer",
        MAIN + QN + [("mtp.layers.0.self_attn.extra_proj.weight", "BF16", (H, H))]),
    _qn("mtp_qn_fc_narrow", "mtp.fc [H, H] instead of [H, 2H]",
        MAIN + qwen3_next_mtp(drop=("mtp.fc.",)) + [("mtp.fc.weight", "BF16", (H, H))]),
    _qn("mtp_qn_q_proj_ungated", "q_proj without the output gate's half (heads x head_dim rows)",
        MAIN + qwen3_next_mtp(drop=("q_proj",)) + [("mtp.layers.0.self_attn.q_proj.weight", "BF16", (64, H))]),
    dataclasses.replace(
        _qn("mtp_qn_kv_heads_4", "k/v_proj stored for 4 KV heads, the config says 2", MAIN + qwen3_next_mtp(kv=4)),
        not_comparable=TRUNCATED),
    _qn("mtp_qn_expert_narrow", "routed experts of width 16, moe_intermediate_size 32",
        MAIN + qwen3_next_mtp(drop=("experts.",))
        + [(f"mtp.layers.0.mlp.experts.{e}.{w}_proj.weight", "BF16", (16, H) if w != "down" else (H, 16))
           for e in range(E) for w in ("gate", "up", "down")]),
    _qn("mtp_qn_router_experts_3", "the router stored for 3 experts, the config says 2",
        MAIN + qwen3_next_mtp(drop=("mlp.gate.",)) + [("mtp.layers.0.mlp.gate.weight", "BF16", (3, H))]),
    # Qwen3-Next-80B-A3B's rebuilt layout (fixtures/drafters/mtp-qwen3-next-80b-a3b: its config keys, 48 layers,
    # no num_nextn_predict_layers) at the widths above: vLLM's CPU MoE kernel refuses the fixture's hidden size 16
    _qn("mtp_published_qwen3_next_80b_a3b_widened",
        "Qwen3-Next-80B-A3B's rebuilt layout (48 layers, its config keys) at the oracle's widths", MAIN + QN,
        num_hidden_layers=48, rope_theta=10000000, max_position_embeddings=262144, rms_norm_eps=1e-06),
    _qn("mtp_published_qwen3_next_80b_a3b_dropped_widened",
        "the same exported without its mtp.* tensors", MAIN,
        num_hidden_layers=48, rope_theta=10000000, max_position_embeddings=262144, rms_norm_eps=1e-06),
    _qn("mtp_qn_no_target_embed_head", "the target's own embed_tokens and lm_head missing, mtp.* complete",
        main_tensors(embed=False, head=False) + QN),
]  # fmt: skip


def _qn_quant(name: str, about: str, tensors: list[Any], quantization: dict[str, Any], **config: Any) -> MtpCase:
    return _qn(name, about, tensors, quantization_config=quantization, **config)


QN_FP8 = qwen3_next_mtp(fp8=True)
#: The MTP block's quantizable linears by their checkpoint module names (vLLM's exact ignore matching).
QN_BLOCK_MODULES = [
    "mtp.fc",
    *(f"mtp.layers.0.self_attn.{p}_proj" for p in ("q", "k", "v", "o")),
    *(f"mtp.layers.0.mlp.shared_expert.{p}_proj" for p in ("gate", "up", "down")),
    "mtp.layers.0.mlp.experts",
]
QN_FP8_BLOCK_IGNORED = {
    **QN_FP8_CONFIG,
    "modules_to_not_convert": [*QN_FP8_CONFIG["modules_to_not_convert"], *QN_BLOCK_MODULES[1:]],
}
QN_FP8_FC_QUANTIZED = {
    **QN_FP8_CONFIG,
    "modules_to_not_convert": [m for m in QN_FP8_CONFIG["modules_to_not_convert"] if m != "mtp.fc"],
}
QN_FP8_PER_TENSOR = {
    "quant_method": "fp8",
    "activation_scheme": "dynamic",
    "modules_to_not_convert": QN_FP8_CONFIG["modules_to_not_convert"],
}


def _per_tensor(tensors: list[Any]) -> list[Any]:
    out = []
    for name, dtype, shape in tensors:
        if name.endswith(".weight_scale_inv"):
            out.append((name.replace("weight_scale_inv", "weight_scale"), "F32", ()))
        else:
            out.append((name, dtype, shape))
    return out


#: Quantized Qwen3-Next targets: the MTP block as Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 stores it, and the ways
#: quantized exports leave it (no scales, BF16 under an FP8 config, the block ignored, mtp.fc quantized, ...).
QWEN3_NEXT_QUANTIZED: list[MtpCase] = [
    _qn_quant("mtp_qn_fp8_published", "the MTP block as the published FP8 export stores it (mtp.fc BF16)",
              MAIN + QN_FP8, QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_no_scales", "FP8 MTP block weights without their weight_scale_inv",
              MAIN + qwen3_next_mtp(fp8=True, drop=("weight_scale_inv",)), QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_bf16_block", "the published FP8 config, the MTP block left BF16 (no scales)",
              MAIN + QN, QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_block_ignored", "FP8 config whose modules_to_not_convert names every MTP linear, block BF16",
              MAIN + QN, QN_FP8_BLOCK_IGNORED),
    _qn_quant("mtp_qn_fp8_fc_quantized", "mtp.fc quantized too (FP8 + scale), the config not ignoring it",
              MAIN + qwen3_next_mtp(fp8=True, fp8_fc=True), QN_FP8_FC_QUANTIZED),
    _qn_quant("mtp_qn_fp8_fc_stored_fp8_ignored", "mtp.fc stored FP8 + scale while the config keeps it BF16",
              MAIN + qwen3_next_mtp(fp8=True, fp8_fc=True), QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_o_proj_scale_per_tensor", "o_proj's weight_scale_inv one value instead of blocks",
              MAIN + qwen3_next_mtp(fp8=True, drop=("o_proj.weight_scale_inv",))
              + [("mtp.layers.0.self_attn.o_proj.weight_scale_inv", "F32", (1, 1))], QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_router_scale", "a weight_scale_inv for the router (which no engine quantizes)",
              MAIN + QN_FP8 + [("mtp.layers.0.mlp.gate.weight_scale_inv", "F32", (1, 4))], QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_no_expert", "FP8 MTP block, one routed expert missing",
              MAIN + qwen3_next_mtp(fp8=True, drop=("experts.1.",)), QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_dropped", "the FP8 export dropped every mtp.* tensor", MAIN, QN_FP8_CONFIG),
    _qn_quant("mtp_qn_fp8_q_proj_ignored_alone", "modules_to_not_convert names q_proj but not k/v_proj",
              MAIN + QN_FP8, {**QN_FP8_CONFIG, "modules_to_not_convert": [
                  *QN_FP8_CONFIG["modules_to_not_convert"], "mtp.layers.0.self_attn.q_proj"]}),
    _qn("mtp_qn_fp8_block_without_config", "the FP8 block with its scales, no quantization_config (lost in export)",
        MAIN + QN_FP8),
    # weight_block_size against the layers' rows: refused when the layer is built (vLLM: before its kernel is chosen)
    _qn_quant("mtp_qn_fp8_block_48", "weight_block_size 48: q_proj's 128 rows are not whole blocks (experts 48 wide)",
              MAIN + qwen3_next_mtp(fp8=True, block=48, moe=48), {**QN_FP8_CONFIG, "weight_block_size": [48, 48]},
              moe_intermediate_size=48),
    _qn_quant("mtp_qn_fp8_expert_width_48_block_32", "moe_intermediate_size 48 under 32-row blocks",
              MAIN + qwen3_next_mtp(fp8=True, block=32, moe=48), {**QN_FP8_CONFIG, "weight_block_size": [32, 32]},
              moe_intermediate_size=48),
    _qn_quant("mtp_qn_fp8_only_experts_width_48_block_32",
              "only the routed experts FP8 (attention and shared expert ignored, BF16), 48 wide under 32-row blocks",
              MAIN + [t for t in qwen3_next_mtp(fp8=True, block=32, moe=48) if "experts." in t[0]]
              + [t for t in qwen3_next_mtp(moe=48) if "experts." not in t[0]],
              {**QN_FP8_CONFIG, "weight_block_size": [32, 32], "modules_to_not_convert": [
                  *QN_FP8_CONFIG["modules_to_not_convert"], *QN_BLOCK_MODULES[1:-1]]},
              moe_intermediate_size=48),
    # per-tensor FP8 (no weight_block_size): vLLM builds it on this CPU, its MoE too (SGLang's per-tensor FP8
    # post-processing needs sgl_kernel: not comparable there)
    _qn_quant("mtp_qn_fp8_per_tensor", "FP8 per-tensor (no weight_block_size): weight_scale per linear",
              MAIN + _per_tensor(QN_FP8), QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_no_scales", "FP8 per-tensor, the MTP block's weight_scale tensors dropped",
              MAIN + [t for t in _per_tensor(QN_FP8) if not t[0].endswith("weight_scale")], QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_bf16_block", "FP8 per-tensor config, the MTP block left BF16 (no scales)",
              MAIN + QN, QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_dropped", "FP8 per-tensor target exported without any mtp.* tensor",
              MAIN, QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_fc_stored_fp8_ignored", "mtp.fc stored FP8 + weight_scale, the config keeps it BF16",
              MAIN + _per_tensor(qwen3_next_mtp(fp8=True, fp8_fc=True)), QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_router_scale", "a weight_scale for the router, FP8 per-tensor",
              MAIN + _per_tensor(QN_FP8) + [("mtp.layers.0.mlp.gate.weight_scale", "F32", ())], QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_no_expert", "FP8 per-tensor, one routed expert missing",
              MAIN + _per_tensor(qwen3_next_mtp(fp8=True, drop=("experts.1.",))), QN_FP8_PER_TENSOR),
    _qn_quant("mtp_qn_fp8_pt_fc_quantized", "FP8 per-tensor, mtp.fc quantized too and not ignored",
              MAIN + _per_tensor(qwen3_next_mtp(fp8=True, fp8_fc=True)), {**QN_FP8_PER_TENSOR, "modules_to_not_convert":
                  QN_FP8_FC_QUANTIZED["modules_to_not_convert"]}),
    _qn_quant("mtp_qn_fp8_q_proj_scale_missing", "q_proj's weight_scale_inv missing (k/v kept)",
              MAIN + qwen3_next_mtp(fp8=True, drop=("q_proj.weight_scale_inv",)), QN_FP8_CONFIG),
]  # fmt: skip

#: DeepSeek-V3.2's sparse attention (DSA, also GLM-5's glm_moe_dsa): each MTP layer builds the lightning indexer
#: (wq_b, wk and weights_proj fused into wk_weights_proj, k_norm a LayerNorm with a bias).
IDX_HEADS, IDX_DIM = 2, 16
V32 = {
    "model_type": "deepseek_v32",
    "architectures": ["DeepseekV32ForCausalLM"],
    "index_topk": 8,
    "index_n_heads": IDX_HEADS,
    "index_head_dim": IDX_DIM,
}


def indexer(layer: int, drop: tuple[str, ...] = ()) -> list[Any]:
    i = f"model.layers.{layer}.self_attn.indexer."
    out = [
        (i + "wq_b.weight", "BF16", (IDX_HEADS * IDX_DIM, Q)),
        (i + "wk.weight", "BF16", (IDX_DIM, H)),
        (i + "weights_proj.weight", "BF16", (IDX_HEADS, H)),
        (i + "k_norm.weight", "BF16", (IDX_DIM,)),
        (i + "k_norm.bias", "BF16", (IDX_DIM,)),
    ]
    return [t for t in out if not any(piece in t[0] for piece in drop)]


#: Neither engine builds DSA on this CPU (vLLM: "Sparse Attention is not supported on CPU" as the layer is built;
#: SGLang: a CUDA-only path): listed, not compared, for a machine that can.
NO_DSA = {
    "vllm": "vLLM builds no DSA (sparse attention) layer on the CPU: NotImplementedError as the drafter is built",
    "sglang": "SGLang's DSA attention takes a CUDA-only path on this machine",
}
DSA: list[MtpCase] = [
    dataclasses.replace(case, not_comparable=NO_DSA)
    for case in (
        _ds("mtp_v32_indexer", "a DeepSeek-V3.2 target (vLLM: DeepseekV32MTPModel), its MTP layer with the lightning "
            "indexer", MAIN + mtp_layer(2) + indexer(2), **V32),
        _ds("mtp_glm_dsa_indexer", "a GLM-5-class (glm_moe_dsa) target, its MTP layer with the lightning indexer",
            MAIN + mtp_layer(2) + indexer(2), **{**V32, "model_type": "glm_moe_dsa",
                                                 "architectures": ["GlmMoeDsaForCausalLM"]}),
    )
]  # fmt: skip

MTP_CASES: list[MtpCase] = INSIDE + STANDALONE + PUBLISHED + QWEN3_NEXT + QWEN3_NEXT_QUANTIZED + DSA
__all__ = ["MTP_CASES", "E", "FP8_CONFIG", "V"]
