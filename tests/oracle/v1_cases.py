"""The cases compared under vLLM's V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``; the ``vllm_v1`` variant of
oracle_families.py, driven by worker_v1_vllm.py, against ``ckptdiff --vllm-runner v1``): where the two runners
differ or could, the EAGLE-3 cases of the catalogue that exercise it, then cases written for V1 alone.

What the V1 runner decides, each in the pinned code (vLLM 0.33.0):
- whether the target captures at all: ``gpu_model_runner.py`` ``use_aux_hidden_state_outputs`` from the proposer's
  ``eagle3_use_aux_hidden_state`` (``llm_base_proposer.py``, ``eagle_config.use_aux_hidden_state``);
- which ids: ``_get_eagle3_aux_layers_from_config`` (top level, then ``dflash_config`` + 1, then an
  ``eagle_config`` section's ``eagle_aux_hidden_state_layer_ids`` in their place), else the class's default
  (``_setup_eagle3_aux_hidden_state_outputs``, which also refuses a class without ``SupportsEagle3``);
- the embedding and head taken from the target: ``_maybe_share_embeddings`` (only at the same width),
  ``_maybe_share_lm_head``;
- with use_aux_hidden_state false, the MLA drafter's fc still runs, over the last hidden state
  (``llm_base_proposer.py:549``; derived: the first forward is not run here).
"""

from __future__ import annotations

from cases import AUX_KEY, HIDDEN, VOCAB, Case, Target
from catalogue import CASES

NESTED = f"eagle_config.{AUX_KEY}"
D, H = "BF16", HIDDEN

#: Catalogue cases that exercise a V1 decision: the ids' keys and range, the capture per target class, the
#: embedding and head, the token map, use_aux_hidden_state.
FROM_CATALOGUE = (
    "basic",
    "aux_absent",
    "aux_no_eagle_config",
    "aux_top_level",
    "aux_both_differ",
    "aux_two_ids_fc2",
    "aux_nested_past_last_layer",
    "aux_nested_last_layer",
    "aux_top_level_past_end",
    "aux_negative_id",
    "use_aux_false_with_fc",
    "use_aux_false_no_fc",
    "use_aux_null_with_fc",
    "use_aux_zero_no_fc",
    "own_embed",
    "narrow_drafter_own_embed",
    "narrow_drafter_no_embed",
    "no_lm_head",
    "tied_own_embed_no_head",
    "no_d2t",
    "d2t_i32",
    "one_vocab_with_d2t",
    "one_vocab_no_maps",
    "speculators",
    "speculators_two_aux_ids",
    "speculators_own_embed",
    "mla_basic",
    "gen_mla_use_aux_false",
    "gen_layer_ids_with_top_level",
    "gen_runner_layer_ids_only_llama_32",
    "gen_runner_nested_non_default_deepseek_61",
    "gen_runner_top_level_and_nested_llama_32",
    "gen_target_class_gemma2_32",
    "gen_target_class_mixtral_32",
    "gen_target_class_glm4_moe_32",
    "gen_use_aux_false_top_level_ids_gemma2_32",
    "gen_capture_nested_loop_qwen3_moe_94",
    "gen_capture_nested_plus_one_gpt_oss_36",
    "gen_capture_nested_loop_deepseek_v3_36",
    "gen_capture_default_qwen2_61",
    "gen_capture_top_level_llama_61",
    "gen_capture_last_is_depth_deepseek_v3_36",
    "gen_d2t_shorter_than_head",
    "gen_one_vocab_d2t_no_t2d",
)

#: Written for the V1 runner: each names the decision it tests. The ids under eagle_config are SpecForge's key,
#: written for SGLang (id k = the output of layer k): that is the story of what they were trained on.
V1_ONLY: tuple[Case, ...] = (
    Case(
        "v1_top_level_empty_nested_set",
        "an empty top-level id list beside eagle_config ids [3, 12, 25]: V1 reads past the empty list",
        config={AUX_KEY: [], NESTED: [3, 12, 25]},
        trained_outputs=(3, 12, 25),
    ),
    Case(
        "v1_nested_and_layer_ids_differ",
        "eagle_config holds layer_ids [2, 16, 29] and eagle_aux_hidden_state_layer_ids [5, 10, 20]: V1 reads the "
        "second, SpecForge's (written for SGLang: trained on the outputs of layers 5, 10, 20)",
        config={NESTED: [5, 10, 20], "eagle_config.layer_ids": [2, 16, 29]},
        trained_outputs=(5, 10, 20),
    ),
    Case(
        "v1_nested_two_ids_fc2",
        "eagle_config ids [3, 20] with fc 2 x hidden: V1 captures two states, fc reads two",
        config={NESTED: [3, 20]},
        add={"fc.weight": (D, [H, 2 * H])},
        trained_outputs=(3, 20),
    ),
    Case(
        "v1_nested_two_ids_fc3",
        "eagle_config ids [3, 20] with fc 3 x hidden: V1 captures two states, fc reads three",
        config={NESTED: [3, 20]},
        trained_outputs=(3, 20),
    ),
    Case(
        "v1_nested_past_end_qwen3_36",
        "eagle_config ids [2, 18, 37] on a 36-layer Qwen3 target: one id past the depth",
        config={NESTED: [2, 18, 37]},
        trained_outputs=None,
        target=Target("qwen3", 36),
    ),
    Case(
        "v1_nested_depth_gpt_oss_24",
        "eagle_config ids [2, 12, 24] on a 24-layer GPT-OSS target: the last id is the depth (its last output)",
        config={NESTED: [2, 12, 24]},
        trained_outputs=(1, 11, 23),
        target=Target("gpt_oss", 24),
    ),
    Case(
        "v1_use_aux_false_top_level_ids",
        "eagle_config.use_aux_hidden_state false, top-level ids [4, 12, 24], no fc: V1 captures nothing",
        config={"eagle_config.use_aux_hidden_state": False, AUX_KEY: [4, 12, 24]},
        drop=("fc.weight",),
        trained_outputs=None,
    ),
    Case(
        "v1_narrow_own_embed_no_head",
        "a 32-wide drafter with its own embedding and no lm_head, one vocabulary: the head is the target's",
        hidden=32,
        config={"draft_vocab_size": VOCAB},
        add={"embed_tokens.weight": (D, [VOCAB, 32])},
        drop=("lm_head.weight", "d2t", "t2d"),
    ),
    Case(
        "v1_narrow_no_embed_deepseek_61",
        "a 32-wide drafter without embed_tokens, eagle_config ids [2, 30, 58], 61-layer DeepSeek-V3 target",
        hidden=32,
        config={NESTED: [2, 30, 58]},
        trained_outputs=(1, 29, 57),
        target=Target("deepseek_v3", 61),
    ),
    Case(
        "v1_no_eagle_config_top_level",
        "no eagle_config, top-level ids [4, 12, 24]",
        config={"eagle_config": None, AUX_KEY: [4, 12, 24]},
        trained_outputs=(3, 11, 23),
    ),
    Case(
        "v1_use_aux_false_gemma2",
        "eagle_config.use_aux_hidden_state false, no fc, on a 32-layer Gemma-2 target: no capture is set up, so the "
        "class is never checked",
        config={"eagle_config.use_aux_hidden_state": False},
        drop=("fc.weight",),
        trained_outputs=None,
        target=Target("gemma2", 32),
    ),
    Case(
        "v1_target_class_gemma2_nested",
        "eagle_config ids on a 32-layer Gemma-2 target (no SupportsEagle3): V1's set-up refuses it",
        trained_outputs=None,
        target=Target("gemma2", 32),
    ),
)


#: Written for the V2 runner (v2_cases.py), where V1 reads use_aux_hidden_state the same way
#: (llm_base_proposer.py:1686): null, a top-level key, a speculators config at either level.
FROM_V2 = (
    "v2_use_aux_null_gemma2_32",
    "v2_use_aux_top_level_false_gemma2_32",
    "v2_speculators_use_aux_false_top",
    "v2_speculators_use_aux_false_layer",
)


def _v1_cases() -> list[Case]:
    from v2_cases import V2_ONLY

    by_name = {case.name: case for case in (*CASES, *V2_ONLY)}
    missing = [name for name in (*FROM_CATALOGUE, *FROM_V2) if name not in by_name]
    if missing:
        raise ValueError(f"v1_cases.py names cases the catalogue no longer has: {missing}")
    return [*(by_name[name] for name in (*FROM_CATALOGUE, *FROM_V2)), *V1_ONLY]


V1_CASES: list[Case] = _v1_cases()
