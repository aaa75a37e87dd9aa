"""The DFlash family's mutations (mutate.py runs them with the others): one plausible mistake each in the DFlash
load rules (ckptdiff/families/dflash/engines/, ``DFlashEngine`` data), named by the rule it changes. They change
only DFlash drafters' verdicts, so mutate.py judges them on the DFlash family's cases (``FAMILY``)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

#: The oracle family (oracle_families.py) whose cases these mutations are judged on.
FAMILY = "dflash"


def change_dflash(name: str, **fields: Any) -> None:
    """Replace fields of DFlash engine ``name``'s rules (``DFlashEngine`` data) as the registry will return them."""
    module = importlib.import_module(f"ckptdiff.families.dflash.engines.{name}")
    module.ENGINE = dataclasses.replace(module.ENGINE, **fields)


def _dflash_vllm_unknown_name_skipped() -> None:
    unknown = importlib.import_module("ckptdiff.families.dflash.engines.vllm").ENGINE.unknown
    change_dflash("vllm", unknown=dataclasses.replace(unknown, severity="info"))


def _dflash_sglang_model_prefix_kept() -> None:
    change_dflash("sglang", strips_model_prefix=False)


def _dflash_vllm_eagle_aux_ids_not_read() -> None:
    keys = importlib.import_module("ckptdiff.families.dflash.engines.vllm").ENGINE.ids_keys
    change_dflash("vllm", ids_keys=tuple(k for k in keys if k.key != "eagle_aux_hidden_state_layer_ids"))


def _dflash_sglang_ids_not_checked_at_startup() -> None:
    change_dflash("sglang", ids_vs_target=None)


def _dflash_vllm_midlayer_not_aliased() -> None:
    aliases = importlib.import_module("ckptdiff.families.dflash.engines.vllm").ENGINE.aliases
    change_dflash("vllm", aliases=tuple(a for a in aliases if "midlayer" not in a.pattern))


def _dflash_vllm_fc_from_hidden_size() -> None:
    change_dflash("vllm", fc_hidden_keys=("hidden_size",))


def _dflash_sglang_uses_carried_embedding() -> None:
    change_dflash("sglang", own_embedding=True, own_head=True)


def _dflash_vllm_rotary_caches_kept() -> None:
    discards = importlib.import_module("ckptdiff.families.dflash.engines.vllm").ENGINE.discards
    change_dflash("vllm", discards=tuple(d for d in discards if "rotary" not in d[0]))


def _dflash_sglang_encoder_not_aliased() -> None:
    change_dflash("sglang", aliases=())


def _dflash_vllm_fc_kept_without_aux() -> None:
    change_dflash("vllm", aux_flag_drops_fc=False)


def _dflash_vllm_unprojected_states_fit() -> None:
    change_dflash("vllm", unprojected=None, unprojected_v1=None)


def _dflash_vllm_fc_dropped_silently() -> None:
    change_dflash("vllm", fc_unused=None)


def _dflash_sglang_default_ids_need_no_depth() -> None:
    change_dflash("sglang", ids_vs_trained_depth=None)


def _dflash_vllm_v1_reads_like_v2() -> None:
    vllm = importlib.import_module("ckptdiff.families.dflash.engines.vllm")

    def like_v2(config: Any) -> Any:
        from ckptdiff.families.dflash.engines.replay import read_ids

        _, ids, shift = read_ids(vllm.ENGINE, config)
        return tuple(i + shift for i in ids) if isinstance(ids, list) and ids else None

    change_dflash("vllm", v1_ids=like_v2)


def _dflash_sglang_qwen2_captures() -> None:
    change_dflash("sglang", refused_targets=())


def _dflash_draft_kv_cache_refused(name: str) -> None:
    event = _engine(name).ENGINE.draft_kv_cache
    change_dflash(name, draft_kv_cache=dataclasses.replace(event, severity="error"))


def _dflash_sglang_config_check_dropped(key: str) -> None:
    checks = _engine("sglang").ENGINE.config_checks
    change_dflash("sglang", config_checks=tuple(c for c in checks if c.keys[0] != key))


def _dflash_sglang_config_check_pair_dropped(key: str) -> None:
    checks = _engine("sglang").ENGINE.config_checks
    kept = tuple(dataclasses.replace(c, together=None) if c.keys[0] == key else c for c in checks)
    change_dflash("sglang", config_checks=kept)


def _dflash_sglang_null_ids_fall_back() -> None:
    keys = _engine("sglang").ENGINE.ids_keys
    change_dflash("sglang", ids_keys=tuple(dataclasses.replace(k, null_is_unset=True) for k in keys))


def _dflash_sglang_config_value_as_given(key: str) -> None:
    rules = importlib.import_module("ckptdiff.families.dflash.engines.config_checks").RULES
    rules["as_given"] = lambda value: value
    checks = _engine("sglang").ENGINE.config_checks
    rule = "as_given"
    change_dflash(
        "sglang", config_checks=tuple(dataclasses.replace(c, rule=rule) if c.keys[0] == key else c for c in checks)
    )


#: parse_dflash_draft_config's checks (sglang.py CONFIG_CHECKS), each mutation leaving one out.
_CONFIG_CHECKS = {
    "num_hidden_layers": "num_hidden_layers below 1",
    "dflash_config.num_target_layers": "num_target_layers below 1",
    "dflash_config.block_size": "block_size below 1",
    "dflash_config.output_multiplier": "output_multiplier of 0 or less",
    "dflash_config.final_logit_softcapping": "a final_logit_softcapping float() cannot read",
    "dflash_config.mask_token": "an empty mask_token",
    "dflash_config.mask_token_id": "a negative mask_token_id",
    "dflash_config.attention_sink_bias": "an attention_sink_bias that is not a bool",
    "dflash_config.attention_value_scale": "an attention_value_scale that is not a number",
}


def _engine(name: str) -> Any:
    return importlib.import_module(f"ckptdiff.families.dflash.engines.{name}")


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    **{
        f"dflash.sglang.config_checks.{key.rpartition('.')[2]}": (
            f"SGLang takes {what}",
            lambda key=key: _dflash_sglang_config_check_dropped(key),
        )
        for key, what in _CONFIG_CHECKS.items()
    },
    "dflash.sglang.config_checks.conv_together": (
        "SGLang takes conv_kernel_size without conv_group_size",
        lambda: _dflash_sglang_config_check_pair_dropped("dflash_config.conv_group_size"),
    ),
    "dflash.sglang.config_checks.selector_together": (
        "SGLang takes selector_rank without selector_top_k",
        lambda: _dflash_sglang_config_check_pair_dropped("dflash_config.selector_top_k"),
    ),
    "dflash.sglang.config_checks.selector_rank_by_truth": (
        'SGLang tests selector_rank\'s truth as given ("0" is set) rather than after int()',
        lambda: _dflash_sglang_config_value_as_given("dflash_config.selector_rank"),
    ),
    "dflash.sglang.ids_keys.null_ends_lookup": (
        "SGLang reads the top-level target_layer_ids when dflash_config's is null",
        _dflash_sglang_null_ids_fall_back,
    ),
    "dflash.vllm.draft_kv_cache.runs": (
        "vLLM refuses a drafter whose head_dim / KV heads are not the target's (its KV-cache grouping does not)",
        lambda: _dflash_draft_kv_cache_refused("vllm"),
    ),
    "dflash.sglang.draft_kv_cache.runs": (
        "SGLang refuses a drafter whose head_dim / KV heads are not the target's (the draft's KV pool is its own)",
        lambda: _dflash_draft_kv_cache_refused("sglang"),
    ),
    "dflash.vllm.v1_ids": (
        "vLLM's V1 model runner reads the target layer ids as the V2 runner does",
        _dflash_vllm_v1_reads_like_v2,
    ),
    "dflash.sglang.refused_targets": (
        "SGLang captures DFlash states from every target class (Qwen2's has no set_dflash_layers_to_capture)",
        _dflash_sglang_qwen2_captures,
    ),
    "dflash.vllm.unknown_name.raises": (
        "vLLM's DFlash loader skips an unknown name instead of raising",
        _dflash_vllm_unknown_name_skipped,
    ),
    "dflash.sglang.model_prefix.stripped": (
        "SGLang's DFlash loader keeps a model. prefix",
        _dflash_sglang_model_prefix_kept,
    ),
    "dflash.vllm.ids_keys.eagle_aux_first": (
        "vLLM reads no EAGLE-3 aux ids for a DFlash drafter",
        _dflash_vllm_eagle_aux_ids_not_read,
    ),
    "dflash.sglang.ids_vs_target": (
        "SGLang does not check the target layer ids against the target's depth at start-up",
        _dflash_sglang_ids_not_checked_at_startup,
    ),
    "dflash.vllm.aliases.midlayer": ("vLLM does not read midlayer.* as layers.0", _dflash_vllm_midlayer_not_aliased),
    "dflash.vllm.fc_hidden_keys.target_hidden_size": (
        "vLLM sizes fc's input with hidden_size, not target_hidden_size",
        _dflash_vllm_fc_from_hidden_size,
    ),
    "dflash.sglang.own_embedding": (
        "SGLang's DFlash drafter uses a carried embedding and head",
        _dflash_sglang_uses_carried_embedding,
    ),
    "dflash.vllm.discards.rotary_caches": (
        "vLLM keeps a rotary cache (rotary_emb.inv_freq) and looks a parameter up for it",
        _dflash_vllm_rotary_caches_kept,
    ),
    "dflash.sglang.aliases.encoder": (
        "SGLang does not read encoder.fc / encoder.output_norm_enc as fc / hidden_norm",
        _dflash_sglang_encoder_not_aliased,
    ),
    "dflash.vllm.aux_flag_drops_fc": (
        "vLLM builds fc whatever use_aux_hidden_state says",
        _dflash_vllm_fc_kept_without_aux,
    ),
    "dflash.vllm.unprojected": (
        "without fc (use_aux_hidden_state false), vLLM's drafter takes the captured target states whatever their width",
        _dflash_vllm_unprojected_states_fit,
    ),
    "dflash.vllm.fc_unused": (
        "vLLM drops a shipped fc without a word when use_aux_hidden_state is false",
        _dflash_vllm_fc_dropped_silently,
    ),
    "dflash.sglang.ids_vs_trained_depth": (
        "SGLang builds DFlashDraftModel whatever its ids and num_target_layers",
        _dflash_sglang_default_ids_need_no_depth,
    ),
}


def _dflash_sink_bias(name: str, **fields: Any) -> Callable[[], None]:
    def change() -> None:
        sink = _engine(name).ENGINE.sink_bias
        change_dflash(name, sink_bias=dataclasses.replace(sink, **fields) if fields else None)

    return change


def _dflash_vllm_mask_lookup(**fields: Any) -> Callable[[], None]:
    def change() -> None:
        lookup = _engine("vllm").ENGINE.mask_lookup
        change_dflash("vllm", mask_lookup=dataclasses.replace(lookup, **fields) if fields else None)

    return change


def _block_size_a_json_integer() -> None:
    values = importlib.import_module("ckptdiff.config_values")
    values.CONFIG_INTEGERS = values.CONFIG_INTEGERS | {"block_size"}


def _sglang_nemotron35(**changes: Any) -> Callable[[], None]:
    """SGLang's Nemotron 3.5 variant with its changes replaced (a None value: that change left out)."""

    def apply() -> None:
        engine = _engine("sglang").ENGINE
        variants = tuple(
            dataclasses.replace(v, changes={k: c for k, c in {**v.changes, **changes}.items() if c is not None})
            for v in engine.variants
        )
        change_dflash("sglang", variants=variants)

    return apply


def _target_layer_ids_json_integers() -> None:
    importlib.import_module("ckptdiff.config_values").STRING_LAYER_ID_KEYS = frozenset()


#: The settings read as the drafter is built or the runtime starts (dflash_setting_cases.py).
SETTING_MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "dflash.vllm.sink_bias.top_level_fallback": (
        "vLLM reads the sink-bias flag in dflash_config only (not the top-level add_swa_attention_sink_bias)",
        _dflash_sink_bias("vllm", keys=("dflash_config.attention_sink_bias",)),
    ),
    "dflash.vllm.sink_bias.default": (
        "vLLM leaves an unshipped sink bias random (as SGLang's torch.empty), not at -inf",
        _dflash_sink_bias("vllm", fate_missing="random"),
    ),
    "dflash.vllm.sink_bias.built": ("vLLM's DFlash layers build no attention sink biases", _dflash_sink_bias("vllm")),
    "dflash.sglang.sink_bias.built": (
        "SGLang's DFlash layers build no attention sink biases",
        _dflash_sink_bias("sglang"),
    ),
    "dflash.vllm.mask_lookup.null_ends_lookup": (
        "vLLM's speculator reads the top-level mask_token_id when dflash_config's is null",
        _dflash_vllm_mask_lookup(keys=(("dflash_config.mask_token_id", True), ("mask_token_id", True))),
    ),
    "dflash.vllm.mask_lookup.checked": (
        "vLLM starts without resolving a mask token (no start-up lookup)",
        _dflash_vllm_mask_lookup(),
    ),
    "dflash.sglang.ids_int": (
        'SGLang takes target layer ids only as ints ("3" malformed), not through int()',
        lambda: change_dflash("sglang", ids_int=False),
    ),
    "dflash.vllm.ids_not_int": (
        'vLLM reads string target layer ids ("3") as no ids (its class default) instead of raising TypeError',
        lambda: change_dflash("vllm", ids_not_int=None),
    ),
    "dflash.target_layer_ids.json_integers": (
        'target_layer_ids must hold JSON integers ("3" refused as a file defect, as before)',
        _target_layer_ids_json_integers,
    ),
    "dflash.sglang.nemotron35": (
        "SGLang builds a Nemotron 3.5 draft as any DFlash drafter (no variant)",
        lambda: change_dflash("sglang", variants=()),
    ),
    "dflash.sglang.nemotron35.sink_backend": (
        "SGLang builds a Nemotron 3.5 draft's top-level-flagged sinks under any draft attention backend",
        _sglang_nemotron35(sink_backend=None),
    ),
    "dflash.sglang.nemotron35.own_embedding_kept": (
        "SGLang replaces a Nemotron 3.5 draft's unwritten embedding by the target's",
        _sglang_nemotron35(own_embedding_kept=None),
    ),
    "dflash.block_size.json_integer": (
        'block_size must be a JSON integer ("16" refused as a file defect, as before)',
        _block_size_a_json_integer,
    ),
}
MUTATIONS |= SETTING_MUTATIONS
