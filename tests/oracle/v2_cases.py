"""The cases compared under vLLM's default (V2) model runner driven through its own ``load_model`` (the ``vllm_v2``
variant of oracle_families.py, worker_v2_vllm.py, against ckptdiff's default ``--vllm-runner v2``): whether the
target captures at all and where, as the runner decides it, per target class. The EAGLE-3 job (worker_vllm.py) sets
the capture up itself whatever the drafter says, so these decisions are observed here only.

What the V2 runner decides, each in the pinned code (vLLM 0.33.0):
- whether the target captures at all: ``v1/worker/gpu/model_runner.py:306`` ``use_aux_hidden_state_outputs`` from
  ``eagle3_utils.py:15`` ``requires_aux_hidden_states``: for ``method == "eagle3"``, ``(hf_config.eagle_config or
  {}).get("use_aux_hidden_state", True)``, its truth value (the drafter's config as vLLM reads it: for a speculators
  config, ``transformer_layer_config``);
- the set-up only when that holds (``model_runner.py:412``): the ids (``get_eagle3_aux_layers_from_config``), else
  the class's default, and the class's ``SupportsEagle3`` check (Gemma-2, Mixtral, GLM-4-MoE refuse);
- which states the class's forward captures for those indices (traced over stub layers).
"""

from __future__ import annotations

from cases import AUX_KEY, HIDDEN, JSON_NULL, Case, Target
from catalogue import CASES

USE_AUX = "eagle_config.use_aux_hidden_state"
NESTED = f"eagle_config.{AUX_KEY}"
D, H = "BF16", HIDDEN

#: Catalogue cases that exercise a V2 runner decision: use_aux_hidden_state false or absent, the ids' keys and
#: range, the capture per target class (refusing classes included), the MLA and speculators drafters.
FROM_CATALOGUE = (
    "basic",
    "aux_absent",
    "aux_no_eagle_config",
    "aux_top_level",
    "aux_both_differ",
    "aux_top_level_past_end",
    "use_aux_false_with_fc",
    "use_aux_false_no_fc",
    "use_aux_null_with_fc",
    "use_aux_zero_no_fc",
    "mla_basic",
    "speculators",
    "gen_mla_use_aux_false",
    "gen_runner_layer_ids_only_llama_32",
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
    "heldout_w2_nvidia_gpt_oss_120b_v2_no_aux",
    "heldout_w2_use_aux_false_fc_stored",
)

#: Written for the V2 runner: each names the decision it tests.
V2_ONLY: tuple[Case, ...] = (
    Case(
        "v2_use_aux_false_mixtral_32",
        "use_aux_hidden_state false, no fc, on a 32-layer Mixtral target (no SupportsEagle3): no set-up, no refusal",
        config={USE_AUX: False},
        drop=("fc.weight",),
        trained_outputs=None,
        target=Target("mixtral", 32),
    ),
    Case(
        "v2_use_aux_false_glm4_moe_32",
        "use_aux_hidden_state false, no fc, on a 32-layer GLM-4-MoE target (no SupportsEagle3 in vLLM): no set-up",
        config={USE_AUX: False},
        drop=("fc.weight",),
        trained_outputs=None,
        target=Target("glm4_moe", 32),
    ),
    Case(
        "v2_use_aux_absent_gemma2_32",
        "eagle_config without use_aux_hidden_state on a 32-layer Gemma-2 target: the default (true) sets the capture "
        "up, and the class refuses it",
        config={USE_AUX: None},
        trained_outputs=None,
        target=Target("gemma2", 32),
    ),
    Case(
        "v2_use_aux_false_deepseek_v3_61",
        "use_aux_hidden_state false with eagle_config ids [2, 30, 58] and no fc, 61-layer DeepSeek-V3: no capture",
        config={USE_AUX: False, NESTED: [2, 30, 58]},
        drop=("fc.weight",),
        trained_outputs=None,
        target=Target("deepseek_v3", 61),
    ),
    Case(
        "v2_use_aux_false_qwen3_moe_94",
        "use_aux_hidden_state false with top-level ids [2, 47, 91] and fc stored, 94-layer Qwen3-MoE: no capture, fc "
        "unused",
        config={USE_AUX: False, AUX_KEY: [2, 47, 91]},
        trained_outputs=None,
        target=Target("qwen3_moe", 94),
    ),
    Case(
        "v2_use_aux_false_gpt_oss_36",
        "use_aux_hidden_state false, eagle_config.layer_ids [2, 18, 33] (the V2 runner's key) and no fc, 36-layer "
        "GPT-OSS: no capture",
        config={USE_AUX: False, "eagle_config.layer_ids": [2, 18, 33]},
        drop=("fc.weight",),
        trained_outputs=None,
        target=Target("gpt_oss", 36),
    ),
    Case(
        "v2_use_aux_null_gemma2_32",
        "use_aux_hidden_state null, no fc, on a 32-layer Gemma-2 target: a false value, so no set-up and no refusal",
        config={USE_AUX: JSON_NULL},
        drop=("fc.weight",),
        trained_outputs=None,
        target=Target("gemma2", 32),
    ),
    Case(
        "v2_use_aux_string_false",
        'use_aux_hidden_state "false" (a string, true as a value): the capture is set up and fc read',
        config={USE_AUX: "false"},
    ),
    Case(
        "v2_use_aux_top_level_false",
        "use_aux_hidden_state false at the top level, none in eagle_config: the runner reads only eagle_config's",
        config={USE_AUX: None, "use_aux_hidden_state": False},
    ),
    Case(
        "v2_use_aux_top_level_false_gemma2_32",
        "use_aux_hidden_state false at the top level only, on a 32-layer Gemma-2 target: the capture is set up (the "
        "runner reads only eagle_config's) and the class refuses it",
        config={USE_AUX: None, "use_aux_hidden_state": False},
        trained_outputs=None,
        target=Target("gemma2", 32),
    ),
    Case(
        "v2_speculators_use_aux_false_top",
        "a speculators config with eagle_config.use_aux_hidden_state false at its top level, fc stored: vLLM builds "
        "the drafter's config from transformer_layer_config, so the capture is set up",
        speculators=True,
        layer_names="layers",
        config={USE_AUX: False},
        trained_outputs=(1, 15, 28),
    ),
    Case(
        "v2_speculators_use_aux_false_layer",
        "a speculators config with transformer_layer_config.eagle_config.use_aux_hidden_state false, no fc: the "
        "drafter's config as vLLM reads it says false, so no capture",
        speculators=True,
        layer_names="layers",
        config={f"transformer_layer_config.{USE_AUX}": False},
        drop=("fc.weight",),
        trained_outputs=None,
    ),
    Case(
        "v2_use_aux_true_fc2_two_ids_qwen3_36",
        "use_aux_hidden_state true, eagle_config.layer_ids [2, 18] with fc 2 x hidden, 36-layer Qwen3: two states",
        config={NESTED: None, "eagle_config.layer_ids": [2, 18]},
        add={"fc.weight": (D, [H, 2 * H])},
        trained_outputs=(1, 17),
        target=Target("qwen3", 36),
    ),
)


def _v2_cases() -> list[Case]:
    by_name = {case.name: case for case in CASES}
    missing = [name for name in FROM_CATALOGUE if name not in by_name]
    if missing:
        raise ValueError(f"v2_cases.py names cases the catalogue no longer has: {missing}")
    return [*(by_name[name] for name in FROM_CATALOGUE), *V2_ONLY]


V2_CASES: list[Case] = _v2_cases()
