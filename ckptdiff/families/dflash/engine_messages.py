"""The words of DFlash's engine events: each rule's ``wording`` key → its template over the event's params."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

Params = Mapping[str, Any]


def _ids(value: Any, params: Params) -> str:
    return "none" if not value else ", ".join(str(v) for v in value)


def _needs(params: Params) -> str:
    parts = []
    if params.get("layers_above") is not None:
        parts.append(f"more than {params['layers_above']} layers")
    if params.get("hidden") is not None:
        parts.append(f"hidden_size {params['hidden']} (its embedding and head are used)")
    if params.get("mask") is not None:
        parts.append(f"a vocabulary holding mask token id {params['mask']}")
    return "; ".join(parts) or "nothing the drafter's config states"


def _key(value: Any, params: Params) -> str:
    return str(value) if value else "no key; built from the target's depth, one per drafter layer"


def _target_attention(params: Params) -> str:
    if params.get("target_mla"):
        return f"MLA, one {params.get('target_head_dim')}-wide latent per token"
    return f"head_dim {params.get('target_head_dim')}, {params.get('target_kv_heads')} KV heads"


def _outputs(params: Params) -> str:
    outputs = params.get("outputs")
    if params.get("assumed"):
        return (
            "one state per target layer id it reads, else its class's three by default; the target taken at the "
            "drafter's width"
        )
    return "the output of target layer" + ("s " if len(outputs or ()) != 1 else " ") + _ids(outputs, params)


def _unprojected(params: Params) -> str:
    return (
        "use_aux_hidden_state is false (or null or 0: vLLM tests its truth), so vLLM builds no fc, yet the target "
        f"still captures for DFlash ({_outputs(params)}): {params.get('captured')} state(s) x its hidden_size "
        f"{params.get('target_hidden')} reach the drafter concatenated as they are, {params.get('width')} wide, "
        f"where its hidden_size is {params.get('hidden')}"
    )


#: What each config check's rule (``ConfigCheck.rule``) takes, in words.
RULE_WORDS = {
    "int_min_1": 'a whole number of 1 or more (what int() takes: 16, "16", 16.0), or null',
    "int_min_0": "a whole number of 0 or more (what int() takes), or null",
    "positive_float": "a number above 0 (what float() takes; null raises TypeError)",
    "float_or_falsy": 'a number (what float() takes), or null, 0, false or ""',
    "token": "a non-empty string, or null (the default <|MASK|>)",
    "token_id": "an integer of 0 or more (not a bool, not a float), or null",
    "bool": "true or false (null is refused)",
    "number": "an int or a float (not a bool), or null",
}


def _config_refused(params: Params) -> str:
    def shown(value: Any, unset: Any) -> str:
        return f"unset ({json.dumps(value, default=str)})" if unset else json.dumps(value, default=str)

    key, found = params.get("key"), shown(params.get("found"), params.get("unset"))
    if params.get("rule") == "together":
        pair = shown(params.get("pair_found"), params.get("pair_unset"))
        what = (
            f"{key} is {found} and {params.get('pair_key')} is {pair}: SGLang's parse_dflash_draft_config takes both "
            "set (non-zero) or neither"
        )
    else:
        what = f"{key} is {found}: SGLang's parse_dflash_draft_config takes {RULE_WORDS.get(str(params.get('rule')))}"
    return what + " and refuses the drafter's config at start-up (ValueError)"


PARAM_WORDS: dict[str, Callable[[Any, Params], str]] = {"ids": _ids, "key": _key}
DERIVED: dict[str, Callable[[Params], Any]] = {"needs": _needs}
#: Headline phrases for the events that make an engine refuse (code → template).
SUMMARIES: dict[str, str] = {
    "dflash_not_supported": "no DFlash class for {architecture}",
    "layers_required": "no num_hidden_layers",
    "dflash_config_refused": "{key} refused",
    "target_layer_ids_malformed": "{key} is not a non-empty list of ints",
    "target_layer_out_of_range": "target layer ids {ids} out of range",
    "target_layer_not_captured": "{captured} target states captured, fc takes {features}",
    "mask_hidden_refused": "mask_hidden refused ({name})",
    "domino_weights_refused": "Domino weights refused ({name})",
    "unknown_name": "no parameter for {name}",
    "shape_mismatch": "{name} is {got}, not {want}",
    "fc_width_mismatch": "fc.weight is {got}, not {want}",
    "hidden_mismatch": "hidden_size {hidden} against the target's {target_hidden}",
    "target_not_capturable": "the target class {architecture} captures no hidden states for DFlash",
    "mask_token_out_of_vocab": "mask token {mask_token_id} outside the target's vocabulary ({vocab})",
    "aux_states_unprojected": "no fc, {captured} captured target states ({width} wide) for hidden_size {hidden}",
    "sink_bias_default": "{param} left at -inf (no sink)",
    "sink_backend_required": "{key}: sinks need the trtllm_mha draft attention backend",
    "mask_token_missing": "no mask token id",
    "mask_token_null": "{key} is null",
}

_NO_CLASS = (
    "no DFlash drafter class for architectures[0] {architecture} (looked up as {looked_up}); the ones modelled "
    "here are {registered}"
)
_FROM_TARGET = "{name}: the drafter has none of its own; the target's is used"
_RANDOM = "{param} is not in the checkpoint: no check reports it, so it keeps its initial random values"

EVENTS: dict[str, Any] = {
    "dflash.no_config": "{spec} has no config.json: no DFlash drafter can be built from it",
    "dflash.vllm.dflash_not_supported": "vLLM has " + _NO_CLASS,
    "dflash.sglang.dflash_not_supported": "SGLang has " + _NO_CLASS,
    "dflash.sglang.config_refused": _config_refused,
    "dflash.sglang.layers_required": (
        'the config has no num_hidden_layers: SGLang raises ValueError "DFLASH requires draft num_hidden_layers"'
    ),
    "dflash.sglang.target_layer_ids_malformed": (
        "{key} is {value}: SGLang raises ValueError (target_layer_ids must be a non-empty list of ints; int() "
        'takes each, so "3" passes)'
    ),
    "dflash.sglang.sink_backend_required": (
        "{key} is true in a Nemotron 3.5 draft layout: SGLang builds its attention sinks only under "
        "--speculative-draft-attention-backend trtllm_mha and raises ValueError while building the drafter under any "
        "other (its default included)"
    ),
    "dflash.vllm.target_layer_ids_not_int": (
        "{key} is {value}: vLLM adds 1 to each id as it sizes fc and raises TypeError on one that is not an int "
        '(SGLang\'s int() would take "3")'
    ),
    "dflash.sglang.ids_vs_target": (
        "target layer ids {ids} (read at {key}) do not fit a "
        'target of {layers} layers: SGLang refuses to start, ValueError "DFLASH target_layer_ids contains an '
        'out-of-range layer id" (or "requires num_target_layers >= 4")'
    ),
    "dflash.sglang.ids_vs_trained_depth": (
        "target layer ids {ids} (read at {key}) do not fit the {limit} target layers DFlashDraftModel sizes fc for "
        "(num_target_layers, else the largest id + 1, else its own layer count; without ids it needs 4 or more): "
        "ValueError while it is built"
    ),
    "dflash.vllm.target_layer_not_captured": (
        "fc takes {features} target hidden states (one per target layer id, read as ids {ids}, else one per drafter "
        "layer) but the target of {layers} layers captures {captured}: vLLM fails at start-up, where the profiling "
        "run's dummy draft combines them, with ValueError \"DFlash drafter expects ... concatenated aux hidden "
        'features"'
    ),
    "dflash.vllm.target_layer_not_captured_v1": (
        "fc takes {features} target hidden states (one per target layer id, read as ids {ids}, else one per drafter "
        "layer) but under the V1 runner the target of {layers} layers captures {captured}: start-up runs (its dummy "
        'run does not combine them) and the first draft raises ValueError "DFlash drafter expects ... concatenated '
        'aux hidden features"'
    ),
    "dflash.vllm.mask_hidden_refused": (
        '{name}: vLLM asserts "DFlash embeds masked slots via mask_token_id ...; it should not ship a mask_hidden '
        'weight" (AssertionError)'
    ),
    "dflash.sglang.domino_weights_refused": (
        '{name}: a Domino projector weight, but dflash_config.projector_type is not "domino": ValueError'
    ),
    "dflash.vllm.from_target": _FROM_TARGET,
    "dflash.sglang.from_target": _FROM_TARGET + " (DFlashWorkerV2 embeds with the target's and projects with its "
    "lm_head)",
    "dflash.vllm.carried_used": (
        "{name}: the checkpoint carries its own, and vLLM uses it rather than the target's unless the two are equal"
    ),
    "dflash.sglang.carried_unused": (
        "{name}: SGLang's DFlash drafter has no parameter for it and skips it; the target's is used instead"
    ),
    "dflash.vllm.unknown_name": (
        "{name} becomes {candidate}, which vLLM's DFlash drafter has no parameter for: ValueError \"There is no "
        'module or parameter named ..."'
    ),
    "dflash.sglang.skipped_unknown_name": "{name}: SGLang's DFlash drafter has no parameter {candidate}: skipped",
    "dflash.vllm.shape_mismatch": "{name} is {got} but vLLM's {param} takes {want}",
    "dflash.sglang.shape_mismatch": "{name} is {got} but SGLang's {param} takes {want}: the weight loader raises",
    "dflash.vllm.fc_width_mismatch": (
        "{name} is {got} but vLLM builds fc as {want} ({features} target hidden states x target_hidden_size or "
        "hidden_size): the load raises"
    ),
    "dflash.sglang.fc_width_mismatch": (
        "{name} is {got} but SGLang builds fc as {want} ({features} target hidden states x hidden_size): "
        'ValueError "DFLASH fc.weight shape mismatch"'
    ),
    "dflash.vllm.random_init": _RANDOM,
    "dflash.sglang.random_init": _RANDOM,
    "dflash.vllm.sink_bias_default": (
        "{param} is not in the checkpoint: the config asks for attention sink biases and vLLM builds them at -inf, "
        "so the layer attends as if it had no sink bias (no check reports it)"
    ),
    "dflash.vllm.mask_token_missing": (
        'no mask token id in the config (looked up at {keys}): vLLM refuses to start, ValueError "... must specify '
        '`dflash_config.mask_token_id`, `mask_token_id`, ..."'
    ),
    "dflash.vllm.mask_token_null": (
        "{key} is null: vLLM's DFlash speculator reads it there (the top-level mask_token_id unread) and "
        "int(None) raises TypeError at start-up"
    ),
    "dflash.vllm.hidden_mismatch": (
        "the drafter's hidden_size is {hidden} but the target's embedding and head are {target_hidden} wide: the "
        "first forward fails on the shapes"
    ),
    "dflash.sglang.hidden_mismatch": (
        "the drafter's hidden_size is {hidden} but the target's embedding and head are {target_hidden} wide: the "
        "first forward fails on the shapes"
    ),
    "dflash.vllm.mask_token_out_of_vocab": (
        "mask token id {mask_token_id} ({key}) is outside the target's vocabulary of {vocab}: the embedding lookup "
        "of the first draft block fails"
    ),
    "dflash.sglang.mask_token_out_of_vocab": (
        "mask token id {mask_token_id} ({key}) is outside the target's vocabulary of {vocab}: ValueError \"DFLASH "
        'mask_token_id is outside the target vocab size" when the DFLASH worker starts'
    ),
    "dflash.vllm.target_not_capturable": (
        "the target's class {architecture} does not implement vLLM's EAGLE-3 interface, which DFlash's capture of "
        'target hidden states uses: RuntimeError "Model does not support EAGLE3 interface" at start-up'
    ),
    "dflash.sglang.target_not_capturable": (
        "the target's class {architecture} has no set_dflash_layers_to_capture: SGLang refuses to start, ValueError "
        '"implements neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture"'
    ),
    "dflash.vllm.target_class_unknown": (
        "the target's class {architecture} is not in ckptdiff's table of classes vLLM captures DFlash states from: "
        "this verdict assumes it does"
    ),
    "dflash.sglang.target_class_unknown": (
        "the target's class {architecture} is not in ckptdiff's table of classes SGLang captures DFlash states from: "
        "this verdict assumes it does"
    ),
    "dflash.vllm.v1_runner_capture_differs": lambda p: (
        f"under the V1 model runner (VLLM_USE_V2_MODEL_RUNNER=0) the target captures at "
        f"{_ids(p.get('v1'), p) if p.get('v1') else 'its class default'} instead of "
        f"{_ids(p.get('v2'), p) if p.get('v2') else 'its class default'} (V1 reads no top-level target_layer_ids and "
        "lets eagle_config's ids replace the DFlash ones)"
        + ("; there the first forward fails on the captured states' width" if p.get("fails") else "")
    ),
    "dflash.vllm.draft_kv_cache": lambda p: (
        f"the drafter's attention (head_dim {p.get('head_dim')}, {p.get('kv_heads')} KV heads) is not the target's "
        f"({_target_attention(p)}): vLLM runs it; its {p.get('layers')} layers join the target's in one KV-cache "
        "group of per-layer page sizes (UniformTypeKVCacheSpecs), and nothing checks one against the other"
    ),
    "dflash.sglang.draft_kv_cache": lambda p: (
        f"the drafter's attention (head_dim {p.get('head_dim')}, {p.get('kv_heads')} KV heads) is not the target's "
        f"({_target_attention(p)}): SGLang runs it; the draft has a KV pool of its own sized from its own attention"
        + (f" ({p['bytes_per_token']} bytes per token in {p.get('dtype')})" if p.get("bytes_per_token") else "")
        + ", and nothing checks one against the other"
    ),
    "dflash.vllm.aux_states_unprojected": lambda p: (
        _unprojected(p) + ": the V2 runner's speculator copies them into its hidden_size-wide buffer, and the first "
        'forward, the start-up\'s profiling run, raises RuntimeError ("The size of tensor a ... must match")'
    ),
    "dflash.vllm.aux_states_unprojected_v1": lambda p: (
        _unprojected(p) + ": under the V1 runner the proposer asserts their width is hidden_size, and the first draft "
        "raises AssertionError"
    ),
    "dflash.vllm.aux_state_as_is": lambda p: (
        "use_aux_hidden_state is false (or null or 0: vLLM tests its truth): vLLM builds no fc, yet the target still "
        f"captures for DFlash, and the one state captured ({_outputs(p)}) reaches the drafter as it is, without a "
        "projection"
    ),
    "dflash.vllm.fc_unused": (
        "{name}: use_aux_hidden_state is false (or null or 0: vLLM tests its truth), so vLLM builds no fc and drops "
        "it; the drafter reads the captured target states without it"
    ),
    "dflash.vllm.target_unknown": (
        "no --base: this verdict holds for a target with {needs}; which target layers vLLM captures is checked "
        "with --base"
    ),
    "dflash.sglang.target_unknown": (
        "no --base: this verdict holds for a target with {needs}; SGLang checks the target layer ids against the "
        "target's depth at start-up (--base checks it here)"
    ),
}
