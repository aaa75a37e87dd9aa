"""Every code an engine replay's events carry, and the severities each comes at: what ``--allow-event`` may name.

Data read from the families' rules (``tests/test_event_codes.py`` fails while a code the sources emit is missing
here, or one listed here is emitted nowhere): a maintainer who adds an event adds its code here.
"""

from __future__ import annotations

#: Event code → the severities it is emitted at (error: the engine refuses; warning: it loads, not as trained;
#: info: it loads as trained).
EVENT_CODES: dict[str, tuple[str, ...]] = {
    "architecture_not_eagle3": ("error",),
    "architecture_not_registered": ("error",),
    "aux_capture_conditional": ("info",),
    "aux_capture_off": ("info",),
    "aux_capture_unknown_class": ("info",),
    "aux_count_mismatch": ("error",),
    "aux_id_out_of_range": ("error",),
    "aux_ids": ("info",),
    "aux_ids_convention": ("warning",),
    "aux_ids_default": ("warning", "info"),
    "aux_ids_serving_setting": ("info",),
    "aux_state_as_is": ("info",),
    "aux_states_unprojected": ("error",),
    "bias_ignored": ("warning",),
    "carried_unused": ("info",),
    "carried_used": ("info",),
    "config_default_differs": ("info",),
    "config_ignored": ("warning",),
    "config_unrecognized": ("error",),
    "d2t_consumed": ("info",),
    "d2t_dtype": ("warning",),
    "d2t_length": ("error", "warning"),
    "d2t_missing": ("warning",),
    "dflash_config_refused": ("error",),
    "dflash_not_supported": ("error",),
    "domino_weights_refused": ("error",),
    "draft_kv_cache": ("info",),
    "draft_vocab_size_absent": ("error",),
    "dropped": ("info",),
    "dtype_refused": ("error",),
    "eagle1_drafter": ("warning",),
    "embed_not_shared": ("warning",),
    "embed_tokens_overridden": ("info",),
    "embed_tokens_own": ("info",),
    "embed_width_mismatch": ("error",),
    "expert_short": ("warning",),
    "extra_expert": ("warning",),
    "family_not_loaded": ("error",),
    "family_not_modelled": ("error",),
    "fc_unused": ("warning",),
    "fc_width_mismatch": ("error",),
    "fc_without_capture": ("error",),
    "fp8_weight_unscaled": ("warning",),
    "from_target": ("info",),
    "hidden_mismatch": ("error",),
    "ignored_name": ("warning",),
    "input_norm_unused": ("warning",),
    "layers_required": ("error",),
    "layers_unsupported": ("error",),
    "lm_head_from_target": ("warning",),
    "lm_head_random": ("warning",),
    "loaded_unread": ("info",),
    "mask_hidden_refused": ("error",),
    "mask_token_missing": ("error",),
    "mask_token_null": ("error",),
    "mask_token_out_of_vocab": ("error",),
    "missing_weight": ("error",),
    "mla_needs_q_lora_rank": ("error",),
    "mtp_composition_unchecked": ("info",),
    "mtp_layer_count_unsupported": ("error",),
    "mtp_layer_missing": ("error", "warning"),
    "mtp_layer_not_moe": ("error",),
    "mtp_layer_unread": ("warning",),
    "mtp_layers_key_absent": ("error",),
    "mtp_layers_not_announced": ("error",),
    "mtp_not_modelled": ("error",),
    "mtp_not_supported": ("error",),
    "mtp_quantized_block": ("info",),
    "no_architecture": ("error",),
    "no_config": ("error",),
    "no_hidden_size": ("error",),
    "not_a_drafter": ("error",),
    "not_eagle3": ("error",),
    "not_needed": ("info",),
    "outside_mtp_layers": ("info",),
    "quantization_config_invalid": ("error",),
    "quantization_ignored": ("warning",),
    "quantization_scheme_unsupported": ("error",),
    "random_init": ("warning",),
    "runner_v1": ("info",),
    "scale_missing": ("warning",),
    "shape_mismatch": ("error",),
    "shard_truncated": ("warning",),
    "sink_bias_default": ("warning",),
    "sink_backend_required": ("error",),
    "skipped_unknown_name": ("warning", "info"),
    "speculators_config_invalid": ("error", "warning"),
    "speculators_format_unsupported": ("error",),
    "speculators_layer_config_incomplete": ("error",),
    "target_class_not_eagle3": ("error",),
    "target_class_unknown": ("info",),
    "target_hidden_mismatch": ("error",),
    "target_layer_ids_malformed": ("error",),
    "target_layer_not_captured": ("error",),
    "target_layer_out_of_range": ("error",),
    "target_not_capturable": ("error",),
    "target_not_supported": ("error",),
    "target_unknown": ("info",),
    "unfused_weight": ("warning",),
    "unknown_name": ("error",),
    "unread": ("info",),
    "v1_runner_capture_differs": ("info",),
    "weight_cast_to_fp8": ("warning",),
}


def unknown_code(code: str) -> str | None:
    """Why ``code`` names no engine event, with the code it most likely meant; None for a known code."""
    if code in EVENT_CODES:
        return None
    return f"no engine event has this code ({_closest_code(code)})"


def _closest_code(code: str) -> str:
    from ..errors import closest

    close = closest(code, EVENT_CODES)
    return f"did you mean {close}?" if close else "the codes are listed in docs/engines.md#event-codes"


def allow_rule_defect(rule: str) -> str | None:
    """What is wrong with an ``ENGINE:CODE`` glob of ``--allow-event`` (the main command's), or None: an engine or
    code named exactly that none has, a glob no engine or code matches, or an info event's code (info never fails
    the gate). ``rule`` has one ``:``."""
    import fnmatch

    from ..errors import closest
    from .engines import ENGINE_NAMES

    engine, code = rule.split(":")
    if not fnmatch.filter(ENGINE_NAMES, engine):
        close = closest(engine, ENGINE_NAMES)
        hint = f"did you mean {close}?" if close and _exact(engine) else f"the engines are {', '.join(ENGINE_NAMES)}"
        return f"no engine is named {engine} ({hint})"
    if not fnmatch.filter(EVENT_CODES, code):
        if _exact(code):
            return f"no engine event has the code {code} ({_closest_code(code)})"
        return f"no engine event's code matches {code} (the codes are listed in docs/engines.md#event-codes)"
    if _exact(code) and EVENT_CODES[code] == ("info",):
        return f"{code} is an info event, which never fails the gate"
    return None


def _exact(glob: str) -> bool:
    return not any(character in glob for character in "*?[")
