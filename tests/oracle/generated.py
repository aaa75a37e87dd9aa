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

from cases import AUX_KEY, HIDDEN, INTERMEDIATE, VOCAB, Case, Target

H, D = HIDDEN, "BF16"
NESTED = f"eagle_config.{AUX_KEY}"
L = "midlayer."
CLASSES = ("llama", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss")
DEPTHS = (32, 36, 61, 94)


def sglang_outputs(model_class: str, ids: list[int], n: int) -> tuple[int, ...]:
    """The target-layer outputs SGLang's set_eagle3_layers_to_capture + forward capture for ``ids``, as documented
    per class (the story of a SpecForge drafter): Llama/Qwen add 1 and capture a layer's input; DeepSeek-V2 adds
    1 only when the first id is 1, and never reaches index n (DeepseekV2Model.forward, as SGLang's capture of
    gen_capture_last_is_depth_deepseek_v3_36 shows); GPT-OSS keeps the ids when their maximum is the depth."""
    if model_class == "deepseek_v3":
        loop = [i for i in ([i + 1 for i in ids] if ids[0] == 1 else list(ids)) if i < n]
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


# ---- the eagle3 family's variants (issue #27): multi-layer, EAGLE 3.1, MLA

#: Ids both engines capture as trained: eagle_config's for SGLang, the top level's for vLLM's V2 runner.
BOTH_IDS = {AUX_KEY: [2, 16, 29]}
MLA_TYPE = {"model_type": "deepseek_v2"}  # deepseek_v3 drafts become vLLM's MTP model
FC_NORMS = {f"fc_norm.{i}.weight": (D, [H]) for i in range(3)}


def _later(layers: int, names: str, norm: str) -> tuple[str, ...]:
    """The norm ``norm`` of every layer after the first, as the naming ``names`` stores it."""
    prefix = {"layers": "layers.{i}.", "midlayer": "midlayer.{i}.", "additional_layers": "additional_layers.{j}."}
    return tuple(prefix[names].format(i=i, j=i - 1) + f"{norm}.weight" for i in range(1, layers))


def _multi_layer_cases() -> list[Case]:
    out = []
    for layers in (2, 3):
        for names in ("layers", "additional_layers"):
            for norm in ("hidden_norm", "input_layernorm"):
                out.append(
                    Case(
                        f"gen_multi{layers}_{names}_no_later_{norm}",
                        f"{layers} layers named {names}, the layers after the first without {norm} (vLLM's never "
                        "read hidden_norm, SGLang's never read input_layernorm)",
                        layers=layers,
                        layer_names=names,
                        drop=_later(layers, names, norm),
                        config=BOTH_IDS,
                    )
                )
    out += [
        Case(
            "gen_multi2_midlayer_no_later_hidden_norm",
            "2 layers as midlayer.* and midlayer.1.*, layer 1 without hidden_norm",
            layers=2,
            drop=_later(2, "midlayer", "hidden_norm"),
            config=BOTH_IDS,
        ),
        Case(
            "gen_multi2_layers_all_norms",
            "2 layers named layers.{i}, every norm stored (each engine loads one norm of layer 1 unread)",
            layers=2,
            layer_names="layers",
            config=BOTH_IDS,
        ),
        Case(
            "gen_multi2_later_layer_first_width",
            "2 layers, layer 1's q/k/v 2 x hidden wide like layer 0's (later layers read hidden)",
            layers=2,
            layer_names="layers",
            add={
                f"layers.1.self_attn.{p}.weight": (D, [r, 2 * H])
                for p, r in (("q_proj", H), ("k_proj", 32), ("v_proj", 32))
            },
            config=BOTH_IDS,
        ),
        Case(
            "gen_multi3_config_two_layers",
            "3 layers stored, num_hidden_layers 2 (layer 2 has no module)",
            layers=3,
            layer_names="layers",
            config={**BOTH_IDS, "num_hidden_layers": 2},
        ),
        Case(
            "gen_multi2_mla_no_later_hidden_norm",
            "MLA with 2 layers, layer 1 without hidden_norm (vLLM builds both; SGLang's MLA drafter only one)",
            attention="mla",
            layers=2,
            layer_names="layers",
            drop=_later(2, "layers", "hidden_norm"),
            config={**BOTH_IDS, **MLA_TYPE},
        ),
        Case(
            "gen_multi3_mla_no_later_input_layernorm",
            "MLA with 3 layers, layers 1 and 2 without input_layernorm",
            attention="mla",
            layers=3,
            layer_names="layers",
            drop=_later(3, "layers", "input_layernorm"),
            config={**BOTH_IDS, **MLA_TYPE},
        ),
    ]
    return out


def _eagle31_cases() -> list[Case]:
    return [
        Case(
            "gen_v31_fc_norm_norm_output",
            "EAGLE 3.1: fc_norm and norm_output true, fc_norm.{0,1,2}",
            config={**BOTH_IDS, "fc_norm": True, "norm_output": True},
            add=FC_NORMS,
        ),
        Case(
            "gen_v31_use_aux_norm",
            "the legacy use_aux_norm flag with fc_norm.{0,1,2} (SGLang reads it, vLLM knows only fc_norm)",
            config={**BOTH_IDS, "use_aux_norm": True},
            add=FC_NORMS,
        ),
        Case(
            "gen_v31_use_aux_norm_legacy_names",
            "use_aux_norm with the legacy aux_norm_low/mid/high names",
            config={**BOTH_IDS, "use_aux_norm": True},
            add={f"aux_norm_{n}.weight": (D, [H]) for n in ("low", "mid", "high")},
        ),
        Case(
            "gen_v31_fc_norm_in_eagle_config",
            "fc_norm set only inside eagle_config, with fc_norm.{0,1,2} (both engines read the top-level key)",
            config={**BOTH_IDS, "eagle_config.fc_norm": True},
            add=FC_NORMS,
        ),
        Case(
            "gen_v31_norm_before_fc_and_fc_norm",
            "norm_before_fc (input_norm) and fc_norm together",
            config={**BOTH_IDS, "eagle_config.norm_before_fc": True, "fc_norm": True},
            add={**FC_NORMS, "input_norm.weight": (D, [3 * H])},
        ),
        Case(
            "gen_v31_norm_before_fc_top_level",
            "norm_before_fc only at the top level, with input_norm",
            config={**BOTH_IDS, "norm_before_fc": True},
            add={"input_norm.weight": (D, [3 * H])},
        ),
        Case(
            "gen_v31_norm_before_fc_nested_false_wins",
            "norm_before_fc true at the top level, false in eagle_config (read first), with input_norm",
            config={**BOTH_IDS, "norm_before_fc": True, "eagle_config.norm_before_fc": False},
            add={"input_norm.weight": (D, [3 * H])},
        ),
        Case(
            "gen_v31_fc_norm_two_ids",
            "fc_norm with two aux ids (fc_norm.{0,1} built) and three fc_norm tensors",
            config={AUX_KEY: [2, 29], NESTED: [1, 28], "fc_norm": True},
            add={**FC_NORMS, "fc.weight": (D, [H, 2 * H])},
            trained_outputs=(1, 28),
        ),
        Case(
            "gen_v31_fc_norm_missing_tensors",
            "fc_norm true but no fc_norm tensors stored",
            config={**BOTH_IDS, "fc_norm": True},
        ),
        Case(
            "gen_v31_mla_fc_norm_norm_output",
            "an EAGLE 3.1 MLA drafter (kimi-k2.6-eagle3.1-mla style): fc_norm, norm_output",
            attention="mla",
            layer_names="layers",
            config={**BOTH_IDS, **MLA_TYPE, "fc_norm": True, "norm_output": True},
            add=FC_NORMS,
        ),
        Case(
            "gen_v31_mla_use_aux_norm",
            "an MLA drafter with use_aux_norm and fc_norm.{0,1,2}",
            attention="mla",
            layer_names="layers",
            config={**BOTH_IDS, **MLA_TYPE, "use_aux_norm": True},
            add=FC_NORMS,
        ),
        Case(
            "gen_v31_mla_norm_before_fc",
            "an MLA drafter with norm_before_fc and input_norm (neither MLA drafter builds input_norm)",
            attention="mla",
            layer_names="layers",
            config={**BOTH_IDS, **MLA_TYPE, "norm_before_fc": True},
            add={"input_norm.weight": (D, [3 * H])},
        ),
        Case(
            "gen_v31_mla_legacy_aux_norm_names",
            "an MLA drafter with use_aux_norm and aux_norm_low/mid/high (no legacy map in either MLA loader)",
            attention="mla",
            layer_names="layers",
            config={**BOTH_IDS, **MLA_TYPE, "use_aux_norm": True},
            add={f"aux_norm_{n}.weight": (D, [H]) for n in ("low", "mid", "high")},
        ),
        Case(
            "gen_mla_use_aux_false",
            "an MLA drafter with eagle_config.use_aux_hidden_state false (vLLM's MLA drafter builds fc anyway)",
            attention="mla",
            layer_names="layers",
            config={**BOTH_IDS, **MLA_TYPE, "eagle_config.use_aux_hidden_state": False},
        ),
        Case(
            "gen_mla_mask_hidden",
            "an MLA drafter carrying a parallel-drafting mask_hidden",
            attention="mla",
            layer_names="layers",
            config={**BOTH_IDS, **MLA_TYPE},
            add={"mask_hidden": (D, [1, 3 * H])},
        ),
    ]


def _kimi_k25_cases() -> list[Case]:
    """MLA drafters as published for Kimi-K2.5/K2.6 against a 61-layer Kimi-K2.5 target (KimiK25ForConditionalGeneration
    over its DeepSeek-V3-class text model): the rebuilt lightseekorg/kimi-k2.5-eagle3-mla and kimi-k2.6-eagle3.1-mla
    layouts (fixtures/drafters/), and the Llama-attention drafters served for the same target."""
    k25 = Target("kimi_k25", 61)
    k25_mla = {"model_type": "kimi_k2", NESTED: [2, 30, 58], "draft_vocab_size": VOCAB}
    full_head = {"lm_head.weight": (D, [VOCAB, H])}
    return [
        Case(
            "gen_k25_mla_eagle3",
            "the kimi-k2.5-eagle3-mla layout (MLA, layers.0.*, ids [2, 30, 58], full draft vocabulary, no d2t/t2d)",
            attention="mla",
            layer_names="layers",
            config=k25_mla,
            drop=("d2t", "t2d"),
            add=full_head,
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_mla_eagle31",
            "the kimi-k2.6-eagle3.1-mla layout: fc_norm and norm_output, ids [1, 29, 57]",
            attention="mla",
            layer_names="layers",
            config={**k25_mla, NESTED: [1, 29, 57], "fc_norm": True, "norm_output": True},
            drop=("d2t", "t2d"),
            add={**full_head, **FC_NORMS},
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_mla_draft_vocab",
            "an MLA drafter with a 128-token draft vocabulary and d2t, on Kimi-K2.5",
            attention="mla",
            layer_names="layers",
            config={"model_type": "kimi_k2", NESTED: [2, 30, 58]},
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_mla_top_level_ids",
            "an MLA drafter with top-level ids [2, 30, 58] only, on Kimi-K2.5",
            attention="mla",
            layer_names="layers",
            config={"model_type": "kimi_k2", NESTED: None, AUX_KEY: [2, 30, 58]},
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_mla_midlayer_names",
            "an MLA drafter stored as midlayer.*, on Kimi-K2.5",
            attention="mla",
            config={"model_type": "kimi_k2", NESTED: [2, 30, 58]},
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_llama_specforge",
            "a SpecForge Llama-attention drafter (AQ-MedAI Kimi-K25-eagle3 style, ids [2, 30, 58]) on Kimi-K2.5",
            config={NESTED: [2, 30, 58]},
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_llama_no_ids",
            "a Llama-attention drafter without ids on Kimi-K2.5 (each engine's default capture)",
            config={NESTED: None},
            trained_outputs=None,
            target=k25,
            family="eagle3_k25",
        ),
        Case(
            "gen_k25_mla_two_layers",
            "an MLA drafter with 2 layers on Kimi-K2.5 (SGLang's MLA drafter has one)",
            attention="mla",
            layers=2,
            layer_names="layers",
            config={"model_type": "kimi_k2", NESTED: [2, 30, 58]},
            trained_outputs=(1, 29, 57),
            target=k25,
            family="eagle3_k25",
        ),
    ]


def _runtime_cases() -> list[Case]:
    """Issue #27 item 3, runtime semantics beyond weights: where each vLLM runner reads the aux ids (these are also
    compared under vLLM's V1 runner, the ``vllm_v1`` variant of v1_cases.py; they make the two runners differ), target
    classes an engine refuses for EAGLE-3, drafter head geometry against the target's, and d2t edge cases."""
    deepseek, llama = Target("deepseek_v3", 61), Target("llama", 32)
    out = [
        Case(
            "gen_runner_layer_ids_only_llama_32",
            "eagle_config.layer_ids [5, 10, 20] only: the V2 runner reads them, the V1 runner its default",
            config={NESTED: None, "eagle_config.layer_ids": [5, 10, 20]},
            trained_outputs=(4, 9, 19),
            target=llama,
        ),
        Case(
            "gen_runner_nested_non_default_deepseek_61",
            "eagle_config ids [3, 12, 25] only, 61-layer DeepSeek-V3: the V1 runner reads them, V2 its default",
            config={NESTED: [3, 12, 25]},
            trained_outputs=(2, 11, 24),
            target=deepseek,
        ),
        Case(
            "gen_runner_top_level_and_nested_llama_32",
            "top-level [4, 12, 24] and eagle_config [1, 15, 28]: both vLLM runners read the top level first, "
            "SGLang eagle_config (two keys naming different layers: nothing says which it was trained on)",
            config={AUX_KEY: [4, 12, 24]},
            trained_outputs=None,
            target=llama,
        ),
        Case(
            "gen_runner_narrow_no_embed_llama_32",
            "a 32-wide drafter without embed_tokens on a 64-wide target: V2 shares the target's embedding "
            "regardless, V1 keeps its own (unloaded)",
            hidden=32,
            trained_outputs=(1, 15, 28),
            target=llama,
        ),
    ]
    out.append(
        Case(
            "gen_use_aux_false_top_level_ids_gemma2_32",
            "eagle_config.use_aux_hidden_state false, top-level ids [4, 12, 24], no fc, on a 32-layer gemma2 target: "
            "no capture is set up, so neither the ids nor the class (which refuses EAGLE-3 capture) matter",
            config={"eagle_config.use_aux_hidden_state": False, AUX_KEY: [4, 12, 24]},
            drop=("fc.weight",),
            trained_outputs=None,
            target=Target("gemma2", 32),
            not_comparable={
                "vllm": "worker_vllm.py sets the capture up whatever use_aux_hidden_state says, where vLLM's V2 runner "
                "does so only when requires_aux_hidden_states (model_runner.py:412); the vllm_v2 and vllm_v1 "
                "variants run their runner's own condition (model_runner.py:412, gpu_model_runner.py:5170)"
            },
        )
    )
    for model_class in ("gemma2", "mixtral", "glm4_moe"):
        out.append(
            Case(
                f"gen_target_class_{model_class}_32",
                f"a drafter for a 32-layer {model_class} target (a class an engine may refuse EAGLE-3 for)",
                config={NESTED: None},
                trained_outputs=None,
                target=Target(model_class, 32),
            )
        )
    out += [
        Case(
            "gen_kv_heads_4_against_target_2",
            "a drafter with 4 KV heads (k/v stored for them) against a target with 2",
            config={"num_key_value_heads": 4},
            add={f"{L}self_attn.k_proj.weight": (D, [H, 2 * H]), f"{L}self_attn.v_proj.weight": (D, [H, 2 * H])},
        ),
        Case(
            "gen_head_dim_32_kv_heads_1_against_target_16_2",
            "head_dim 32 with one KV head (q/k/v/o stored for it) against a target of head_dim 16, 2 KV heads",
            config={"head_dim": 32, "num_key_value_heads": 1},
            add={
                f"{L}self_attn.q_proj.weight": (D, [128, 2 * H]),
                f"{L}self_attn.k_proj.weight": (D, [32, 2 * H]),
                f"{L}self_attn.v_proj.weight": (D, [32, 2 * H]),
                f"{L}self_attn.o_proj.weight": (D, [H, 128]),
            },
        ),
        Case("gen_d2t_int32", "d2t stored as I32", add={"d2t": ("I32", [128])}),
        Case("gen_d2t_longer_than_head", "d2t of 160 entries for a 128-row draft head", add={"d2t": ("I64", [160])}),
        Case("gen_d2t_shorter_than_head", "d2t of 96 entries for a 128-row draft head", add={"d2t": ("I64", [96])}),
        Case("gen_t2d_without_d2t", "t2d stored, d2t left out (draft vocabulary 128)", drop=("d2t",)),
        Case(
            "gen_one_vocab_d2t_no_t2d",
            "draft_vocab_size = vocab_size with a 256-row head and a 256-entry d2t, no t2d",
            config={"draft_vocab_size": 256},
            add={"lm_head.weight": (D, [256, H]), "d2t": ("I64", [256])},
            drop=("t2d",),
        ),
    ]
    return out


GENERATED: list[Case] = [
    *_capture_cases(),
    *_at_depth_cases(),
    *_vocab_cases(),
    *_config_cases(),
    *_quantized_cases(),
    *_mla_cases(),
    *_multi_layer_cases(),
    *_eagle31_cases(),
    *_runtime_cases(),
]
#: Run by the oracle's eagle3_k25 family (worker_k25_<engine>.py): the target is a Kimi-K2.5 wrapper.
K25_CASES: list[Case] = _kimi_k25_cases()
