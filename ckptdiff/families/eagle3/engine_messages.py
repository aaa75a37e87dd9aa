"""The words of EAGLE-3's engine events: each rule's ``wording`` key → its template over the event's params.

A template names the event's tensor first ("{name} is ...", "{name}: ...") when the event is about one: reports
print the message as it is, followed by the rule's citation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

Params = Mapping[str, Any]

#: How each engine's aux ids name target layers, for the aux-id events (by engine name).
CONVENTIONS: dict[str, str] = {
    "sglang": "SGLang's: id k = the output of target layer k (it captures before layer k+1)",
    "vllm": "vLLM's: id j = the output of target layer j-1 (it captures before layer j; id n = the last)",
    "trtllm": "TensorRT-LLM's: EagleDecodingConfig.eagle3_layers_to_capture, the outputs of those layers",
}


def _ignored(value: Any, params: Params) -> str:
    """``[[key, ids], ...]``: the aux ids a drafter sets where this engine does not read them."""
    return "".join(f" (it ignores {key}={json.dumps(ids)})" for key, ids in value or ())


def _outputs(value: Any, params: Params) -> str:
    if value is not None:
        return str(value)
    hint = " (give --base to see whether those are the layers the ignored ids name)" if params.get("base_hint") else ""
    return "[1, n//2-1, n-4] for a target of n layers" + hint


def _why(value: Any, params: Params) -> str:
    """vLLM's model_type override of the drafter's architecture, when it applied."""
    if not value:
        return ""
    return (
        f" (SpeculativeConfig.hf_config_override first turns a model_type {params.get('model_type')} draft into "
        f"{params.get('looked_up')}: use model_type deepseek_v2 for an EAGLE-3 MLA drafter)"
    )


def _read(value: Any, params: Params) -> str:
    return "its default three" if value is None else f"{value[0]}={json.dumps(value[1])}"


#: Params worded before a template takes them (param → how), and fields derived from the params.
PARAM_WORDS: dict[str, Callable[[Any, Params], str]] = {
    "ignored": _ignored,
    "outputs": _outputs,
    "why": _why,
    "read": _read,
}
LABELS: dict[str, str] = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}
DERIVED: dict[str, Callable[[Params], Any]] = {
    "convention": lambda params: CONVENTIONS.get(params.get("engine", ""), "?"),
    "label": lambda params: LABELS.get(params.get("engine", ""), "?"),
    "first": lambda params: (params.get("ids") or ["?"])[0],
    "of_target": lambda params: f" of the {params['layers']}-layer target" if params.get("layers") else "",
}

#: Headline phrases for events that end a replay early (code → template), instead of the bare code.
SUMMARIES: dict[str, str] = {
    "no_config": "no config.json",
    "eagle1_drafter": "an EAGLE-1/2 drafter ({name} over 2 x hidden_size), read as EAGLE-3",
    "not_a_drafter": "{arch} is not an EAGLE-3 drafter",
    "no_architecture": "no architectures in config.json",
    "no_hidden_size": "no hidden_size in config.json",
    "architecture_not_eagle3": "{arch} is not an EAGLE-3 class it serves",
    "architecture_not_registered": "{arch} is not an EAGLE-3 class it serves",
    "speculators_config_invalid": "speculators_config_invalid: {defect}",
    "speculators_format_unsupported": "speculators_format_unsupported: {defect}",
}

EVENTS: dict[str, str | Callable[[Params], str]] = {
    "eagle3.no_config": "{spec} has no config.json: {label} cannot build a drafter from it",
    "eagle3.eagle1_drafter": (
        "{name} is {shape}: an fc over 2 x hidden_size ([embedding; hidden state]) with no d2t, t2d or midlayer is "
        "an EAGLE-1/2 drafter's, not EAGLE-3's (over three captured target states); {label} serves EAGLE-1/2 "
        "drafters under {how} ({cls}), whose loading ckptdiff has no rules for: the rest of this verdict is "
        "{label}'s EAGLE-3 loader's"
    ),
    "eagle3.not_a_drafter": (
        "{arch} is not an EAGLE-3 drafter: its config.json has no Eagle3 class, eagle_config or speculators type, "
        "and {label}'s EAGLE-3 loader has no parameter for {unplaced} of its {tensors} tensors (the first, {at}: "
        "{code}); {random} of the drafter's parameters would keep their initial values (the JSON report lists each "
        "tensor's fate)"
    ),
    "eagle3.no_architecture": "config.json has no architectures list: {label} cannot choose a drafter class",
    "eagle3.no_hidden_size": "config.json has no hidden_size: {label} cannot build the drafter's layers",
    "eagle3.aux_id_out_of_range": (
        "{key}={ids}: id(s) {outside} are never captured from a {layers}-layer target ({convention}; ids "
        "{first}..{last} are): fewer hidden states than fc takes"
    ),
    "eagle3.aux_count_mismatch": (
        "{captured} target hidden states are captured ({read}) but fc takes {fc_aux} x "
        "target_hidden_size={target_hidden}: the fc matmul fails on the first forward"
    ),
    "eagle3.aux_capture_off": (
        "eagle_config.use_aux_hidden_state is false (or null or 0: the engines test its truth): {label} captures "
        "no target hidden states (nor checks the target's class for it) and the drafter reads the target's last "
        "hidden state{ignored}"
    ),
    "eagle3.aux_ids": "reads {key}={ids}: captures the outputs of target layers {outputs} ({convention}){ignored}",
    "eagle3.aux_ids_convention": (
        "{key}={ids} starts at {first}, which is SGLang's convention (id k = output of layer k; the first id is "
        "1 because the embedding output is never used, sglang PR#25454) (inferred); under vLLM's convention (id "
        "j = output of layer j-1) {label} captures the outputs of layers {outputs}{of_target} instead of the "
        "trained {ids}: every fused hidden state is one layer early (vllm PR#43671: position-0 acceptance ~10 %)"
    ),
    "eagle3.vllm.config_unrecognized": (
        "config.json has no model_type: vLLM reads the draft's config with transformers' AutoConfig, and "
        "SpeculativeConfig raises a ValidationError without it"
    ),
    "eagle3.vllm.speculators_layer_config_incomplete": (
        "transformer_layer_config has no {missing}: vLLM's speculators adapter builds the drafter's config from that "
        "section alone (a bare PretrainedConfig, no LlamaConfig defaults), so building the drafter raises "
        "AttributeError: 'SpeculatorsConfig' object has no attribute ..."
    ),
    "eagle3.vllm.compressed_tensors_activations": (
        "quantization_config (compressed-tensors) has an activation-quantization format with integer weights and no "
        "input_activations: vLLM asserts such a group's weights are floats (AssertionError building the drafter)"
    ),
    "eagle3.sglang.config_unrecognized": (
        "config.json has no model_type: SGLang reads it with transformers' AutoConfig, which refuses it: "
        'ValueError "Unrecognized model in ... Should have a `model_type` key in its config.json"'
    ),
    "eagle3.sglang.embed_width_mismatch": (
        "{param}: SGLang's EAGLE-3 worker replaces the drafter's embedding by the target's (set_embed), "
        "which is {target_width} wide, but the drafter's layers take hidden_size={hidden} (no "
        "target_hidden_size to stop the swap): the first forward fails"
    ),
    "eagle3.sglang.skipped_unknown_name": (
        "{name}: SGLang has no parameter {name} or model.{name}: skipped without a word, the weight is not used"
    ),
    "eagle3.sglang.shape_mismatch": (
        "{name} is {got} but SGLang's {param} is {want}: AssertionError \"Attempted to load weight ({got}) "
        'into parameter ({want})"'
    ),
    "eagle3.sglang.random_init": (
        "{param} is never loaded: SGLang does not report missing weights, so it stays randomly initialised"
    ),
    "eagle3.sglang.d2t_dtype": (
        "{name} is {dtype}: SGLang computes hot_token_id = d2t + arange in that floating type, so draft "
        "token ids go through a float (rounded past 256 for BF16) before indexing the target vocabulary"
    ),
    "eagle3.sglang.dropped": ("{name} is not used by SGLang (skipped by load_weights)"),
    "eagle3.sglang.unread": (
        "{param} is never loaded and never read: SGLang's layers after the first normalise with hidden_norm "
        "(hidden_norm(hidden_states, residual)), not input_layernorm"
    ),
    "eagle3.sglang.loaded_unread": (
        "{name} is loaded but never read: SGLang's layers after the first normalise with hidden_norm, so a "
        "drafter trained to normalise them with input_layernorm runs with its hidden_norm instead"
    ),
    "eagle3.sglang.dropped.not_trained": ("{name}: no parameter of that name; skipped (not a trained weight)"),
    "eagle3.sglang.skipped_unknown_name.mla": ('{name}: logged "Eagle3 MLA: skipping unexpected weight" and not used'),
    "eagle3.sglang.architecture_not_eagle3": (
        "architectures[0] is {arch}, not an EAGLE-3 class SGLang registers ({registered}): a class SGLang "
        "knows as a target model loads it and fails with KeyError: 'midlayer.self_attn.qkv_proj.weight' "
        "(AngelSlim#39); any other name is refused"
    ),
    "eagle3.sglang.from_target.embedding": ("{param}: the EAGLE-3 worker sets the target's embedding (set_embed)"),
    "eagle3.sglang.random_init.own_embedding": (
        "{param}: target_hidden_size differs from hidden_size, so SGLang keeps the drafter's own embedding "
        "(set_embed returns early), and the drafter has none: it stays randomly initialised"
    ),
    "eagle3.sglang.embed_tokens_overridden": (
        "{name} is loaded, then replaced by the target's embedding (set_embed): harmless when it is a frozen "
        "copy of the target's, as EAGLE-3 training keeps it (--values --base checks)"
    ),
    "eagle3.sglang.from_target.lm_head": (
        "{param}: no draft_vocab_size, so SGLang loads the target's lm_head (load_lm_head_from_target)"
    ),
    "eagle3.sglang.lm_head_random": (
        "{param} is missing but draft_vocab_size is set: SGLang builds its own [draft_vocab_size, hidden] "
        "head and never fills it, so it stays RANDOM, silently (accept length 1.00, sglang PR#27908)"
    ),
    "eagle3.sglang.d2t_length.short": (
        "{name} has {d2t_length} entries, not one per row of the draft head (draft_vocab_size, or vocab_size "
        "when tied): SGLang consumes it into hot_token_id without a check, and draft ids past its end cannot "
        "be mapped"
    ),
    "eagle3.sglang.d2t_length.long": (
        "{name} has {d2t_length} entries, not one per row of the draft head (draft_vocab_size, or vocab_size "
        "when tied): SGLang consumes it into hot_token_id without a check; the map was built for another "
        "draft vocabulary"
    ),
    "eagle3.sglang.d2t_consumed": ("{name} becomes hot_token_id (d2t + arange)"),
    "eagle3.sglang.d2t_missing": ("no d2t: hot_token_id stays None, so draft token ids are not mapped to target ids"),
    "eagle3.sglang.not_needed": ("{param}: no d2t; not needed (one vocabulary)"),
    "eagle3.sglang.draft_vocab_size_absent": (
        "config.json has no draft_vocab_size key: LlamaForCausalLMEagle3.__init__ reads "
        "config.draft_vocab_size, AttributeError: 'LlamaConfig' object has no attribute 'draft_vocab_size' "
        "(set it, to null for the target's head)"
    ),
    "eagle3.sglang.quantization_scheme_unsupported": (
        "quantization_config (compressed-tensors) quantizes weights to int per channel or group without "
        "activations, and not in the pack-quantized format at 4 or 8 bits: SGLang has no scheme for it, "
        'ImportError "Other method (CompressedTensorsW4A16Sparse24) is not supported now" when the layer is built'
    ),
    "eagle3.sglang.dropped.mla": ("{name} is not used by SGLang (skipped)"),
    "eagle3.sglang.unfused_weight.q_a_missing": ("{name}: cached for fusing with q_a_proj, which is missing"),
    "eagle3.sglang.unfused_weight.kv_a_missing": (
        "{name}: cached for fusing with kv_a_proj_with_mqa, which is missing"
    ),
    "eagle3.sglang.layers_unsupported": (
        'num_hidden_layers={layers}: ValueError "EAGLE3 currently only supports 1 layer"'
    ),
    "eagle3.sglang.mla_needs_q_lora_rank": (
        'no q_lora_rank: ValueError "Eagle3 MLA layer requires q_lora_rank in the draft config"'
    ),
    "eagle3.sglang.quantization_ignored.mla_nvfp4": (
        "quantization_config is NVFP4 ({method}): SGLang's Eagle3DeepseekV2ForCausalLM overrides a "
        "modelopt_fp4 config and builds the drafter unquantized (it expects bf16 draft weights)"
    ),
    "eagle3.sglang.aux_ids_default": (
        "SGLang reads aux layer ids only from eagle_config.eagle_aux_hidden_state_layer_ids{ignored}; it "
        "uses its default capture [2, n//2, n-3] = the outputs of target layers {outputs}"
    ),
    "eagle3.sglang.config_ignored": (
        "norm_before_residual=true: SGLang's llama_eagle3 does not read it and normalises after taking the "
        "residual, not before as trained"
    ),
    "eagle3.sglang.speculators_format_unsupported": (
        "{defect}: SGLang has no speculators adapter and transformers' AutoConfig refuses a config without a "
        'model_type it knows: ValueError "Unrecognized model ..."'
    ),
    "eagle3.vllm.unknown_name": (
        "{name} becomes {candidate}, which vLLM's drafter has no parameter for: ValueError: There is no "
        "module or parameter named '{candidate}'"
    ),
    "eagle3.vllm.shape_mismatch": (
        '{name} is {got} but vLLM\'s {param} is {want}: "Attempted to load weight ({got}) into parameter ({want})"'
    ),
    "eagle3.vllm.random_init": (
        "{param} is never loaded and vLLM does not check (the drafter's load_weights returns None): it keeps "
        "its initial values"
    ),
    "eagle3.vllm.bias_ignored": (
        "{name}: vLLM builds this layer without a bias and its loader ignores unexpected .bias tensors, so "
        "the trained bias is not used"
    ),
    "eagle3.vllm.d2t_dtype": (
        "{name} is {dtype}: vLLM copies it into its int64 {param} (logging only a dtype warning), so offsets "
        "a {dtype} cannot hold exactly are rounded and draft tokens map to the wrong target ids"
    ),
    "eagle3.vllm.dropped": ("{name} is not used by vLLM (skipped by load_weights)"),
    "eagle3.vllm.unread": (
        "{param} is never loaded and never read: vLLM's layers after the first normalise with input_layernorm "
        "(input_layernorm(hidden_states, residual)), not hidden_norm"
    ),
    "eagle3.vllm.loaded_unread": (
        "{name} is loaded but never read: vLLM's layers after the first normalise with input_layernorm, so a "
        "drafter trained to normalise them with hidden_norm runs with its input_layernorm instead"
    ),
    "eagle3.vllm.dropped.mask_hidden": (
        '{name}: logged "mask_hidden found in weights but model is not configured for parallel drafting. '
        'Skipping loading mask_hidden."'
    ),
    "eagle3.vllm.fc_unused": (
        "{name}: eagle_config.use_aux_hidden_state is false (or null or 0: the engines test its truth), so vLLM "
        "skips fc and the drafter reads one hidden state"
    ),
    "eagle3.vllm.input_norm_unused": ("{name}: norm_before_fc is not set, so vLLM drops it"),
    "eagle3.vllm.dropped.rotary": ("{name}: dropped"),
    "eagle3.vllm.architecture_not_registered": (
        "architectures[0] is {arch}; vLLM's EAGLEConfig makes it {looked_up}{why}, which vLLM does not "
        "register ({registered}): ValueError: Model architectures ['{looked_up}'] are not supported for now."
    ),
    "eagle3.vllm.target_not_supported": (
        "ValueError: Eagle3 is only supported for {supported} models. Got "
        "self.target_model_config.hf_text_config.model_type='{model_type}'"
    ),
    "eagle3.vllm.embed_width_mismatch": (
        "{param}: the drafter has none, so vLLM shares the target's, which is {target_width} wide, with no "
        "width check, but the drafter's layers take hidden_size={hidden}: the first forward fails"
    ),
    "eagle3.vllm.from_target": ("{param}: the drafter has none, so vLLM shares the target's"),
    "eagle3.vllm.embed_not_shared": (
        "{param}: the drafter has none, and vLLM's V1 runner shares the target's only when the widths match: the "
        "target's is {target_width} wide, the drafter's layers take hidden_size={hidden}, so it keeps its own, "
        "which nothing loads: RANDOM"
    ),
    "eagle3.vllm.fc_without_capture": (
        "eagle_config.use_aux_hidden_state is false (or null or 0: the engines test its truth), so vLLM's V1 "
        "runner captures no target hidden states, yet its "
        "proposer runs the MLA drafter's fc (built for the aux states whatever the flag says) over the target's "
        "last hidden state: the first forward fails on fc's width"
    ),
    "eagle3.vllm.runner_v1": (
        "modelled under vLLM's V1 model runner (VLLM_USE_V2_MODEL_RUNNER=0): aux ids from "
        "eagle_aux_hidden_state_layer_ids, then eagle_config.eagle_aux_hidden_state_layer_ids"
    ),
    "eagle3.vllm.target_class_not_eagle3": (
        "the target's class {architecture} does not implement SupportsEagle3: vLLM's model runner raises "
        '"Model does not support EAGLE3 interface" when it sets up the aux hidden-state capture, before serving'
    ),
    "eagle3.sglang.target_class_not_eagle3": (
        "the target's class {architecture} has no set_eagle3_layers_to_capture: SGLang raises ValueError at "
        "start-up (EAGLE-3's aux hidden-state capture requires it)"
    ),
    "eagle3.vllm.embed_tokens_own": (
        "{name}: vLLM uses the drafter's own embedding (has_own_embed_tokens; shared with the target only "
        "when torch.equal to it), so it must equal the target's; a random one collapses acceptance (--values "
        "--base checks)"
    ),
    "eagle3.vllm.lm_head_from_target": (
        "{param}: the drafter has none, so vLLM shares the target's {vocab}-row head, but draft_vocab_size "
        "is {draft_vocab}: draft logits are mapped through d2t as if they were draft-vocabulary logits"
    ),
    "eagle3.vllm.d2t_missing": (
        "{param}: no d2t, so it stays zeros and draft id i is taken for target id i, though draft_vocab_size "
        "{draft_vocab} != the target's vocabulary {target_vocab}"
    ),
    "eagle3.vllm.aux_ids_default": (
        "no aux layer ids where vLLM's model runner looks (eagle_aux_hidden_state_layer_ids, then "
        "eagle_config.layer_ids){ignored}: it captures its default (2, n//2, n-3) = the outputs of target "
        "layers {outputs}"
    ),
    "eagle3.vllm.config_default_differs": (
        "no norm_before_residual: vLLM's speculators adapter defaults it to true, the speculators library "
        "(which trained this drafter) to false, so the hidden norm is applied at another point than in "
        "training"
    ),
    "eagle3.vllm.speculators_config_invalid": ("{defect}"),
    "eagle3.vllm.speculators_config_invalid.serve": (
        "{defect}: vLLM loads it as --speculative-config's model, but `vllm serve` on this checkpoint (the "
        "speculators auto-detection, transformers_utils/config.py maybe_override_with_speculators) raises it"
    ),
    "eagle3.trtllm.missing_weight": ("{param} has no weight in the checkpoint: KeyError: '{param}' while loading"),
    "eagle3.trtllm.d2t_dtype": (
        "{name} is {dtype}: TensorRT-LLM keeps d2t as integer offsets, so a floating one maps draft tokens "
        "to the wrong target ids"
    ),
    "eagle3.trtllm.ignored_name": ("{name}: no module asks for {candidate}, so TensorRT-LLM ignores it silently"),
    "eagle3.trtllm.shape_mismatch": ("{name} is {got} but TensorRT-LLM's {param} is {want}"),
    "eagle3.trtllm.architecture_not_registered": (
        "architectures[0] is {arch}; TensorRT-LLM looks up {looked_up}, which it does not register "
        "({registered}): ValueError: Unknown architecture for AutoModelForCausalLM: {looked_up} (TRT-LLM "
        "PR#15426)"
    ),
    "eagle3.trtllm.from_target.embedding": (
        "embed_tokens: TensorRT-LLM uses the target's (target_hidden_size == hidden_size)"
    ),
    "eagle3.trtllm.lm_head_from_target": (
        "{param}: no lm_head key, so TensorRT-LLM uses the target's {vocab}-row head, but draft_vocab_size "
        "is {draft_vocab}: draft logits are not draft-vocabulary logits"
    ),
    "eagle3.trtllm.from_target.lm_head": (
        "{param}: no lm_head key in the checkpoint, so TensorRT-LLM uses the target's"
    ),
    "eagle3.trtllm.embed_tokens_overridden": (
        "{name} is not used: with target_hidden_size == hidden_size TensorRT-LLM takes the target's "
        "embedding; harmless when it is a frozen copy of the target's (--values --base checks)"
    ),
    "eagle3.trtllm.dropped": ("{name}: no module asks for it; ignored"),
    "eagle3.trtllm.aux_ids_serving_setting": (
        "TensorRT-LLM does not read aux layer ids from the drafter's config{ignored}: it captures "
        "EagleDecodingConfig.eagle3_layers_to_capture, by default the outputs of target layers {outputs}; "
        "set it to match training"
    ),
    "eagle3.trtllm.not_eagle3": (
        "no draft_vocab_size: TensorRT-LLM takes a drafter for EAGLE-3 only when its config has one, so it "
        "does not build an EAGLE-3 drafter for this checkpoint"
    ),
    "eagle3.sglang.target_hidden_mismatch": (
        "fc takes 3 x target_hidden_size={target_hidden} but the target's hidden_size is "
        "{target_hidden_actual}: the fc matmul fails on the first forward"
    ),
    "eagle3.vllm.target_hidden_mismatch": (
        "fc takes 3 x target_hidden_size={target_hidden} but the target's hidden_size is "
        "{target_hidden_actual}: the fc matmul fails on the first forward"
    ),
    "eagle3.trtllm.target_hidden_mismatch": (
        "fc takes 3 x target_hidden_size={target_hidden} but the target's hidden_size is {target_hidden_actual}"
    ),
}


# ---- the capture per target class (engines/capture_verdict.py): params are data, the words are here


def _ids_at(pair: Any) -> str:
    return f"{pair[0]}={json.dumps(pair[1])}" if pair else "no ids it reads"


def _capture_head(p: Params) -> str:
    label = LABELS.get(p.get("engine", ""), "?")
    if p.get("read"):
        return f"reads {_ids_at(p['read'])}{_ignored(p.get('ignored'), p)}: captures"
    return f"no aux layer ids where {label} looks{_ignored(p.get('ignored'), p)}: its default captures"


def _captured(p: Params) -> str:
    return (
        f"{_capture_head(p)} the outputs of target layers {p['captured']} on this {p['layers']}-layer {p['family']} "
        f"target (indices through {p['setup']}; the {p['takes']} of the layer at each index, {p['forward']})"
    )


def _claimed(p: Params) -> str:
    """What the ids the drafter was trained with name, and why ckptdiff reads them so."""
    key, ids = p["claim"]
    if p.get("as_outputs"):
        how = (
            f"it starts at {ids[0]}, SGLang's convention: id k = the output of layer k; the first id is 1 because "
            "the embedding output is never used, sglang PR#25454 (inferred), not vLLM's convention (id j = the "
            "output of layer j-1)"
        )
    elif p.get("default_depth"):
        m = p["default_depth"]
        how = (
            f"they are [2, n//2, n-3] for n = {m}, the default capture's layer indices, each the input of its layer, "
            "as vLLM's default, SGLang's DeepSeek-V2 class and the EAGLE-3 reference code index them (inferred)"
        )
        if p.get("class_reading") is not None:
            how += (
                f"; they were written for that convention, not for {LABELS.get(p.get('claim_writer', ''), '?')}'s "
                f"{p.get('family', '?')} class, which reads them as the outputs of layers {p['class_reading']}"
            )
    else:
        how = f"as {LABELS.get(p.get('claim_writer', ''), '?')} captures them on this class, where {key} is written"
    return f"{key}={json.dumps(ids)} name the outputs of layers {{named}} ({how})"


def _span_words(target: Mapping[str, Any]) -> str:
    spans = [f"{a}" if a == b else f"{a}-{b}" for a, b in target["layers"]]
    example = f" such as {target['example']}" if target.get("example") else ""
    return f"a {' or '.join(spans)}-layer {target['family']} model{example}"


def _targets_words(p: Params) -> str:
    """The targets a conditional verdict holds on; one phrase when every class it knows holds at the same depths."""
    targets = p["targets"]
    same = {json.dumps(t["layers"]) for t in targets}
    if len(same) == 1 and len(targets) > 1 and [t["family"] for t in targets] == list(p.get("families", ())):
        spans = [f"{a}" if a == b else f"{a}-{b}" for a, b in targets[0]["layers"]]
        return f"a {' or '.join(spans)}-layer model of any class it knows ({', '.join(p['families'])})"
    return " or ".join(_span_words(t) for t in targets)


CAPTURE_EVENTS: dict[str, Callable[[Params], str]] = {
    "eagle3.capture.decided": _captured,
    "eagle3.capture.differs": lambda p: (
        f"{_captured(p)}, but {_claimed(p).format(named=p['named'])}: every fused hidden state comes from another "
        "layer than in training (vllm PR#43671: position-0 acceptance ~10 %)"
    ),
    "eagle3.capture.out_of_range": lambda p: (
        f"{_ids_at(p['read'])}: id(s) {p['outside']} are never captured from a {p['layers']}-layer target "
        f"({p['family']}): fewer hidden states than fc takes"
    ),
    "eagle3.capture.writer_unknown": lambda p: (
        f"loads as trained if {_ids_at(p['claim'])} were written for the outputs {p['captured']} "
        f"{LABELS.get(p['engine'], '?')} captures on this {p['family']} target "
        f"({LABELS.get(p['claim_writer'], '?')} has no capture rule for it here)"
    ),
    "eagle3.capture.unknown_class": lambda p: (
        f"{_ids_at(p.get('read'))}{_ignored(p.get('ignored'), p)}: ckptdiff has no capture rule for a "
        f"{p['architecture']} target under {LABELS.get(p['engine'], '?')} (it has them for "
        f"{', '.join(p['families'])}): which of its {p['layers']} layers feed fc is not known here"
    ),
    "eagle3.capture.class_unknown": lambda p: (
        f"loads as trained if {LABELS.get(p['engine'], '?')}'s {p['architecture']} class captures the layers "
        f"{_ids_at(p['claim'])} name" + (f" (the outputs of {p['claim'][1]})" if p.get("as_outputs") else "")
    ),
    "eagle3.capture.no_claim": lambda p: (
        f"{_ids_at(p.get('read'))}: {LABELS.get(p['engine'], '?')} captures the layers its "
        f"{'ids' if p.get('read') else 'default'} name for the target's class and depth (give --base to see which)"
    ),
    "eagle3.capture.everywhere": lambda p: (
        f"reads {_ids_at(p['read'])}{_ignored(p.get('ignored'), p)}: captures the outputs of target layers "
        f"{p['example']} on a {p['example_family']} target, and on every target class it knows deep enough for "
        f"the ids ({', '.join(p['families'])}) the layers {p['claim'][0]} names"
    ),
    "eagle3.capture.never": lambda p: (
        f"{_ids_at(p.get('read'))}{_ignored(p.get('ignored'), p)}: on no target class ckptdiff knows "
        f"({', '.join(p['families'])}), at any depth, does {LABELS.get(p['engine'], '?')} capture the layers "
        f"{_ids_at(p['claim'])} name (as "
        f"{'layer outputs, inferred' if p.get('as_outputs') else LABELS.get(p['claim_writer'], '?') + ' captures them'}"
        "): the fused hidden states come from other layers than in training"
    ),
    "eagle3.capture.conditional": lambda p: (
        f"{_ids_at(p.get('read'))}{_ignored(p.get('ignored'), p)}: loads as trained if the target is "
        + _targets_words(p)
        + f" (there {LABELS.get(p['engine'], '?')} captures the layers {_ids_at(p['claim'])} name; give --base to "
        "decide)"
    ),
}
EVENTS.update(CAPTURE_EVENTS)
