"""Replay an engine's DFlash loading (:class:`.model.DFlashEngine` data) on a drafter's names, shapes and config.json,
and, given the target's config (``--base``), what the engine does with that pair at start-up and first forward."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ....checkpoint import Checkpoint
from ....report import EngineEvent, EngineResult
from ...rules import Event
from ..spec import DFlashSpec, stated_ids
from .config_checks import config_refusal, dotted, mask_refusal, present, sink_bias_built
from .model import DFlashEngine

Shape = tuple[int, ...] | None
_RANK = {"error": 0, "warning": 1, "info": 2}


class _Events:
    def __init__(self) -> None:
        self.items: list[EngineEvent] = []

    def add(self, event: Event, tensor: str | None = None, **params: Any) -> None:
        self.items.append(EngineEvent(event.severity, event.code, tensor, event.wording, params, str(event.source)))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _target(base_config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if base_config is None:
        return None
    nested = base_config.get("text_config")
    return nested if isinstance(nested, Mapping) else base_config


def read_ids(engine: DFlashEngine, config: Mapping[str, Any]) -> tuple[str | None, Any, int]:
    """The key the engine reads the target-layer ids at, its value and the engine's capture shift (first present)."""
    for each in engine.ids_keys:
        value = dotted(config, each.key)
        if value is not None and (value != [] or not each.empty_is_unset):
            return each.key, value, each.capture
        if value is None and not each.null_is_unset and present(config, each.key):
            break
    return None, None, 0


def parse_ids(engine: DFlashEngine, raw: Any) -> tuple[int, ...] | None:
    """The ids as the engine parses them: a non-empty list, each an int, or (``ids_int``) anything ``int()`` takes
    (``"3"``); None: malformed to this engine."""
    if not isinstance(raw, list) or not raw:
        return None
    if not engine.ids_int:
        return tuple(raw) if all(_int(v) is not None for v in raw) else None
    return stated_ids(raw)


def expected_params(engine: DFlashEngine, spec: DFlashSpec, fc_in: int | None) -> dict[str, dict[str, Shape]]:
    """Each parameter the engine builds → the shape each checkpoint piece loaded into it must have (``""``: the
    whole parameter; ``q``/``0``…: a stacked shard)."""
    h, hd, n, kv, inter = spec.hidden, spec.head_dim, spec.heads, spec.kv_heads, spec.intermediate
    q = n * hd if n and hd else None
    k = kv * hd if kv and hd else None

    def shape(*dims: int | None) -> Shape:
        return tuple(d for d in dims if d is not None) if all(d for d in dims) else None

    p = engine.param_prefix
    out: dict[str, dict[str, Shape]] = {}
    sinks = sink_bias_built(engine, spec.config)
    for layer in range(spec.layers or 0):
        at = f"{p}layers.{layer}."
        if sinks:
            out[at + "self_attn.attention_sink_bias"] = {"": shape(n)}
        out[at + "input_layernorm.weight"] = {"": shape(h)}
        out[at + "post_attention_layernorm.weight"] = {"": shape(h)}
        out[at + "self_attn.qkv_proj.weight"] = {"q": shape(q, h), "k": shape(k, h), "v": shape(k, h)}
        out[at + "self_attn.o_proj.weight"] = {"": shape(h, q)}
        out[at + "self_attn.q_norm.weight"] = {"": shape(hd)}
        out[at + "self_attn.k_norm.weight"] = {"": shape(hd)}
        out[at + "mlp.gate_up_proj.weight"] = {"0": shape(inter, h), "1": shape(inter, h)}
        out[at + "mlp.down_proj.weight"] = {"": shape(h, inter)}
    if spec.use_aux_hidden_state or not engine.aux_flag_drops_fc:
        out[p + "fc.weight"] = {"": shape(h, fc_in)}
    out[p + "hidden_norm.weight"] = {"": shape(h)}
    out[p + "norm.weight"] = {"": shape(h)}
    if engine.own_embedding:
        out[p + "embed_tokens.weight"] = {"": shape(spec.vocab, h)}
    if engine.own_embedding and engine.mask_embedding:
        out[p + "mask_embedding"] = {"": shape(h)}
    if engine.own_head:
        draft_vocab = _int(spec.config.get("draft_vocab_size")) or spec.vocab
        out["lm_head.weight"] = {"": shape(draft_vocab, h)}
    return out


def simulate(
    engine: DFlashEngine, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
) -> EngineResult:
    """What ``engine`` does with ``checkpoint`` served as a DFlash drafter (against the target ``base_config``)."""
    config = checkpoint.config
    events = _Events()
    if config is None:
        events.items.append(EngineEvent("error", "no_config", None, "dflash.no_config", {"spec": checkpoint.spec}))
        return EngineResult(engine.name, side, tuple(events.items))
    spec = DFlashSpec.of(config, checkpoint.tensors)
    architecture = spec.architecture
    looked_up = engine.looks_up(architecture) if architecture else None
    chosen = next((c for c in engine.classes if looked_up in c.architectures), None)
    if chosen is None:
        registered = sorted({a for c in engine.classes for a in c.architectures})
        events.add(engine.no_class, architecture=architecture, looked_up=looked_up, registered=registered)
        return EngineResult(engine.name, side, tuple(events.items))
    engine = next((replace(engine, **v.changes) for v in engine.variants if v.applies(config)), engine)
    # the engine's config parse, in its order: the checks before the ids, the ids, the rest; then the layer count
    before = engine.config_checks[: engine.checks_before_ids]
    refused = config_refusal(before, config)
    if refused is not None:
        events.add(refused[0], **refused[1])
        return EngineResult(engine.name, side, tuple(events.items))
    key, raw, shift = read_ids(engine, config)
    ids: tuple[int, ...] | None = None
    if raw is not None:
        ids = parse_ids(engine, raw)
        if ids is None and engine.ids_malformed is not None:
            events.add(engine.ids_malformed, key=key, value=raw)
            return EngineResult(engine.name, side, tuple(events.items))
        if ids is None and engine.ids_not_int is not None and shift and raw:
            events.add(engine.ids_not_int, key=key, value=raw)
            return EngineResult(engine.name, side, tuple(events.items))
    refused = config_refusal(engine.config_checks[len(before) :], config)
    if refused is not None:
        events.add(refused[0], **refused[1])
        return EngineResult(engine.name, side, tuple(events.items))
    if engine.layers_required is not None and spec.layers is None:
        events.add(engine.layers_required, key="num_hidden_layers")
        return EngineResult(engine.name, side, tuple(events.items))
    refused = mask_refusal(engine, config, _on_v1(engine))
    if refused is not None:
        events.add(refused[0], **refused[1])
        return EngineResult(engine.name, side, tuple(events.items))
    target = _target(base_config)
    target_layers = _int(target.get("num_hidden_layers")) if target is not None else None
    if target is not None and not _target_class(engine, target, events):
        return EngineResult(engine.name, side, tuple(events.items))
    if not _startup(engine, spec, key, ids, target_layers, events):
        return EngineResult(engine.name, side, tuple(events.items))
    if engine.sink_backend is not None and present(config, engine.sink_backend[0]):
        key, backend_refused = engine.sink_backend
        if dotted(config, key):  # the layers refuse to build (a ValueError naming the backend)
            events.add(backend_refused, key=key)
            return EngineResult(engine.name, side, tuple(events.items))
    features = spec.features(ids)
    in_hidden = next((v for k in engine.fc_hidden_keys if (v := _int(config.get(k)))), None)
    fc_in = features * in_hidden if features and in_hidden else None
    tensors, parameters = _load(engine, spec, checkpoint, fc_in, features, target, events)
    if target is not None:
        _against_target(engine, spec, target, ids, shift, features, fc_in, events)
    else:
        needs = {"layers_above": max(ids) if ids else None, "hidden": spec.hidden, "mask": spec.mask_token_id.value}
        events.add(engine.target_unknown, **needs)
        if _unprojected_applies(engine, spec):
            # No target: it is taken at the drafter's width (target_unknown says so), capturing one state per id
            # the runner reads, else its class's default of three.
            v2, v1 = _runner_ids(engine, spec, ids, shift)
            indices = v1 if _on_v1(engine) else v2
            _unprojected(engine, spec, len(set(indices)) if indices else 3, spec.hidden, None, events, assumed=True)
    ordered = sorted(events.items, key=lambda event: _RANK[event.severity])
    return EngineResult(engine.name, side, tuple(ordered), tensors=tuple(tensors), parameters=tuple(parameters))


def _target_class(engine: DFlashEngine, target: Mapping[str, Any], events: _Events) -> bool:
    """The target's class must capture hidden states for a DFlash drafter (vLLM: the EAGLE-3 interface; SGLang:
    set_dflash_layers_to_capture). False: the engine refuses at start-up."""
    architectures = target.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    if architecture in engine.refused_targets:
        events.add(engine.target_refused, architecture=architecture)
        return False
    if architecture not in engine.capturing_targets:
        events.add(engine.target_class_unknown, architecture=architecture)
    return True


def _startup(
    engine: DFlashEngine,
    spec: DFlashSpec,
    key: str | None,
    ids: tuple[int, ...] | None,
    target_layers: int | None,
    events: _Events,
) -> bool:
    """The checks before the drafter's weights load: SGLang's ids against the target's depth at start-up, then
    against ``num_target_layers`` when it builds fc. False: the engine stops here."""
    if engine.ids_vs_target is not None and target_layers is not None:
        used = ids if ids is not None else engine.default_ids(target_layers, spec.layers)
        if used is None or any(i < 0 or i >= target_layers for i in used):
            events.add(engine.ids_vs_target, ids=list(used) if used else None, layers=target_layers, key=key)
            return False
    trained = spec.num_target_layers
    if engine.ids_vs_trained_depth is not None:
        # DFlashDraftModel sizes fc for num_target_layers, else the largest id + 1, else its own layer count, and
        # builds the ids from that depth when the config has none (which needs a depth of 4 or more).
        limit = trained if trained is not None else (max(ids) + 1 if ids else spec.layers)
        if limit is not None:
            used = ids if ids is not None else engine.default_ids(limit, spec.layers)
            if used is None or any(i < 0 or i >= limit for i in used):
                events.add(engine.ids_vs_trained_depth, ids=list(ids) if ids else None, limit=limit, key=key)
                return False
    return True


Fates = tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]


def _load(
    engine: DFlashEngine,
    spec: DFlashSpec,
    checkpoint: Checkpoint,
    fc_in: int | None,
    features: int | None,
    target: Mapping[str, Any] | None,
    events: _Events,
) -> Fates:
    expected = expected_params(engine, spec, fc_in)
    p = engine.param_prefix
    d2t = _d2t_param(engine, spec, target)
    if d2t:
        expected["draft_id_to_target_id"] = {"": None}
    filled: dict[str, set[str]] = {}
    broken: set[str] = set()
    carried: set[str] = set()
    tensors: list[tuple[str, str, str | None]] = []
    for name in sorted(checkpoint.tensors):
        shape = tuple(checkpoint.tensors[name].shape)
        refusal = next((r for r in engine.refusals if r.piece in name), None)
        if refusal is not None:
            events.add(refusal.event, name, name=name)
            tensors.append((name, "error", None))
            continue
        if any(piece in name for piece, _ in engine.discards):
            tensors.append((name, "skipped", None))
            continue
        if "d2t" in name and engine.own_head:
            if d2t:
                tensors.append((name, "renamed", "draft_id_to_target_id"))
                filled.setdefault("draft_id_to_target_id", set()).add("")
            else:
                events.add(engine.unknown, name, name=name, candidate="draft_id_to_target_id")
                tensors.append((name, "error", None))
            continue
        rest = name
        if name.startswith("model."):
            rest = name[len("model.") :] if engine.strips_model_prefix else "model." + name
        if "embed_tokens" in rest or "lm_head" in rest:
            if not engine.own_embedding and not engine.own_head:
                events.add(engine.carried_unused, name, name=name)
                tensors.append((name, "from_target", None))
                continue
        for alias in engine.aliases:
            rest = re.sub(alias.pattern, alias.replacement, rest)
        if engine.aux_flag_drops_fc and not spec.use_aux_hidden_state and rest.startswith("fc."):
            if engine.fc_unused is not None:
                events.add(engine.fc_unused, name, name=name)
            tensors.append((name, "skipped", None))
            continue
        shard = ""
        for stacked in engine.stacked:
            if f".{stacked.piece}." in f".{rest}":
                rest, shard = rest.replace(f"{stacked.piece}.", f"{stacked.param}.", 1), stacked.shard
                break
        param = rest if rest.startswith("lm_head") and engine.own_head else p + rest
        if param not in expected or shard not in expected[param]:
            events.add(engine.unknown, name, name=name, candidate=param)
            tensors.append((name, "error" if engine.unknown.severity == "error" else "skipped", None))
            continue
        want = expected[param][shard]
        if want is not None and shape != want:
            is_fc = param == p + "fc.weight"
            event = engine.fc_mismatch if is_fc else engine.shape_mismatch
            events.add(event, name, name=name, param=param, got=list(shape), want=list(want), features=features)
            tensors.append((name, "error", param))
            broken.add(param)
            continue
        if "embed_tokens" in param or param.startswith("lm_head"):
            carried.add(param)
        filled.setdefault(param, set()).add(shard)
        tensors.append((name, "loaded" if param.removeprefix(p) == name else "renamed", param))
    return tensors, _parameters(engine, expected, filled, broken, carried, events)


def _d2t_param(engine: DFlashEngine, spec: DFlashSpec, target: Mapping[str, Any] | None) -> bool:
    """vLLM builds ``draft_id_to_target_id`` when the draft vocabulary differs from the target's."""
    if not engine.own_head:
        return False
    draft_vocab = _int(spec.config.get("draft_vocab_size")) or spec.vocab
    target_vocab = _int(target.get("vocab_size")) if target is not None else spec.vocab
    return draft_vocab is not None and target_vocab is not None and draft_vocab != target_vocab


def _parameters(
    engine: DFlashEngine,
    expected: dict[str, dict[str, Shape]],
    filled: dict[str, set[str]],
    broken: set[str],
    carried: set[str],
    events: _Events,
) -> list[tuple[str, str]]:
    p = engine.param_prefix
    out: list[tuple[str, str]] = []
    for param, shards in expected.items():
        if param in broken:
            out.append((param, "error"))
        elif filled.get(param, set()) >= set(shards):
            out.append((param, "loaded"))
        elif param == p + "embed_tokens.weight" and engine.own_embedding_kept:
            out.append((param, "random"))
            events.add(engine.param_missing, None, param=param)
        elif param in (p + "embed_tokens.weight", "lm_head.weight"):
            out.append((param, "from_target"))
            events.add(engine.from_target, None, name=param, carried=False)
        elif param == p + "mask_embedding":
            out.append((param, "not_needed"))
        elif param == "draft_id_to_target_id":
            out.append((param, "default"))
        elif engine.sink_bias is not None and param.endswith(".attention_sink_bias"):
            out.append((param, engine.sink_bias.fate_missing))
            events.add(engine.sink_bias.missing, None, param=param)
        else:
            out.append((param, "random"))
            events.add(engine.param_missing, None, param=param)
    for param in carried:
        events.add(engine.carried_unused, None, name=param)
    taken = ("embed_tokens.weight", "lm_head.weight") if not engine.own_embedding else ()
    for name in taken or (("lm_head.weight",) if not engine.own_head else ()):
        out.append((name, "from_target"))
        events.add(engine.from_target, None, name=name, carried=False)
    return out


#: Bytes per element of the KV cache in the drafter's dtype (``--dtype auto``: its torch_dtype; SGLang's draft KV
#: cache follows the draft model's dtype unless --speculative-draft-kv-cache-dtype says otherwise).
_KV_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def _attention_vs_target(engine: DFlashEngine, spec: DFlashSpec, target: Mapping[str, Any], events: _Events) -> None:
    """The drafter's attention against the target's: a head_dim or KV-head count of its own (or an MLA target) is
    said, with how the engine's KV cache takes it; the two are never checked against each other."""
    if engine.draft_kv_cache is None or spec.head_dim is None or spec.kv_heads is None or not spec.layers:
        return
    mla = _int(target.get("kv_lora_rank")) is not None
    head_dim: int | None
    kv_heads: int | None
    if mla:  # one latent per token: kv_lora_rank + the rope part
        head_dim, kv_heads = (_int(target.get("kv_lora_rank")) or 0) + (_int(target.get("qk_rope_head_dim")) or 0), 1
    else:
        heads, hidden = _int(target.get("num_attention_heads")), _int(target.get("hidden_size"))
        head_dim = _int(target.get("head_dim")) or (hidden // heads if hidden and heads else None)
        kv_heads = _int(target.get("num_key_value_heads")) or heads
    if head_dim is None or kv_heads is None or (not mla and (head_dim, kv_heads) == (spec.head_dim, spec.kv_heads)):
        return
    dtype = spec.config.get("torch_dtype") or spec.config.get("dtype")
    width = _KV_BYTES.get(dtype) if isinstance(dtype, str) else None
    per_token = spec.kv_heads * 2 * spec.head_dim * spec.layers * width if width else None
    events.add(
        engine.draft_kv_cache,
        head_dim=spec.head_dim,
        kv_heads=spec.kv_heads,
        layers=spec.layers,
        target_head_dim=head_dim,
        target_kv_heads=kv_heads,
        target_mla=mla,
        bytes_per_token=per_token,
        dtype=dtype if width else None,
    )


def _against_target(
    engine: DFlashEngine,
    spec: DFlashSpec,
    target: Mapping[str, Any],
    ids: tuple[int, ...] | None,
    shift: int,
    features: int | None,
    fc_in: int | None,
    events: _Events,
) -> None:
    """What the pair does past loading: the target's embedding and head at the drafter's width, the mask token in
    the target's vocabulary, and (vLLM) as many captured target states as fc takes (without fc: the drafter's
    width)."""
    target_hidden, target_vocab = _int(target.get("hidden_size")), _int(target.get("vocab_size"))
    if spec.hidden is not None and target_hidden is not None and spec.hidden != target_hidden:
        events.add(engine.hidden_vs_target, hidden=spec.hidden, target_hidden=target_hidden)
    mask = _int(spec.mask_token_id.value)
    if mask is not None and target_vocab is not None and mask >= target_vocab:
        events.add(engine.mask_vs_target, mask_token_id=mask, vocab=target_vocab, key=spec.mask_token_id.key)
    _attention_vs_target(engine, spec, target, events)
    layers = _int(target.get("num_hidden_layers"))
    unprojected = _unprojected_applies(engine, spec)
    if engine.not_captured is None or layers is None or not features:
        return
    if not spec.use_aux_hidden_state and not unprojected:
        return
    from ...eagle3.engines.capture import capture_for
    from ...eagle3.engines.vllm import CAPTURES

    architectures = target.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    family = capture_for(CAPTURES, architecture, target.get("model_type"))
    if family is None:
        return

    def fails(indices: tuple[int, ...] | None) -> tuple[bool, int]:
        captured = family.outputs(indices, layers)
        width = len(captured) * target_hidden if target_hidden is not None else None
        if unprojected:  # no fc: the concatenated states themselves must be the drafter's hidden size wide
            return width is not None and width != spec.hidden, len(captured)
        # combine_hidden_states: the captured states, each the target's hidden size wide, against fc's input.
        return len(captured) != features or (width is not None and fc_in is not None and width != fc_in), len(captured)

    v2, v1 = _runner_ids(engine, spec, ids, shift)
    # --vllm-runner v1: the V1 runner's capture (gpu_model_runner.py _get_eagle3_aux_layers_from_config), observed
    # by the oracle's vllm_v1 variant; fc is the same drafter's under both runners.
    on_v1 = _on_v1(engine)
    indices = v1 if on_v1 else v2
    failed, captured = fails(indices)
    if unprojected:
        outputs = list(family.outputs(indices, layers))
        _unprojected(engine, spec, captured, target_hidden, outputs, events)
    elif failed:
        event = engine.not_captured_v1 if on_v1 and engine.not_captured_v1 else engine.not_captured
        events.add(event, ids=list(ids) if ids else None, layers=layers, captured=captured,
                   features=features)  # fmt: skip
    if engine.v1_ids is not None and engine.v1_differs is not None and v1 != v2:
        v1_failed, _ = fails(v1)
        events.add(engine.v1_differs, v1=list(v1) if v1 else None, v2=list(v2) if v2 else None,
                   fails=v1_failed and not failed)  # fmt: skip


def _on_v1(engine: DFlashEngine) -> bool:
    from ...engine_settings import current

    return engine.v1_ids is not None and current().vllm_runner == "v1"


def _runner_ids(
    engine: DFlashEngine, spec: DFlashSpec, ids: tuple[int, ...] | None, shift: int
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The capture indices each vLLM runner reads (None: the target class's default): V2's, then V1's."""
    v2 = tuple(i + shift for i in ids) if ids else None
    v1 = engine.v1_ids(spec.config) if engine.v1_ids is not None else None
    return v2, v1


def _unprojected_applies(engine: DFlashEngine, spec: DFlashSpec) -> bool:
    """``use_aux_hidden_state`` false where the engine then builds no fc but still captures (vLLM)."""
    return engine.aux_flag_drops_fc and not spec.use_aux_hidden_state and engine.unprojected is not None


def _unprojected(
    engine: DFlashEngine,
    spec: DFlashSpec,
    captured: int,
    target_hidden: int | None,
    outputs: list[int] | None,
    events: _Events,
    assumed: bool = False,
) -> None:
    """No fc: the ``captured`` target states reach the drafter concatenated as they are. Their width must be the
    drafter's hidden size (its hidden-state buffer, V2; the proposer's assertion, V1), else the first forward fails;
    one state of that width is read as it is."""
    width = captured * target_hidden if target_hidden is not None else None
    params: dict[str, Any] = {
        "captured": captured,
        "target_hidden": target_hidden,
        "width": width,
        "hidden": spec.hidden,
        "outputs": outputs,
        "assumed": assumed,
    }
    if width is None or spec.hidden is None:
        return
    if width != spec.hidden:
        v1 = _on_v1(engine) and engine.unprojected_v1 is not None
        event = engine.unprojected_v1 if v1 else engine.unprojected
        if event is not None:
            events.add(event, **params)
    elif engine.as_is is not None:
        events.add(engine.as_is, **params)
