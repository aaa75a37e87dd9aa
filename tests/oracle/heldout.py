"""The held-out split: published drafter layouts (scaled down) against targets of their real class and depth.

Written before the rules were fixed against the per-class capture and the issue #26 findings, and left as
written since: ``python tests/oracle/run.py --split held-out`` scores the rules on cases they were not fitted
to. Each case names the published layout it rebuilds (from the drafter's public config.json and tensor names)
and the target it was trained for; ``trained_outputs`` are the target-layer outputs that training captured
(SpecForge and ModelOpt train through SGLang's or HF's capture on that target's class: for a Llama/Qwen target
id k is the output of layer k; the AQ-MedAI Kimi-K2 drafter's [2, 30, 58] are DeepSeek-V3 loop indices whose
inputs are captured, the outputs of layers 1, 29, 57).
"""

from __future__ import annotations

from cases import AUX_KEY, DRAFT_VOCAB, HIDDEN, INTERMEDIATE, VOCAB, Case, Target

H, D = HIDDEN, "BF16"
NESTED = f"eagle_config.{AUX_KEY}"
L = "midlayer."
LINEARS = (
    ("self_attn.q_proj", [H, 2 * H]),
    ("self_attn.k_proj", [32, 2 * H]),
    ("self_attn.v_proj", [32, 2 * H]),
    ("self_attn.o_proj", [H, H]),
    ("mlp.gate_proj", [INTERMEDIATE, H]),
    ("mlp.up_proj", [INTERMEDIATE, H]),
    ("mlp.down_proj", [H, INTERMEDIATE]),
)
LLAMA32, LLAMA80 = Target("llama", 32), Target("llama", 80)
QWEN3_36, QWEN3_MOE_48, QWEN3_MOE_94 = Target("qwen3", 36), Target("qwen3_moe", 48), Target("qwen3_moe", 94)
QWEN2_28 = Target("qwen2", 28)
KIMI_K2 = Target("deepseek_v3", 61)
GPT_OSS_36, GPT_OSS_24 = Target("gpt_oss", 36), Target("gpt_oss", 24)


def _fp8(prefix: str = L, scales: tuple[str, ...] = ("weight_scale",)) -> dict[str, tuple[str, list[int]]]:
    out: dict[str, tuple[str, list[int]]] = {f"{prefix}{n}.weight": ("F8_E4M3", s) for n, s in LINEARS}
    out.update({f"{prefix}{n}.{scale}": ("F32", []) for n, _ in LINEARS for scale in scales})
    return out


def held(name: str, about: str, **fields: object) -> Case:
    return Case(f"heldout_{name}", about, split="held-out", **fields)  # type: ignore[arg-type]


HELD_OUT: list[Case] = [
    # ---- yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: no eagle_config, float16, draft vocabulary 32000
    held(
        "yuhuili_llama31_8b",
        "yuhuili EAGLE3-LLaMA3.1-Instruct-8B: no eagle_config, F16, against a 32-layer Llama",
        config={"eagle_config": None, "torch_dtype": "float16"},
        dtype="F16",
        trained_outputs=(1, 15, 28),
        target=LLAMA32,
    ),
    held(
        "yuhuili_llama33_70b",
        "yuhuili EAGLE3-LLaMA3.3-Instruct-70B: no eagle_config, against an 80-layer Llama",
        config={"eagle_config": None},
        trained_outputs=(1, 39, 76),
        target=LLAMA80,
    ),
    # ---- AQ-MedAI/Kimi-K2-Instruct-eagle3 (SpecForge on Kimi-K2)
    held(
        "aqmedai_kimi_k2",
        "AQ-MedAI Kimi-K2-Instruct-eagle3: eagle_config ids [2, 30, 58], head_dim, no embed, 61-layer DeepSeek-V3",
        config={NESTED: [2, 30, 58], "head_dim": 16, "max_position_embeddings": 131072},
        trained_outputs=(1, 29, 57),
        target=KIMI_K2,
    ),
    held(
        "aqmedai_kimi_k2_on_llama61",
        "the same [2, 30, 58] drafter served on a 61-layer Llama-class target (another class, same depth)",
        config={NESTED: [2, 30, 58], "head_dim": 16},
        trained_outputs=(1, 29, 57),
        target=Target("llama", 61),
    ),
    # ---- SpecForge exports
    held(
        "specforge_qwen3_8b",
        "SpecForge Qwen3-8B: eagle_config ids [1, 17, 32], head_dim 16, 36-layer Qwen3",
        config={NESTED: [1, 17, 32], "head_dim": 16},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "specforge_qwen3_8b_no_ids",
        "SpecForge Qwen3-8B export without ids (trained on the default capture), 36-layer Qwen3",
        config={NESTED: None},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "specforge_qwen3_235b",
        "SpecForge Qwen3-235B-A22B: ids [1, 46, 90], 94-layer Qwen3-MoE",
        config={NESTED: [1, 46, 90]},
        trained_outputs=(1, 46, 90),
        target=QWEN3_MOE_94,
    ),
    held(
        "specforge_qwen3_30b_a3b",
        "SpecForge Qwen3-30B-A3B: no ids, 48-layer Qwen3-MoE",
        config={NESTED: None},
        trained_outputs=(1, 23, 44),
        target=QWEN3_MOE_48,
    ),
    held(
        "specforge_qwen25_7b",
        "SpecForge Qwen2.5-7B: ids [1, 13, 24], 28-layer Qwen2",
        config={NESTED: [1, 13, 24]},
        trained_outputs=(1, 13, 24),
        target=QWEN2_28,
    ),
    held(
        "specforge_kimi_k2_ids_from_1",
        "SpecForge Kimi-K2 with ids [1, 29, 57] (the +1 form), 61-layer DeepSeek-V3",
        config={NESTED: [1, 29, 57]},
        trained_outputs=(1, 29, 57),
        target=KIMI_K2,
    ),
    held(
        "specforge_mla_kimi_k2",
        "an MLA drafter (Eagle3DeepseekV2ForCausalLM) with ids [2, 30, 58], 61-layer DeepSeek-V3",
        attention="mla",
        config={NESTED: [2, 30, 58], "model_type": "deepseek_v2"},
        trained_outputs=(1, 29, 57),
        target=KIMI_K2,
    ),
    held(
        "specforge_mla_top_level_ids",
        "an MLA drafter with the ids only at the top level, 61-layer DeepSeek-V3",
        attention="mla",
        config={NESTED: None, AUX_KEY: [2, 30, 58], "model_type": "deepseek_v2"},
        trained_outputs=(1, 29, 57),
        target=KIMI_K2,
    ),
    # ---- lmsys GPT-OSS
    held(
        "lmsys_gpt_oss_120b",
        "lmsys EAGLE3-gpt-oss-120b-bf16: ids [1, 17, 33], 36-layer GPT-OSS",
        config={NESTED: [1, 17, 33]},
        trained_outputs=(1, 17, 33),
        target=GPT_OSS_36,
    ),
    held(
        "lmsys_gpt_oss_20b_max_is_depth",
        "a GPT-OSS-20B drafter whose last id equals the depth ([2, 12, 24]), 24-layer GPT-OSS",
        config={NESTED: [2, 12, 24]},
        trained_outputs=(1, 11, 23),
        target=GPT_OSS_24,
    ),
    # ---- Tengyunw-style Qwen3 drafter: q_norm/k_norm saved by a Qwen3-layer trainer
    held(
        "qwen3_layer_q_k_norm",
        "a Qwen3-layer drafter that saved self_attn.q_norm/k_norm, under LlamaForCausalLMEagle3",
        config={NESTED: [1, 17, 32], "head_dim": 16},
        add={f"{L}self_attn.q_norm.weight": (D, [16]), f"{L}self_attn.k_norm.weight": (D, [16])},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "qwen3_arch_q_k_norm",
        "Eagle3Qwen3ForCausalLM with q_norm/k_norm stored, layers.0 names",
        config={NESTED: [1, 17, 32], "head_dim": 16, "architectures": ["Eagle3Qwen3ForCausalLM"]},
        layer_names="layers",
        add={"layers.0.self_attn.q_norm.weight": (D, [16]), "layers.0.self_attn.k_norm.weight": (D, [16])},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    # ---- head_dim that is not hidden / heads
    held(
        "head_dim_32_explicit",
        "head_dim 32 with 4 heads of a 64-wide drafter (q_proj 128 rows)",
        config={"head_dim": 32},
        add={
            f"{L}self_attn.q_proj.weight": (D, [128, 2 * H]),
            f"{L}self_attn.k_proj.weight": (D, [64, 2 * H]),
            f"{L}self_attn.v_proj.weight": (D, [64, 2 * H]),
            f"{L}self_attn.o_proj.weight": (D, [H, 128]),
        },
    ),
    held(
        "head_dim_32_stored_16",
        "head_dim 32 in the config, but q/k/v stored for head_dim 16",
        config={"head_dim": 32},
    ),
    # ---- eagle_config.layer_ids (vLLM's V2 runner key)
    held(
        "eagle_config_layer_ids",
        "ids under eagle_config.layer_ids only",
        config={NESTED: None, "eagle_config.layer_ids": [2, 16, 29]},
        trained_outputs=(1, 15, 28),
    ),
    held(
        "eagle_config_both_keys",
        "eagle_config.layer_ids [2, 16, 29] and eagle_aux_hidden_state_layer_ids [1, 15, 28]",
        config={"eagle_config.layer_ids": [2, 16, 29]},
        trained_outputs=(1, 15, 28),
    ),
    # ---- config keys left out
    held(
        "no_intermediate_size",
        "no intermediate_size key, the MLP stored 128 wide",
        config={"intermediate_size": None},
        not_comparable={
            "sglang": "SGLang's CPU build pads a weight narrower than its parameter "
            "(narrow_padded_param_and_loaded_weight only when is_cpu()) where a GPU deployment raises on the shape "
            "(added after the first run: an environment limit, as mlp_wrong_intermediate)",
        },
    ),
    held(
        "no_num_hidden_layers",
        "no num_hidden_layers key, one layer stored",
        config={"num_hidden_layers": None},
    ),
    held(
        "no_num_key_value_heads",
        "no num_key_value_heads (k/v stored for 2 kv heads)",
        config={"num_key_value_heads": None},
    ),
    held("no_rms_norm_eps", "no rms_norm_eps", config={"rms_norm_eps": None}),
    held("no_max_position_embeddings", "no max_position_embeddings", config={"max_position_embeddings": None}),
    held("no_hidden_act", "no hidden_act", config={"hidden_act": None}),
    held(
        "speculators_no_hidden_act",
        "speculators config whose transformer_layer_config has no hidden_act",
        speculators=True,
        layer_names="layers",
        config={"transformer_layer_config.hidden_act": None},
        trained_outputs=(1, 15, 28),
    ),
    held(
        "speculators_no_intermediate_size",
        "speculators config whose transformer_layer_config has no intermediate_size",
        speculators=True,
        layer_names="layers",
        config={"transformer_layer_config.intermediate_size": None},
        trained_outputs=(1, 15, 28),
    ),
    held(
        "speculators_no_transformer_layer_config",
        "speculators config without transformer_layer_config",
        speculators=True,
        layer_names="layers",
        config={"transformer_layer_config": None},
        trained_outputs=(1, 15, 28),
    ),
    # ---- ModelOpt / FP8 / compressed-tensors
    held(
        "modelopt_fp8_kv_scales",
        "ModelOpt FP8 export with k_proj.k_scale / v_proj.v_scale (FP8 KV cache)",
        config={
            "quantization_config": {
                "quant_method": "modelopt",
                "quant_algo": "FP8",
                "kv_cache_quant_algo": "FP8",
                "exclude_modules": ["lm_head", "fc"],
            }
        },
        add={
            **_fp8(scales=("weight_scale", "input_scale")),
            f"{L}self_attn.k_proj.k_scale": ("F32", []),
            f"{L}self_attn.v_proj.v_scale": ("F32", []),
        },
    ),
    held(
        "fp8_ignored_layers_full_names",
        "FP8 with ignored_layers naming model.fc and lm_head in full (fc stored BF16)",
        config={
            "quantization_config": {
                "quant_method": "fp8",
                "activation_scheme": "dynamic",
                "ignored_layers": ["model.fc", "lm_head"],
            }
        },
        add=_fp8(),
    ),
    held(
        "fp8_ignored_layers_suffix",
        "FP8 with ignored_layers naming fc as a bare suffix (fc stored BF16)",
        config={
            "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ["fc"]}
        },
        add=_fp8(),
    ),
    held(
        "fp8_all_bf16_with_config",
        "a quantization_config (fp8) over an all-BF16 checkpoint",
        config={"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}},
    ),
    held(
        "compressed_tensors_fp8",
        "compressed-tensors FP8 (weight and input scales), fc and lm_head ignored",
        config={
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "ignore": ["lm_head", "re:.*fc$"],
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True},
                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
                    }
                },
            }
        },
        add=_fp8(scales=("weight_scale", "input_scale")),
    ),
    held(
        "compressed_tensors_int8_zero_point",
        "compressed-tensors int8 asymmetric (weight_scale and weight_zero_point)",
        config={
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "format": "int-quantized",
                "ignore": ["lm_head", "re:.*fc$"],
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": False},
                    }
                },
            }
        },
        add={
            **{f"{L}{n}.weight": ("I8", s) for n, s in LINEARS},
            **{f"{L}{n}.weight_scale": ("F32", [s[0], 1]) for n, s in LINEARS},
            **{f"{L}{n}.weight_zero_point": ("I8", [s[0], 1]) for n, s in LINEARS},
        },
    ),
    # ---- naming edge cases
    held(
        "model_prefixed_midlayer_qwen3",
        "model.midlayer.* names, 36-layer Qwen3",
        prefix="model.",
        config={NESTED: [1, 17, 32]},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "two_layer_qwen3_36",
        "a two-layer drafter (layers.{0,1}) against a 36-layer Qwen3",
        layers=2,
        layer_names="layers",
        config={NESTED: [1, 17, 32]},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "embed_and_full_head_llama80",
        "own embed_tokens, draft vocabulary = vocabulary (no maps), 80-layer Llama",
        config={"draft_vocab_size": VOCAB, "eagle_config": None},
        add={"embed_tokens.weight": (D, [VOCAB, H]), "lm_head.weight": (D, [VOCAB, H])},
        drop=("d2t", "t2d"),
        trained_outputs=(1, 39, 76),
        target=LLAMA80,
    ),
    held(
        "one_vocab_no_maps_head_from_target",
        "draft_vocab_size = vocab_size, no lm_head, no maps (SGLang: the head from the target?)",
        config={"draft_vocab_size": VOCAB},
        drop=("lm_head.weight", "d2t", "t2d"),
    ),
    held(
        "draft_vocab_64_d2t_64",
        "a 64-token draft vocabulary with a matching head and d2t",
        config={"draft_vocab_size": 64},
        add={"lm_head.weight": (D, [64, H]), "d2t": ("I64", [64])},
    ),
    held(
        "aux_ids_past_depth_qwen3_moe_94",
        "ids [1, 46, 94] against a 94-layer Qwen3-MoE (the last id is the depth)",
        config={NESTED: [1, 46, 94]},
        trained_outputs=(1, 46, 93),
        target=QWEN3_MOE_94,
    ),
    held(
        "aux_ids_deepseek_last_layer",
        "ids [1, 29, 60] against a 61-layer DeepSeek-V3 (60: the last layer)",
        config={NESTED: [1, 29, 60]},
        trained_outputs=(1, 29, 60),
        target=KIMI_K2,
    ),
    held(
        "fc_two_aux_qwen2",
        "two aux ids with a 2 x hidden fc against a 28-layer Qwen2",
        config={NESTED: [1, 24]},
        add={"fc.weight": (D, [H, 2 * H])},
        trained_outputs=(1, 24),
        target=QWEN2_28,
    ),
    held(
        "speculators_qwen3_36",
        "a speculators-format Qwen3 drafter (transformer_layer_config.model_type qwen3) for a 36-layer Qwen3",
        speculators=True,
        layer_names="layers",
        config={
            "transformer_layer_config.model_type": "qwen3",
            "transformer_layer_config.head_dim": 16,
            AUX_KEY: [2, 18, 33],
        },
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
]

# ==== Widened split, session 2026-12-02: written before any rule change of this session, run and scored before
# any fix (CHANGELOG, Unreleased). Published layouts no one here built, rebuilt (scaled down) from their public
# configs and model cards, against targets of their real class and depth, and config edge cases the split lacked.
# The rules were not looked at case by case while writing them; a case that disagrees stays as written.
LLAMA40 = Target("llama", 40)
QWEN3_28, QWEN3_64 = Target("qwen3", 28), Target("qwen3", 64)
SPEC_LAYER = "transformer_layer_config"

HELD_OUT += [
    # ---- yuhuili (EAGLE repo): no eagle_config; HF capture of the inputs of layers 2, n//2, n-3
    held(
        "w2_yuhuili_dsr1_distill_llama8b",
        "rebuilt: yuhuili EAGLE3-DeepSeek-R1-Distill-LLaMA-8B (no eagle_config, draft vocab 32000, the base's "
        "llama3 rope_scaling and rope_theta 500000), 32-layer Llama",
        config={
            "eagle_config": None,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        },
        trained_outputs=(1, 15, 28),
        target=LLAMA32,
    ),
    held(
        "w2_yuhuili_vicuna13b_one_vocab_maps",
        "rebuilt: yuhuili EAGLE3-Vicuna1.3-13B: draft_vocab_size = vocab_size (32000) with d2t and t2d stored, "
        "40-layer Llama",
        config={"eagle_config": None, "draft_vocab_size": VOCAB},
        add={"lm_head.weight": (D, [VOCAB, H]), "d2t": ("I64", [VOCAB])},
        trained_outputs=(1, 19, 36),
        target=LLAMA40,
    ),
    # ---- Tengyunw / AngelSlim (SpecForge-style exports for Qwen3, no ids: SGLang's default capture)
    held(
        "w2_tengyunw_qwen3_8b",
        "rebuilt: Tengyunw qwen3_8b_eagle3 (LlamaForCausalLMEagle3, no ids, explicit head_dim), 36-layer Qwen3",
        config={"eagle_config": None, "head_dim": 16},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "w2_tengyunw_qwen3_30b_moe",
        "rebuilt: Tengyunw qwen3_30b_moe_eagle3 (no ids), 48-layer Qwen3-MoE",
        config={"eagle_config": None},
        trained_outputs=(1, 23, 44),
        target=QWEN3_MOE_48,
    ),
    held(
        "w2_angelslim_qwen3_1_7b",
        "rebuilt: AngelSlim Qwen3-1.7B_eagle3 (no ids), 28-layer Qwen3",
        config={"eagle_config": None, "head_dim": 16},
        trained_outputs=(1, 13, 24),
        target=QWEN3_28,
    ),
    held(
        "w2_angelslim_qwen3_32b",
        "rebuilt: AngelSlim Qwen3-32B_eagle3 (no ids), 64-layer Qwen3",
        config={"eagle_config": None, "head_dim": 16},
        trained_outputs=(1, 31, 60),
        target=QWEN3_64,
    ),
    # ---- RedHatAI speculators (vLLM's capture: top-level id j = output of layer j-1)
    held(
        "w2_redhat_llama31_8b_speculators_no_ids",
        "rebuilt: RedHatAI Llama-3.1-8B-Instruct-speculator.eagle3 (speculators, no aux ids: vLLM's default), "
        "32-layer Llama",
        speculators=True,
        layer_names="layers",
        config={AUX_KEY: None},
        trained_outputs=None,
        target=LLAMA32,
    ),
    held(
        "w2_redhat_llama33_70b_speculators",
        "rebuilt: RedHatAI Llama-3.3-70B-Instruct-speculator.eagle3 (speculators, top-level ids [2, 40, 77]), "
        "80-layer Llama",
        speculators=True,
        layer_names="layers",
        config={AUX_KEY: [2, 40, 77]},
        trained_outputs=(1, 39, 76),
        target=LLAMA80,
    ),
    held(
        "w2_redhat_gpt_oss_20b_speculators",
        "rebuilt: RedHatAI gpt-oss-20b-speculator.eagle3 (speculators, top-level ids [2, 12, 21]), 24-layer GPT-OSS",
        speculators=True,
        layer_names="layers",
        config={AUX_KEY: [2, 12, 21]},
        trained_outputs=(1, 11, 20),
        target=GPT_OSS_24,
    ),
    held(
        "w2_redhat_gpt_oss_120b_norm_before_fc",
        "rebuilt: RedHatAI gpt-oss-120b-speculator.eagle3 v2 (speculators, norm_before_fc with input_norm stored), "
        "36-layer GPT-OSS",
        speculators=True,
        layer_names="layers",
        config={AUX_KEY: [2, 18, 33], "norm_before_fc": True},
        add={"input_norm.weight": (D, [3 * H])},
        trained_outputs=(1, 17, 32),
        target=GPT_OSS_36,
    ),
    held(
        "w2_nm_qwen3_235b_converted_speculators",
        "rebuilt: nm-testing Qwen3-235B-A22B-EAGLE3-converted-speculators-lmsys: lmsys's SGLang ids [1, 46, 90] "
        "moved to the top level by the conversion, 94-layer Qwen3-MoE",
        speculators=True,
        layer_names="layers",
        config={AUX_KEY: [1, 46, 90], f"{SPEC_LAYER}.intermediate_size": 3 * INTERMEDIATE},
        add={
            "layers.0.mlp.gate_proj.weight": (D, [3 * INTERMEDIATE, H]),
            "layers.0.mlp.up_proj.weight": (D, [3 * INTERMEDIATE, H]),
            "layers.0.mlp.down_proj.weight": (D, [H, 3 * INTERMEDIATE]),
        },
        trained_outputs=(1, 46, 90),
        target=QWEN3_MOE_94,
    ),
    # ---- NVIDIA ModelOpt EAGLE-3 exports
    held(
        "w2_nvidia_llama33_70b_modelopt",
        "rebuilt: nvidia Llama-3.3-70B-Instruct-Eagle3 (ModelOpt: eagle_config ids [1, 39, 76], BF16), 80-layer Llama",
        config={NESTED: [1, 39, 76], "eagle_config.use_input_layernorm_in_first_layer": True},
        trained_outputs=(1, 39, 76),
        target=LLAMA80,
    ),
    held(
        "w2_nvidia_gpt_oss_120b_v2_no_aux",
        "rebuilt: nvidia gpt-oss-120b-Eagle3-v2 (eagle_config.use_aux_hidden_state false, no fc: the last layer's "
        "state only), 36-layer GPT-OSS",
        config={NESTED: None, "eagle_config.use_aux_hidden_state": False},
        drop=("fc.weight",),
        trained_outputs=None,
        target=GPT_OSS_36,
    ),
    held(
        "w2_nvidia_kimi_k2_thinking_modelopt",
        "rebuilt: nvidia Kimi-K2-Thinking-Eagle3 (ModelOpt, Llama layer, eagle_config ids [1, 29, 57]), "
        "61-layer DeepSeek-V3",
        config={NESTED: [1, 29, 57], "head_dim": 16},
        trained_outputs=(1, 29, 57),
        target=KIMI_K2,
    ),
    held(
        "w2_nvidia_kimi_k26_no_lm_head",
        "rebuilt: nvidia Kimi-K2.6-Eagle3 (no lm_head.weight, draft_vocab_size kept), 61-layer DeepSeek-V3",
        config={NESTED: [1, 29, 57]},
        drop=("lm_head.weight",),
        trained_outputs=(1, 29, 57),
        target=KIMI_K2,
    ),
    # ---- lmsys SGLang-EAGLE3 (SpecForge)
    held(
        "w2_lmsys_qwen3_30b_a3b_ids",
        "rebuilt: lmsys SGLang-EAGLE3-Qwen3-30B-A3B (eagle_config ids [1, 23, 44]), 48-layer Qwen3-MoE",
        config={NESTED: [1, 23, 44]},
        trained_outputs=(1, 23, 44),
        target=QWEN3_MOE_48,
    ),
    held(
        "w2_lmsys_gpt_oss_20b_ids_from_1",
        "rebuilt: an lmsys-style GPT-OSS-20B drafter with eagle_config ids [1, 11, 20], 24-layer GPT-OSS",
        config={NESTED: [1, 11, 20]},
        trained_outputs=(1, 11, 20),
        target=GPT_OSS_24,
    ),
    # ---- config edge cases the split lacked
    held(
        "w2_tied_embed_no_head_one_vocab",
        "tie_word_embeddings true, embed_tokens stored, no lm_head, draft vocab = vocab, no maps",
        config={"tie_word_embeddings": True, "draft_vocab_size": VOCAB},
        add={"embed_tokens.weight": (D, [VOCAB, H])},
        drop=("lm_head.weight", "d2t", "t2d"),
    ),
    held(
        "w2_tied_flag_with_embed_and_head",
        "tie_word_embeddings true with both embed_tokens and a full 256-row lm_head stored, no maps",
        config={"tie_word_embeddings": True, "draft_vocab_size": VOCAB},
        add={"embed_tokens.weight": (D, [VOCAB, H]), "lm_head.weight": (D, [VOCAB, H])},
        drop=("d2t", "t2d"),
    ),
    held(
        "w2_odd_head_dim_24",
        "head_dim 24 (heads x head_dim 96, not the hidden size 64) with q/k/v/o stored for it",
        config={"head_dim": 24},
        add={
            f"{L}self_attn.q_proj.weight": (D, [96, 2 * H]),
            f"{L}self_attn.k_proj.weight": (D, [48, 2 * H]),
            f"{L}self_attn.v_proj.weight": (D, [48, 2 * H]),
            f"{L}self_attn.o_proj.weight": (D, [H, 96]),
        },
    ),
    held(
        "w2_kv_heads_4_stored_for_2",
        "num_key_value_heads 4 in the config, k/v stored for 2 kv heads",
        config={"num_key_value_heads": 4},
    ),
    held(
        "w2_no_vocab_size",
        "no vocab_size key (LlamaConfig's default 32000), draft head and d2t for 128",
        config={"vocab_size": None},
        drop=("t2d",),
    ),
    held(
        "w2_no_draft_vocab_size_d2t_only",
        "no draft_vocab_size key, a 128-row head and d2t stored, no t2d (a trainer that saved only d2t)",
        config={"draft_vocab_size": None},
        drop=("t2d",),
    ),
    held(
        "w2_ids_both_places_qwen3_36",
        "top-level ids [2, 18, 33] (vLLM's) and eagle_config ids [1, 17, 32] (SGLang's) for the same layers, "
        "36-layer Qwen3",
        config={AUX_KEY: [2, 18, 33], NESTED: [1, 17, 32]},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "w2_ids_unsorted_llama32",
        "eagle_config ids out of order [28, 1, 15], 32-layer Llama",
        config={NESTED: [28, 1, 15]},
        trained_outputs=(1, 15, 28),
        target=LLAMA32,
    ),
    held(
        "w2_layer_ids_qwen3_36",
        "eagle_config.layer_ids [2, 18, 33] only (vLLM V2 runner's key), 36-layer Qwen3",
        config={NESTED: None, "eagle_config.layer_ids": [2, 18, 33]},
        trained_outputs=(1, 17, 32),
        target=QWEN3_36,
    ),
    held(
        "w2_use_aux_false_fc_stored",
        "eagle_config.use_aux_hidden_state false, fc still stored",
        config={NESTED: None, "eagle_config.use_aux_hidden_state": False},
        trained_outputs=None,
    ),
]

assert all(case.split == "held-out" for case in HELD_OUT)
_ = DRAFT_VOCAB  # the base drafter's draft vocabulary (128), which most cases keep
