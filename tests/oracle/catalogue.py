"""The oracle's cases, as data: add a ``Case`` here and the job runs it on every engine (see README.md).

``CASES`` is the hand-written cases below, the generated ones (generated.py) and the held-out split (heldout.py).
"""

from __future__ import annotations

import json

from cases import (
    AUX_KEY,
    DRAFT_VOCAB,
    HIDDEN,
    INTERMEDIATE,
    JSON_NULL,
    KIMI_ROPE,
    VOCAB,
    Case,
    base_config,
    tensors_of,
)
from generated import GENERATED
from heldout import HELD_OUT

H, D = HIDDEN, "BF16"
NESTED = f"eagle_config.{AUX_KEY}"
#: The Llama layer's tensors under the base drafter's midlayer (for drops and dtype edits).
LAYER = "midlayer."
NO_AUX_IDS = {NESTED: None}
#: The layer's linear weights and their shapes, for the quantized cases.
FP8_LAYER = (
    ("self_attn.q_proj", [H, 2 * H]),
    ("self_attn.k_proj", [32, 2 * H]),
    ("self_attn.v_proj", [32, 2 * H]),
    ("self_attn.o_proj", [H, H]),
    ("mlp.gate_proj", [INTERMEDIATE, H]),
    ("mlp.up_proj", [INTERMEDIATE, H]),
    ("mlp.down_proj", [H, INTERMEDIATE]),
)

WRITTEN: list[Case] = [
    # ---- layout and naming
    Case("basic", "one Llama layer, SpecForge names, bf16, aux ids in eagle_config"),
    Case("layers0_names", "the layer stored as layers.0.* (speculators naming)", layer_names="layers"),
    Case("model_prefixed", "every name under model.", prefix="model."),
    Case("model_prefixed_layers0", "model.layers.0.* names", prefix="model.", layer_names="layers"),
    Case("two_layers_midlayer_names", "two layers: midlayer.* and midlayer.1.*", layers=2),
    Case("two_layers_layers_names", "two layers: layers.0.* and layers.1.*", layers=2, layer_names="layers"),
    Case(
        "two_layers_additional_names",
        "two layers: midlayer.* and additional_layers.0.*",
        layers=2,
        layer_names="additional_layers",
    ),
    Case("three_layers_layers_names", "three layers as layers.{i}.*", layers=3, layer_names="layers"),
    Case(
        "config_two_layers_one_stored",
        "num_hidden_layers 2, one layer stored",
        config={"num_hidden_layers": 2},
    ),
    Case(
        "config_one_layer_two_stored",
        "num_hidden_layers 1, two layers stored",
        layers=2,
        layer_names="layers",
        config={"num_hidden_layers": 1},
    ),
    # ---- MLA attention
    Case("mla_basic", "an MLA (Kimi/DeepSeek-style) layer under midlayer.*", attention="mla"),
    Case("mla_layers0_names", "an MLA layer under layers.0.*", attention="mla", layer_names="layers"),
    Case(
        "mla_labelled_llama_attention",
        "Eagle3DeepseekV2ForCausalLM config over Llama q/k/v/o tensors",
        config={
            "architectures": ["Eagle3DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v3",
            "q_lora_rank": 32,
            "kv_lora_rank": 32,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 16,
            "rope_scaling": KIMI_ROPE,
        },
    ),
    Case(
        "mla_kimi_model_type",
        "an MLA layer with model_type kimi_k2 (vLLM turns deepseek_v3 drafts into MTP)",
        attention="mla",
        config={"model_type": "kimi_k2"},
    ),
    Case("mla_two_layers", "MLA with num_hidden_layers 2", attention="mla", layers=2, layer_names="layers"),
    Case(
        "mla_no_q_lora",
        "MLA without q_lora_rank (q_proj instead of q_a/q_b)",
        attention="mla",
        config={"q_lora_rank": None},
        drop=tuple(f"{LAYER}self_attn.{n}.weight" for n in ("q_a_proj", "q_a_layernorm", "q_b_proj")),
        add={f"{LAYER}self_attn.q_proj.weight": (D, [4 * 24, 2 * H])},
    ),
    # ---- aux layer ids
    Case("aux_absent", "eagle_config without aux ids", config=NO_AUX_IDS, trained_outputs=None),
    Case("aux_no_eagle_config", "no eagle_config at all", config={"eagle_config": None}, trained_outputs=None),
    Case("aux_top_level", "aux ids only at the top level", config={**NO_AUX_IDS, AUX_KEY: [1, 15, 28]}),
    Case("aux_both_agree", "the same aux ids at the top level and in eagle_config", config={AUX_KEY: [1, 15, 28]}),
    Case("aux_both_differ", "top-level ids differ from eagle_config's", config={AUX_KEY: [2, 16, 29]}),
    # an empty list: vLLM reads it as unset (its default); SGLang passes eagle_config's on and captures no layer
    Case("aux_empty_nested", "eagle_config's aux ids an empty list", config={NESTED: []}, trained_outputs=None),
    Case(
        "aux_empty_top_level",
        "aux ids an empty list at the top level, none in eagle_config",
        config={**NO_AUX_IDS, AUX_KEY: []},
        trained_outputs=None,
    ),
    Case("aux_two_ids_fc3", "two aux ids, fc 3 x hidden wide", config={NESTED: [1, 28]}, trained_outputs=(1, 28)),
    Case(
        "aux_two_ids_fc2",
        "two aux ids, fc 2 x hidden wide",
        config={NESTED: [1, 28]},
        add={"fc.weight": (D, [H, 2 * H])},
        trained_outputs=(1, 28),
    ),
    Case(
        "aux_four_ids_fc4",
        "four aux ids, fc 4 x hidden wide",
        config={NESTED: [1, 10, 20, 28]},
        add={"fc.weight": (D, [H, 4 * H])},
        trained_outputs=(1, 10, 20, 28),
    ),
    Case(
        "aux_four_ids_fc3",
        "four aux ids, fc 3 x hidden wide",
        config={NESTED: [1, 10, 20, 28]},
        trained_outputs=(1, 10, 20, 28),
    ),
    Case(
        "aux_top_level_two_ids_fc2",
        "two aux ids at the top level only, fc 2 x hidden",
        config={**NO_AUX_IDS, AUX_KEY: [2, 29]},
        add={"fc.weight": (D, [H, 2 * H])},
        trained_outputs=(1, 28),
    ),
    Case(
        "aux_nested_past_last_layer",
        "an id past the 32-layer target's last layer",
        config={NESTED: [1, 15, 40]},
        trained_outputs=(1, 15, 40),
    ),
    Case(
        "aux_nested_last_layer",
        "the id 31 (the last of 32 layers)",
        config={NESTED: [1, 15, 31]},
        trained_outputs=(1, 15, 31),
    ),
    Case("aux_nested_30", "the id 30", config={NESTED: [1, 15, 30]}, trained_outputs=(1, 15, 30)),
    Case(
        "aux_top_level_32",
        "a top-level id 32 in vLLM's convention (the last layer's output)",
        config={**NO_AUX_IDS, AUX_KEY: [2, 16, 32]},
        trained_outputs=(1, 15, 31),
    ),
    Case(
        "aux_top_level_past_end",
        "a top-level id 33 (past the end)",
        config={**NO_AUX_IDS, AUX_KEY: [2, 16, 33]},
        trained_outputs=(1, 15, 32),
    ),
    Case("aux_duplicate_ids", "a repeated aux id", config={NESTED: [15, 15, 28]}, trained_outputs=(15, 15, 28)),
    Case("aux_negative_id", "the id -1 (the embeddings)", config={NESTED: [-1, 15, 28]}, trained_outputs=(-1, 15, 28)),
    Case(
        "use_aux_false_with_fc",
        "eagle_config.use_aux_hidden_state false, fc stored",
        config={"eagle_config.use_aux_hidden_state": False},
        trained_outputs=None,
    ),
    Case(
        "use_aux_false_no_fc",
        "eagle_config.use_aux_hidden_state false, no fc",
        config={"eagle_config.use_aux_hidden_state": False},
        drop=("fc.weight",),
        trained_outputs=None,
    ),
    # The engines read the flag by its truth value (vLLM eagle3_utils.py:15, llama_eagle3.py:180; SGLang
    # spec_aux_hidden_state.py:189, attention_backend_setup.py:54): null and 0 are false.
    Case(
        "use_aux_null_with_fc",
        "eagle_config.use_aux_hidden_state null, fc stored",
        config={"eagle_config.use_aux_hidden_state": JSON_NULL},
        trained_outputs=None,
    ),
    Case(
        "use_aux_zero_no_fc",
        "eagle_config.use_aux_hidden_state 0, no fc",
        config={"eagle_config.use_aux_hidden_state": 0},
        drop=("fc.weight",),
        trained_outputs=None,
    ),
    Case(
        "num_aux_two_fc2",
        "num_aux_hidden_states 2, two ids, fc 2 x hidden",
        config={"num_aux_hidden_states": 2, NESTED: [1, 28]},
        add={"fc.weight": (D, [H, 2 * H])},
        trained_outputs=(1, 28),
    ),
    # ---- d2t / t2d and vocabularies
    Case("no_d2t", "no d2t (draft vocabulary 128 of 256)", drop=("d2t",)),
    Case("no_t2d", "no t2d", drop=("t2d",)),
    Case("no_d2t_no_t2d", "neither vocabulary map", drop=("d2t", "t2d")),
    Case("d2t_bf16", "d2t stored as BF16", add={"d2t": ("BF16", [DRAFT_VOCAB])}),
    Case("d2t_f32", "d2t stored as F32", add={"d2t": ("F32", [DRAFT_VOCAB])}),
    Case("d2t_i32", "d2t stored as I32", add={"d2t": ("I32", [DRAFT_VOCAB])}),
    Case("d2t_too_long", "d2t longer than draft_vocab_size", add={"d2t": ("I64", [200])}),
    Case("d2t_too_short", "d2t shorter than draft_vocab_size", add={"d2t": ("I64", [64])}),
    Case(
        "one_vocab_with_d2t",
        "draft_vocab_size = vocab_size, full head, d2t stored",
        config={"draft_vocab_size": VOCAB},
        add={"lm_head.weight": (D, [VOCAB, H]), "d2t": ("I64", [VOCAB])},
    ),
    Case(
        "one_vocab_no_maps",
        "draft_vocab_size = vocab_size, full head, no d2t/t2d",
        config={"draft_vocab_size": VOCAB},
        add={"lm_head.weight": (D, [VOCAB, H])},
        drop=("d2t", "t2d"),
    ),
    Case(
        "draft_vocab_unset_full_head",
        "no draft_vocab_size, a full-vocabulary head, no maps",
        config={"draft_vocab_size": None},
        add={"lm_head.weight": (D, [VOCAB, H])},
        drop=("d2t", "t2d"),
    ),
    Case(
        "draft_vocab_unset_draft_head",
        "no draft_vocab_size, but a 128-row head and d2t",
        config={"draft_vocab_size": None},
    ),
    # ---- embed_tokens and lm_head
    Case("own_embed", "its own embed_tokens", add={"embed_tokens.weight": (D, [VOCAB, H])}),
    Case("own_embed_short_vocab", "own embed_tokens with 128 rows", add={"embed_tokens.weight": (D, [128, H])}),
    Case(
        "narrow_drafter_own_embed",
        "hidden 32 against the 64-wide target, own 32-wide embed_tokens",
        hidden=32,
        add={"embed_tokens.weight": (D, [VOCAB, 32])},
    ),
    Case("narrow_drafter_no_embed", "hidden 32 against the 64-wide target, no embed_tokens", hidden=32),
    Case("no_lm_head", "no lm_head, draft_vocab_size set", drop=("lm_head.weight",)),
    Case(
        "no_lm_head_no_draft_vocab",
        "no lm_head, no draft_vocab_size, no maps",
        config={"draft_vocab_size": None},
        drop=("lm_head.weight", "d2t", "t2d"),
    ),
    Case(
        "lm_head_full_rows",
        "a full-vocabulary lm_head though draft_vocab_size is 128",
        add={"lm_head.weight": (D, [VOCAB, H])},
    ),
    Case(
        "tied_own_embed_no_head",
        "tie_word_embeddings, own embed, no lm_head, one vocabulary",
        config={"tie_word_embeddings": True, "draft_vocab_size": None},
        add={"embed_tokens.weight": (D, [VOCAB, H])},
        drop=("lm_head.weight", "d2t", "t2d"),
    ),
    Case(
        "tied_with_head",
        "tie_word_embeddings with an lm_head stored",
        config={"tie_word_embeddings": True},
    ),
    # ---- missing and extra tensors
    Case("no_hidden_norm", "no hidden_norm", drop=(f"{LAYER}hidden_norm.weight",)),
    Case("no_final_norm", "no norm", drop=("norm.weight",)),
    Case("no_input_layernorm", "no input_layernorm", drop=(f"{LAYER}input_layernorm.weight",)),
    Case("no_post_attention_norm", "no post_attention_layernorm", drop=(f"{LAYER}post_attention_layernorm.weight",)),
    Case("no_fc", "no fc", drop=("fc.weight",)),
    Case("no_k_proj", "no k_proj (fused qkv partly filled)", drop=(f"{LAYER}self_attn.k_proj.weight",)),
    Case("no_up_proj", "no up_proj (fused gate_up partly filled)", drop=(f"{LAYER}mlp.up_proj.weight",)),
    Case("extra_layer_tensor", "an unknown tensor inside the layer", add={f"{LAYER}extra_thing.weight": (D, [H])}),
    Case("extra_top_level_tensor", "an unknown top-level tensor", add={"something_else.weight": (D, [H])}),
    Case("rotary_inv_freq", "a stored rotary inv_freq", add={f"{LAYER}self_attn.rotary_emb.inv_freq": ("F32", [8])}),
    Case("mask_hidden", "a parallel-drafting mask_hidden", add={"mask_hidden": (D, [1, 3 * H])}),
    Case("fc_bias_without_config", "fc.bias with no bias setting", add={"fc.bias": (D, [H])}),
    Case("fc_bias_with_config", "bias: true and fc.bias", config={"bias": True}, add={"fc.bias": (D, [H])}),
    Case("bias_config_no_fc_bias", "bias: true but no fc.bias", config={"bias": True}),
    Case(
        "attention_bias_with_biases",
        "attention_bias: true, q/k/v/o biases stored",
        config={"attention_bias": True},
        add={
            f"{LAYER}self_attn.q_proj.bias": (D, [H]),
            f"{LAYER}self_attn.k_proj.bias": (D, [32]),
            f"{LAYER}self_attn.v_proj.bias": (D, [32]),
            f"{LAYER}self_attn.o_proj.bias": (D, [H]),
        },
    ),
    Case("attention_bias_no_biases", "attention_bias: true, no biases stored", config={"attention_bias": True}),
    Case(
        "fc_norm",
        "fc_norm: true with fc_norm.{0,1,2}",
        config={"fc_norm": True},
        add={f"fc_norm.{i}.weight": (D, [H]) for i in range(3)},
    ),
    Case(
        "norm_before_fc",
        "eagle_config.norm_before_fc with input_norm",
        config={"eagle_config.norm_before_fc": True},
        add={"input_norm.weight": (D, [3 * H])},
    ),
    Case("q_proj_wrong_width", "q_proj 1 x hidden wide", add={f"{LAYER}self_attn.q_proj.weight": (D, [H, H])}),
    Case("fc_wrong_width", "fc 2 x hidden wide with three aux ids", add={"fc.weight": (D, [H, 2 * H])}),
    Case(
        "target_hidden_size_wider",
        "target_hidden_size 128 (the target is 64), fc 3 x 128",
        config={"target_hidden_size": 128},
        add={"fc.weight": (D, [H, 384])},
    ),
    Case(
        "mlp_wrong_intermediate",
        "down_proj with the wrong intermediate size",
        add={f"{LAYER}mlp.down_proj.weight": (D, [H, INTERMEDIATE // 2])},
        not_comparable={
            "sglang": "SGLang's CPU build pads a short weight (RowParallelLinear.weight_loader calls "
            "narrow_padded_param_and_loaded_weight only when is_cpu()); a GPU deployment raises on the shape",
        },
    ),
    # ---- the speculators format
    Case("speculators", "a speculators-format config (layers.0.* names)", speculators=True, layer_names="layers"),
    Case(
        "speculators_no_proposal_methods",
        "speculators config without proposal_methods",
        speculators=True,
        layer_names="layers",
        config={"speculators_config.proposal_methods": None},
        not_comparable={
            "vllm": "vLLM validates speculators_config (validate_speculators_config) only when it serves the "
            "checkpoint itself (maybe_override_with_speculators); the oracle drives the --speculative-config path",
        },
    ),
    Case(
        "speculators_no_norm_before_residual",
        "speculators config without norm_before_residual (which default it was trained with, the oracle cannot see)",
        speculators=True,
        layer_names="layers",
        config={"norm_before_residual": None},
    ),
    Case("speculators_midlayer_names", "speculators config over midlayer.* names", speculators=True),
    Case(
        "speculators_two_aux_ids",
        "speculators config with two aux ids, fc 3 x hidden",
        speculators=True,
        layer_names="layers",
        config={AUX_KEY: [2, 29]},
        trained_outputs=(1, 28),
    ),
    Case(
        "speculators_own_embed",
        "speculators config with embed_tokens",
        speculators=True,
        layer_names="layers",
        add={"embed_tokens.weight": (D, [VOCAB, H])},
    ),
    # ---- quantized and dtype variants
    Case(
        "fp8_with_quantization_config",
        "FP8 (e4m3) layer weights with per-tensor scales and quantization_config",
        config={"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}},
        add={
            **{f"{LAYER}{n}.weight": ("F8_E4M3", s) for n, s in FP8_LAYER},
            **{f"{LAYER}{n}.weight_scale": ("F32", []) for n, _ in FP8_LAYER},
        },
    ),
    # SGLang builds the drafter from its own quantization_config: FP8 parameters whose scales no tensor fills
    # (observable on the CPU: the load ends before SGLang's CUDA-only FP8 kernels run)
    Case(
        "fp8_config_over_bf16_weights",
        "a quantization_config (fp8, static activations) over BF16 layer weights: FP8 layers built, scales unwritten",
        config={"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}},
    ),
    # compressed-tensors int8 weight-only, not pack-quantized: SGLang has no scheme for it (ImportError at build)
    Case(
        "compressed_tensors_int8_weight_only_unpacked",
        "compressed-tensors int8 weight-only per channel in the int-quantized format",
        config={
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "format": "int-quantized",
                "ignore": ["lm_head", "re:.*fc$"],
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
                    }
                },
            }
        },
        add={
            **{f"{LAYER}{n}.weight": ("I8", s) for n, s in FP8_LAYER},
            **{f"{LAYER}{n}.weight_scale": ("F32", [s[0], 1]) for n, s in FP8_LAYER},
        },
    ),
    Case(
        "modelopt_fp8_exclude_modules",
        "a ModelOpt FP8 export: FP8 layer weights with weight and input scales, fc and lm_head excluded",
        config={
            "quantization_config": {
                "quant_method": "modelopt",
                "quant_algo": "FP8",
                "exclude_modules": ["lm_head", "fc", "embed_tokens"],
            }
        },
        add={
            **{f"{LAYER}{n}.weight": ("F8_E4M3", s) for n, s in FP8_LAYER},
            **{f"{LAYER}{n}.{scale}": ("F32", []) for n, _ in FP8_LAYER for scale in ("weight_scale", "input_scale")},
        },
    ),
    Case(
        "fp8_without_quantization_config",
        "FP8 layer weights, no quantization_config",
        add={
            f"{LAYER}self_attn.q_proj.weight": ("F8_E4M3", [H, 2 * H]),
            f"{LAYER}mlp.up_proj.weight": ("F8_E4M3", [INTERMEDIATE, H]),
        },
    ),
    Case("dtype_f16", "every weight F16", dtype="F16", config={"torch_dtype": "float16"}),
    Case("dtype_f32", "every weight F32", dtype="F32", config={"torch_dtype": "float32"}),
    Case("dtype_f16_config_bf16", "F16 weights, torch_dtype bfloat16", dtype="F16"),
    Case(
        "mixed_dtype_norms_f32",
        "F32 norms among BF16 weights",
        add={
            f"{LAYER}input_layernorm.weight": ("F32", [H]),
            f"{LAYER}hidden_norm.weight": ("F32", [H]),
            "norm.weight": ("F32", [H]),
        },
    ),
]


def _content(case: Case) -> str:
    """What a case is, whatever its name: its config, its tensors and its target."""
    return json.dumps([base_config(case), tensors_of(case), case.target.name], sort_keys=True)


_TAKEN = {_content(case) for case in (*WRITTEN, *HELD_OUT)}
#: Every case: the written ones, the generated ones no written or held-out case already is, the held-out split.
CASES: list[Case] = [*WRITTEN, *(c for c in GENERATED if _content(c) not in _TAKEN), *HELD_OUT]
