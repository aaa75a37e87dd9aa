"""The oracle's DFlash cases about config settings (dflash_cases.py's drafter and targets): SGLang's
``parse_dflash_draft_config`` refusals, and the settings the engines read as they build the drafter or start
(attention sink biases, the mask token lookup, a block size written as a string). ``ALL_CASES`` is the family's
whole table."""

from __future__ import annotations

from dflash_cases import CASES, HEADS, NULL, DFlashCase, Target

#: parse_dflash_draft_config's refusals (SGLang refuses the config at start-up; vLLM reads no such check). A
#: mask_token_id that is no JSON integer ("250", true, 250.0) is not here: ckptdiff refuses the file before any rule
#: runs (config_values.py, exit 2).
CONFIG_CASES: tuple[DFlashCase, ...] = (
    DFlashCase("dflash_cfg_block_size_zero", "block_size 0 at the top level", config={"block_size": 0}),
    DFlashCase(
        "dflash_cfg_num_target_layers_zero",
        "dflash_config.num_target_layers 0",
        config={"dflash_config.num_target_layers": 0},
    ),
    DFlashCase("dflash_cfg_num_hidden_layers_zero", "num_hidden_layers 0", config={"num_hidden_layers": 0}),
    DFlashCase(
        "dflash_cfg_conv_kernel_alone",
        "dflash_config.conv_kernel_size 3 without conv_group_size",
        config={"dflash_config.conv_kernel_size": 3},
    ),
    DFlashCase(
        "dflash_cfg_selector_rank_alone",
        "dflash_config.selector_rank 4 without selector_top_k",
        config={"dflash_config.selector_rank": 4},
    ),
    DFlashCase(
        "dflash_cfg_selector_rank_string_zero",
        'dflash_config.selector_rank "0" without selector_top_k: int() makes it 0, so both are unset and it loads',
        config={"dflash_config.selector_rank": "0"},
    ),
    DFlashCase(
        "dflash_cfg_output_multiplier_zero",
        "dflash_config.output_multiplier 0",
        config={"dflash_config.output_multiplier": 0},
    ),
    DFlashCase(
        "dflash_cfg_softcapping_word",
        'dflash_config.final_logit_softcapping "high", which float() refuses',
        config={"dflash_config.final_logit_softcapping": "high"},
    ),
    DFlashCase("dflash_cfg_mask_token_empty", 'dflash_config.mask_token ""', config={"dflash_config.mask_token": ""}),
    DFlashCase(
        "dflash_cfg_mask_token_id_negative",
        "dflash_config.mask_token_id -1",
        config={"dflash_config.mask_token_id": -1},
    ),
    DFlashCase(
        "dflash_cfg_attention_sink_bias_zero",
        "dflash_config.attention_sink_bias 0 (not a bool; vLLM reads it as false and builds no sink bias)",
        config={"dflash_config.attention_sink_bias": 0},
    ),
    DFlashCase(
        "dflash_cfg_attention_value_scale_string",
        'dflash_config.attention_value_scale "0.5" (a string, not a number)',
        config={"dflash_config.attention_value_scale": "0.5"},
    ),
    DFlashCase(
        "dflash_cfg_null_ids_beside_top_level_ids",
        "dflash_config.target_layer_ids null beside three top-level ids (fc three states wide): SGLang takes the "
        "null and builds its two default ids, vLLM reads the top-level ids",
        config={"dflash_config.target_layer_ids": NULL, "target_layer_ids": [1, 2, 3]},
        target=Target("qwen3", 8),
    ),
)

#: Per-head attention sink biases, one per drafter layer, as a MiMo-style drafter would ship them.
SINKS = tuple((f"layers.{i}.self_attn.attention_sink_bias", "F32", [HEADS]) for i in range(2))

#: SGLang's Nemotron 3.5 DFlash draft layout (is_nemotron_35_draft_config, dflash_utils.py:458): its own embedding,
#: no head, W4A16_NVFP4, the EAGLE-3 aux ids one past the DFlash ids, no sampling from the anchor.
NEMOTRON35 = {
    "has_embed_tokens": True,
    "has_lm_head": False,
    "quantization_config": {"quant_algo": "W4A16_NVFP4"},
    "eagle_aux_hidden_state_layer_ids": [2, 3],
    "dflash_config.sample_from_anchor": False,
}

#: The settings read as the drafter is built or the runtime starts.
SETTING_CASES: tuple[DFlashCase, ...] = (
    DFlashCase(
        "dflash_sink_bias_not_shipped",
        "dflash_config.attention_sink_bias true, no sink biases in the checkpoint: vLLM builds them at -inf (no "
        "sink), SGLang as torch.empty",
        config={"dflash_config.attention_sink_bias": True},
    ),
    DFlashCase(
        "dflash_sink_bias_shipped",
        "dflash_config.attention_sink_bias true and a sink bias per layer shipped: both engines load them",
        config={"dflash_config.attention_sink_bias": True},
        add=SINKS,
    ),
    DFlashCase(
        "dflash_sink_bias_top_level_flag",
        "the top-level add_swa_attention_sink_bias true (MiMo's key) with the biases shipped: vLLM falls back to it "
        "and loads them, SGLang reads only dflash_config and skips them",
        config={"add_swa_attention_sink_bias": True},
        add=SINKS,
    ),
    DFlashCase(
        "dflash_sink_bias_without_flag",
        "sink biases shipped without any flag: vLLM builds none and raises on them, SGLang skips them",
        add=SINKS,
    ),
    DFlashCase(
        "dflash_sink_bias_false_beside_top_level_flag",
        "dflash_config.attention_sink_bias false beside the top-level flag true, nothing shipped: dflash_config's "
        "key wins in vLLM (no biases built)",
        config={"dflash_config.attention_sink_bias": False, "add_swa_attention_sink_bias": True},
    ),
    DFlashCase(
        "dflash_mask_token_id_null_beside_top_level",
        "dflash_config.mask_token_id null beside a top-level mask_token_id: vLLM's speculator takes the null and "
        "int(None) raises at start-up",
        config={"dflash_config.mask_token_id": NULL, "mask_token_id": 250},
        not_comparable={
            "sglang": "SGLang resolves a null mask token id from the target's tokenizer, which the worker runs without"
        },
    ),
    DFlashCase(
        "dflash_mask_token_id_top_level",
        "the mask token id at the top level only: both engines read it there",
        config={"dflash_config.mask_token_id": None, "mask_token_id": 250},
    ),
    DFlashCase(
        "dflash_mask_token_id_absent",
        "no mask token id anywhere: vLLM's speculator refuses to start",
        config={"dflash_config.mask_token_id": None},
        not_comparable={
            "sglang": "SGLang resolves a missing mask token id from the target's tokenizer, which the worker runs "
            "without"
        },
    ),
    DFlashCase(
        "dflash_block_size_string",
        'block_size "16" (a string) at the top level: SGLang\'s int() takes it, vLLM never reads it',
        config={"block_size": "16"},
    ),
    DFlashCase(
        "dflash_nemotron35_sink_top_level",
        "a Nemotron 3.5 draft layout (own embedding, no head, W4A16_NVFP4, ids = aux ids - 1, no anchor sampling) "
        "with the top-level attention_sink_bias true and the biases shipped: SGLang builds its sinks only under the "
        "trtllm_mha draft attention backend and refuses to build the drafter otherwise",
        config=NEMOTRON35 | {"attention_sink_bias": True},
        add=SINKS,
    ),
    DFlashCase(
        "dflash_nemotron35_no_sink",
        "a Nemotron 3.5 draft layout without sinks: SGLang builds it under any draft attention backend",
        config=NEMOTRON35,
    ),
    DFlashCase(
        "dflash_nemotron35_own_embedding",
        "a Nemotron 3.5 draft layout shipping its embedding: SGLang loads it into its own (vLLM: its own too)",
        config=NEMOTRON35,
        add=(("embed_tokens.weight", "BF16", [256, 64]),),
    ),
    DFlashCase(
        "dflash_nemotron35_sink_in_dflash_config",
        "a Nemotron 3.5 draft layout with dflash_config.attention_sink_bias true (not the top-level key) and the "
        "biases shipped: SGLang builds and loads them as for any drafter, under any backend",
        config=NEMOTRON35 | {"dflash_config.attention_sink_bias": True},
        add=SINKS,
    ),
    DFlashCase(
        "dflash_ids_strings",
        'dflash_config.target_layer_ids ["1", "2"] (strings): SGLang\'s int() takes them, vLLM\'s i + 1 raises '
        "TypeError as it sizes fc",
        config={"dflash_config.target_layer_ids": ["1", "2"]},
    ),
    DFlashCase(
        "dflash_ids_strings_top_level",
        'target_layer_ids ["1", "2"] at the top level only: SGLang\'s int() takes them, vLLM\'s i + 1 raises',
        config={"dflash_config.target_layer_ids": None, "target_layer_ids": ["1", "2"]},
    ),
    DFlashCase(
        "dflash_ids_string_word",
        "dflash_config.target_layer_ids [\"one\"]: SGLang's int() refuses it at start-up, vLLM's i + 1 raises",
        config={"dflash_config.target_layer_ids": ["one"]},
    ),
    DFlashCase(
        "dflash_cfg_block_size_word",
        'block_size "sixteen": SGLang\'s int() refuses it at start-up, vLLM never reads it',
        config={"block_size": "sixteen"},
    ),
)

ALL_CASES: tuple[DFlashCase, ...] = (*CASES, *CONFIG_CASES, *SETTING_CASES)
