"""Generated cases: the same drafter against targets of every class and depth, and one edit per config key.

Each name says what it tests. The capture cases' ``trained_outputs`` follow the story of where the ids were
written, as the engines' documentation and trainers say (``docs/engines.md``), not what the engines were seen
to do: ids under ``eagle_config`` were written by a trainer that captured through SGLang's code for that target
class (SpecForge), top-level ids by one that captured through vLLM's (speculators); no ids: the drafter was
trained on whatever the engine captures by default. Ids that are the default capture's indices (2, n//2, n-3)
name the inputs of those layers whoever writes them (the AQ-MedAI Kimi-K2 drafter's [2, 30, 58]; before this
story was the target class's SGLang reading, which made the held-out AQ-MedAI-on-Llama case and these disagree
on identical checkpoints).
"""

from __future__ import annotations

from cases import AUX_KEY, HIDDEN, INTERMEDIATE, Case, Target

H, D = HIDDEN, "BF16"
NESTED = f"eagle_config.{AUX_KEY}"
L = "midlayer."
CLASSES = ("llama", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss")
DEPTHS = (32, 36, 61, 94)


def sglang_outputs(model_class: str, ids: list[int], n: int) -> tuple[int, ...]:
    """The target-layer outputs SGLang's set_eagle3_layers_to_capture + forward capture for ``ids``, as documented
    per class (the story of a SpecForge drafter): Llama/Qwen add 1 and capture a layer's input; DeepSeek-V2 adds
    1 only when the first id is 1; GPT-OSS keeps the ids when their maximum is the depth."""
    if model_class == "deepseek_v3":
        loop = [i + 1 for i in ids] if ids[0] == 1 else list(ids)
    elif model_class == "gpt_oss":
        loop = list(ids) if max(ids) == n else [i + 1 for i in ids]
    else:
        loop = [i + 1 for i in ids]
    return tuple(i - 1 for i in loop)


def _capture_cases() -> list[Case]:
    out = []
    for model_class in CLASSES:
        for n in DEPTHS:
            target = Target(model_class, n)
            plus_one = [1, n // 2 - 1, n - 4]  # SpecForge's ids for SGLang's default capture
            loop = [2, n // 2, n - 3]  # the same layers as loop indices (vLLM's and SGLang's defaults)
            tag = f"{model_class}_{n}"
            out += [
                Case(
                    f"gen_capture_nested_plus_one_{tag}",
                    f"eagle_config ids {plus_one} (written for SGLang) on a {n}-layer {model_class} target",
                    config={NESTED: plus_one},
                    trained_outputs=sglang_outputs(model_class, plus_one, n),
                    target=target,
                ),
                Case(
                    f"gen_capture_nested_loop_{tag}",
                    f"eagle_config ids {loop}: the default capture's indices (the inputs of those layers, as a "
                    f"DeepSeek-V2-class or EAGLE-3 reference trainer writes them) on a {n}-layer {model_class} target",
                    config={NESTED: loop},
                    trained_outputs=tuple(j - 1 for j in loop),
                    target=target,
                ),
                Case(
                    f"gen_capture_top_level_{tag}",
                    f"top-level ids {loop} only (written for vLLM: id j = input of layer j) on a {n}-layer "
                    f"{model_class} target",
                    config={NESTED: None, AUX_KEY: loop},
                    trained_outputs=tuple(j - 1 for j in loop),
                    target=target,
                ),
                Case(
                    f"gen_capture_default_{tag}",
                    f"no ids (trained on the engine's default capture) on a {n}-layer {model_class} target",
                    config={NESTED: None},
                    trained_outputs=None,
                    target=target,
                ),
            ]
    return out


def _at_depth_cases() -> list[Case]:
    """Ids whose largest is the target's depth (the state after the last layer): GPT-OSS keeps them, the other
    classes add 1 and never reach the last."""
    out = []
    for model_class in CLASSES:
        n = 36
        ids = [2, n // 2, n]
        out.append(
            Case(
                f"gen_capture_last_is_depth_{model_class}_{n}",
                f"eagle_config ids {ids} (the last is the depth) on a {n}-layer {model_class} target",
                config={NESTED: ids},
                trained_outputs=sglang_outputs(model_class, ids, n),
                target=Target(model_class, n),
            )
        )
    return out


def _vocab_cases() -> list[Case]:
    return [
        Case(
            "gen_one_vocab_no_lm_head",
            "draft_vocab_size equal to vocab_size, no lm_head, no maps",
            config={"draft_vocab_size": 256},
            drop=("lm_head.weight", "d2t", "t2d"),
        ),
        Case(
            "gen_one_vocab_no_lm_head_with_maps",
            "draft_vocab_size equal to vocab_size, no lm_head, d2t and t2d stored",
            config={"draft_vocab_size": 256},
            drop=("lm_head.weight",),
            add={"d2t": ("I64", [256])},
        ),
    ]


def _config_cases() -> list[Case]:
    """One config key left out or set, per case: what the engines default it to."""
    keys_left_out = (
        "intermediate_size",
        "num_hidden_layers",
        "num_key_value_heads",
        "rms_norm_eps",
        "rope_theta",
        "max_position_embeddings",
        "hidden_act",
        "tie_word_embeddings",
        "torch_dtype",
        "model_type",
    )
    out = [Case(f"gen_config_without_{key}", f"config.json without {key}", config={key: None}) for key in keys_left_out]
    out += [
        Case(
            f"gen_speculators_without_{key}",
            f"speculators config whose transformer_layer_config has no {key}",
            speculators=True,
            layer_names="layers",
            config={f"transformer_layer_config.{key}": None},
            trained_outputs=(1, 15, 28),
        )
        for key in ("hidden_act", "intermediate_size", "num_key_value_heads", "rms_norm_eps", "vocab_size")
    ]
    serve_only = {
        "vllm": "vLLM validates speculators_config (validate_speculators_config) only when it serves the checkpoint "
        "itself (maybe_override_with_speculators); the oracle drives the --speculative-config path"
    }
    out += [
        Case(
            f"gen_speculators_without_{key.replace('.', '_')}",
            f"speculators config without {key}",
            speculators=True,
            layer_names="layers",
            config={key: None},
            trained_outputs=(1, 15, 28),
            not_comparable=serve_only if key.startswith("speculators_config.") else {},
        )
        for key in ("draft_vocab_size", "speculators_config.verifier", "speculators_model_type")
    ]
    out += [
        Case(
            f"gen_head_dim_{hd}",
            f"explicit head_dim {hd} with q/k/v/o stored for it",
            config={"head_dim": hd},
            add={
                f"{L}self_attn.q_proj.weight": (D, [4 * hd, 2 * H]),
                f"{L}self_attn.k_proj.weight": (D, [2 * hd, 2 * H]),
                f"{L}self_attn.v_proj.weight": (D, [2 * hd, 2 * H]),
                f"{L}self_attn.o_proj.weight": (D, [H, 4 * hd]),
            },
        )
        for hd in (8, 16, 32)
    ]
    out.append(Case("gen_head_dim_32_stored_for_16", "head_dim 32 set, q/k/v/o stored for 16", config={"head_dim": 32}))
    out += [
        Case(
            f"gen_layer_ids_{where}",
            f"eagle_config.layer_ids {ids} ({where})",
            config=config,
            # three keys naming different layers: nothing says which the drafter was trained on
            trained_outputs=None if where == "with_top_level" else tuple(j - 1 for j in ids),
        )
        for where, ids, config in (
            ("only", [2, 16, 29], {NESTED: None, "eagle_config.layer_ids": [2, 16, 29]}),
            ("with_top_level", [3, 17, 30], {"eagle_config.layer_ids": [2, 16, 29], AUX_KEY: [3, 17, 30]}),
            ("two_ids_fc3", [2, 29], {NESTED: None, "eagle_config.layer_ids": [2, 29]}),
        )
    ]
    norms = {f"{L}self_attn.q_norm.weight": (D, [16]), f"{L}self_attn.k_norm.weight": (D, [16])}
    out += [
        Case("gen_q_k_norm_llama_arch", "q_norm/k_norm stored under LlamaForCausalLMEagle3", add=norms),
        Case(
            "gen_q_k_norm_qwen3_arch",
            "Eagle3Qwen3ForCausalLM with q_norm/k_norm stored",
            config={"architectures": ["Eagle3Qwen3ForCausalLM"]},
            add=norms,
        ),
        Case(
            "gen_q_k_norm_qwen3_arch_missing",
            "Eagle3Qwen3ForCausalLM without q_norm/k_norm",
            config={"architectures": ["Eagle3Qwen3ForCausalLM"]},
        ),
        Case(
            "gen_q_norm_only", "only q_norm stored (Llama architecture)", add={f"{L}self_attn.q_norm.weight": (D, [16])}
        ),
    ]
    return out


def _fp8_layer(scales: tuple[str, ...]) -> dict[str, tuple[str, list[int]]]:
    linears = (
        ("self_attn.q_proj", [H, 2 * H]),
        ("self_attn.k_proj", [32, 2 * H]),
        ("self_attn.v_proj", [32, 2 * H]),
        ("self_attn.o_proj", [H, H]),
        ("mlp.gate_proj", [INTERMEDIATE, H]),
        ("mlp.up_proj", [INTERMEDIATE, H]),
        ("mlp.down_proj", [H, INTERMEDIATE]),
    )
    out: dict[str, tuple[str, list[int]]] = {f"{L}{n}.weight": ("F8_E4M3", s) for n, s in linears}
    out.update({f"{L}{n}.{scale}": ("F32", []) for n, _ in linears for scale in scales})
    return out


def _quantized_cases() -> list[Case]:
    fp8 = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    out = [
        Case(
            f"gen_ignored_layers_{tag}",
            f"FP8 with ignored_layers {ignored} (fc and lm_head stored BF16)",
            config={"quantization_config": {**fp8, "ignored_layers": ignored}},
            add=_fp8_layer(("weight_scale",)),
        )
        for tag, ignored in (
            ("suffixes", ["fc", "lm_head"]),
            ("full_names", ["model.fc", "lm_head"]),
            ("midlayer_suffix", ["fc", "lm_head", "midlayer.mlp.down_proj"]),
            ("layers_full_name", ["model.fc", "lm_head", "model.layers.0.mlp.down_proj"]),
            ("none", []),
        )
    ]
    out += [
        Case(
            f"gen_modelopt_exclude_{tag}",
            f"ModelOpt FP8 with exclude_modules {excluded}",
            config={
                "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": excluded}
            },
            add=_fp8_layer(("weight_scale", "input_scale")),
        )
        for tag, excluded in (("wildcards", ["lm_head", "*fc*"]), ("full_names", ["lm_head", "model.fc"]))
    ]
    out.append(
        Case(
            "gen_modelopt_fp8_kv_scales",
            "ModelOpt FP8 with FP8 KV cache: k_proj.k_scale and v_proj.v_scale stored",
            config={
                "quantization_config": {
                    "quant_method": "modelopt",
                    "quant_algo": "FP8",
                    "kv_cache_quant_algo": "FP8",
                    "exclude_modules": ["lm_head", "fc"],
                }
            },
            add={
                **_fp8_layer(("weight_scale", "input_scale")),
                f"{L}self_attn.k_proj.k_scale": ("F32", []),
                f"{L}self_attn.v_proj.v_scale": ("F32", []),
            },
        )
    )
    ct = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "ignore": ["lm_head", "re:.*fc$"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True},
            }
        },
    }
    out += [
        Case(
            "gen_compressed_tensors_fp8_weight_only",
            "compressed-tensors FP8 weights with weight_scale",
            config={"quantization_config": ct},
            add=_fp8_layer(("weight_scale",)),
        ),
        Case(
            "gen_compressed_tensors_config_bf16_weights",
            "a compressed-tensors quantization_config over BF16 weights",
            config={"quantization_config": ct},
        ),
        Case(
            "gen_fp8_config_bf16_weights",
            "an fp8 quantization_config over BF16 weights (every tensor BF16)",
            config={"quantization_config": fp8},
        ),
    ]
    return out


def _mla_cases() -> list[Case]:
    deepseek = Target("deepseek_v3", 61)
    return [
        Case(
            "gen_mla_top_level_ids",
            "an MLA drafter with ids only at the top level, 61-layer DeepSeek-V3",
            attention="mla",
            config={NESTED: None, AUX_KEY: [2, 30, 58], "model_type": "deepseek_v2"},
            trained_outputs=(1, 29, 57),
            target=deepseek,
        ),
        Case(
            "gen_mla_top_level_two_ids",
            "an MLA drafter with two top-level ids and a 3-wide fc",
            attention="mla",
            config={NESTED: None, AUX_KEY: [2, 58], "model_type": "deepseek_v2"},
            trained_outputs=(1, 57),
            target=deepseek,
        ),
        Case(
            "gen_mla_nested_ids_61",
            "an MLA drafter with eagle_config ids [2, 30, 58], 61-layer DeepSeek-V3",
            attention="mla",
            config={NESTED: [2, 30, 58], "model_type": "deepseek_v2"},
            trained_outputs=(1, 29, 57),
            target=deepseek,
        ),
        Case(
            "gen_mla_no_ids_61",
            "an MLA drafter without ids, 61-layer DeepSeek-V3",
            attention="mla",
            config={NESTED: None, "model_type": "deepseek_v2"},
            trained_outputs=None,
            target=deepseek,
        ),
    ]


GENERATED: list[Case] = [
    *_capture_cases(),
    *_at_depth_cases(),
    *_vocab_cases(),
    *_config_cases(),
    *_quantized_cases(),
    *_mla_cases(),
]
