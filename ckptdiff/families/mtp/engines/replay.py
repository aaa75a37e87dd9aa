"""Replay an engine's MTP loading (:class:`.model.MtpEngine` data) on a checkpoint's names, shapes and config.json."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ....checkpoint import Checkpoint
from ....report import EngineEvent, EngineResult
from ...rules import Event
from ..spec import MtpSpec, is_spec_weight, layer_index
from . import prefix, prefix_quant
from .model import Fp8Load, MtpClass, MtpEngine
from .shapes import expected_layer

#: Suffixes of the scale tensors a quantized linear layer stores beside its weight (FP8 block, per tensor).
SCALE_SUFFIXES = ("weight_scale_inv", "weight_scale", "input_scale")
_EXPERT = re.compile(r"experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.")
_RANK = {"error": 0, "warning": 1, "info": 2}


class _Events:
    def __init__(self) -> None:
        self.items: list[EngineEvent] = []

    def add(self, event: Event, tensor: str | None = None, **params: Any) -> None:
        self.items.append(EngineEvent(event.severity, event.code, tensor, event.wording, params, str(event.source)))


def simulate(
    engine: MtpEngine, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
) -> EngineResult:
    """What ``engine`` does with ``checkpoint``'s MTP layers served as its drafter: the checkpoint is the target, or
    (``base_config`` given) a standalone export served beside that target."""
    config = checkpoint.config
    events = _Events()
    if config is None:
        events.items.append(EngineEvent("error", "no_config", None, "mtp.no_config", {"spec": checkpoint.spec}))
        return EngineResult(engine.name, side, tuple(events.items))
    spec = MtpSpec.of(config, checkpoint.tensors)
    target = MtpSpec.of(base_config, ()) if base_config is not None else None
    chosen = engine.choose(spec)
    if chosen is None:
        registered = [c.name for c in engine.classes]
        events.add(engine.no_class, model_type=spec.model_type, architecture=spec.architecture, registered=registered)
        return EngineResult(engine.name, side, tuple(events.items))
    if chosen.not_modelled is not None:
        events.add(chosen.not_modelled, cls=chosen.name, architecture=spec.architecture)
        return EngineResult(engine.name, side, tuple(events.items))
    if chosen.layout == "deepseek":
        allowed = engine.nextn_allowed
        if spec.nextn is None:
            events.add(engine.nextn_absent, cls=chosen.name, nextn=None)
            return EngineResult(engine.name, side, tuple(events.items))
        if allowed is not None and spec.nextn not in allowed:
            assert engine.nextn_refused is not None
            events.add(engine.nextn_refused, nextn=spec.nextn, allowed=list(allowed))
            return EngineResult(engine.name, side, tuple(events.items))
        if spec.nextn <= 0:
            events.add(engine.nextn_absent, cls=chosen.name, nextn=spec.nextn)
            return EngineResult(engine.name, side, tuple(events.items))
    if chosen.needs_moe is not None and chosen.layout == "deepseek":
        layers = engine.layer_ids(spec, target)
        if not any(engine.moe_layer(spec, layer) for layer in layers):
            events.add(chosen.needs_moe, cls=chosen.name, layers=list(layers))
            return EngineResult(engine.name, side, tuple(events.items))
    if chosen.layout == "mtp":
        tensors, parameters = _replay_prefix(engine, chosen, spec, checkpoint, events)
    else:
        tensors, parameters = _replay_layers(engine, chosen, spec, target, checkpoint, events)
    ordered = sorted(events.items, key=lambda event: _RANK[event.severity])
    return EngineResult(engine.name, side, tuple(ordered), tensors=tuple(tensors), parameters=tuple(parameters))


Fates = tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]


def _param_of(engine: MtpEngine, layer: int, rest: str) -> str:
    """The parameter a layer's tensor fills: a routed expert's into the fused expert weights (shard
    ``[{expert}_{piece}]``), stacked pieces into their fused parameter (``[shard]``), the spec weights and the
    block under the engine's prefixes."""
    expert = _EXPERT.search(rest)
    if expert is not None:
        index, piece = expert.group(1), expert.group(2)
        which = "w2" if piece == "down_proj" else "w13"
        suffix = rest[expert.end() :]  # weight, weight_scale_inv, ...
        shard = index if which == "w2" else f"{index}_{piece.removesuffix('_proj')}"
        return engine.block_param(layer, f"{engine.experts}.{which}_{suffix}") + f"[{shard}]"
    for piece in engine.fused:
        if f".{piece.piece}." in f".{rest}":
            rest = rest.replace(f"{piece.piece}.", f"{piece.param}.", 1) + f"[{piece.shard}]"
            break
    return engine.spec_param(layer, rest) if is_spec_weight(f".{rest}") else engine.block_param(layer, rest)


def _base(param: str) -> str:
    return re.sub(r"\[\w+\]$", "", param)


def _replay_layers(
    engine: MtpEngine, chosen: MtpClass, spec: MtpSpec, target: MtpSpec | None, checkpoint: Checkpoint, events: _Events
) -> Fates:
    layers = engine.layer_ids(spec, target)
    experts = spec.experts
    quant = spec.quantization
    fp8 = chosen.fp8 if chosen.fp8 is not None and quant is not None and chosen.fp8.applies(quant) else None
    params: dict[str, tuple[int, ...] | None] = {}
    layer_of: dict[str, int] = {}  # parameter → the MTP layer that fills it
    for layer in layers:
        for rest, shape in expected_layer(spec, moe=engine.moe_layer(spec, layer)).items():
            if any(piece in rest for piece in engine.from_target):
                continue
            param = _param_of(engine, layer, rest)
            params.setdefault(param, shape)
            layer_of.setdefault(param, layer)
            if fp8 is not None and quant is not None and not is_spec_weight(f".{rest}") and fp8.quantized(rest):
                for kind in fp8.scales(quant):  # built beside the quantized weight, filled or not
                    scale_param = _param_of(engine, layer, rest.removesuffix("weight") + kind)
                    params.setdefault(scale_param, None)
                    layer_of.setdefault(scale_param, layer)
    taken = {t.format(layer=layer) for t in engine.taken for layer in layers}
    for name in taken:
        params.setdefault(name, None)
    quantized = quant is not None
    filled: dict[str, str] = {}
    writers: dict[str, list[str]] = {}  # parameter → the tensors written into it, in the loader's (sorted) order
    tensors: dict[str, tuple[str, str | None]] = {}
    plain: dict[str, list[tuple[str, str]]] = {}  # a plain linear's weight → its tensors stored and their parameters
    touched: set[int] = set()
    outside: list[str] = []
    unread: dict[int, int] = {}
    for name in sorted(checkpoint.tensors):
        info = checkpoint.tensors[name]
        found, rest = _in_layers(engine, layers, name)
        if found is None:
            top = _top_level(engine, chosen, layers, name)
            if top is not None:
                writers.setdefault(top, []).append(name)
                tensors[name] = ("loaded" if top == name else "renamed", top)
                filled[top] = "loaded"
                continue
            index = layer_index(name)
            if index is not None and index in spec.stored and index not in layers and _is_mtp_layer(spec, index):
                unread[index] = unread.get(index, 0) + 1
            else:
                outside.append(name)
            tensors[name] = ("skipped", None)
            continue
        if any(piece in rest for piece in engine.from_target):
            events.add(engine.from_target_event, name, name=name)
            tensors[name] = ("skipped", None)
            continue
        if rest.startswith("embed_tokens.") and found != layers[0]:
            tensors[name] = ("skipped", None)  # "MTP modules share the embedding: only the first is loaded"
            continue
        expert = _EXPERT.search(rest)
        if expert is not None and experts is not None and int(expert.group(1)) >= experts:
            event = engine.extra_expert
            events.add(event, name, name=name, experts=experts, candidate=name)
            tensors[name] = ("error" if event.severity == "error" else "skipped", None)
            continue
        param = _param_of(engine, found, rest)
        base = _base(param)
        scale = any(rest.endswith(suffix) for suffix in SCALE_SUFFIXES)
        linear = _plain(fp8, rest) if fp8 is not None else None
        if linear is not None:
            plain.setdefault(f"{name[: len(name) - len(rest)]}{linear}.weight", []).append((name, base))
            if scale:  # a plain linear has no scale parameter: "not found in params_dict", skipped
                tensors[name] = ("skipped", None)
                continue
        if scale and quantized and fp8 is None:
            params.setdefault(param, None)
        if param not in params:
            stacked = param != base and expert is None
            event = engine.stacked_unknown if stacked and not chosen.skips_stacked_unknown else engine.unknown
            events.add(event, name, name=name, candidate=base)
            tensors[name] = ("error" if event.severity == "error" else "skipped", None)
            continue
        want = params[param]
        if want is not None and tuple(info.shape) != tuple(want):
            events.add(engine.shape_error, name, name=name, param=base, got=list(info.shape), want=list(want))
            tensors[name] = ("error", param)
            filled[param] = "error"
            continue
        if fp8 is not None and any(piece in rest for piece in fp8.checked):
            want_dtype = fp8.scale_dtype if scale else fp8.weight_dtype
            if fp8.refuses(info.dtype, want_dtype):
                events.add(fp8.dtype_refused, name, name=name, param=base, got=info.dtype, want=want_dtype)
                tensors[name] = ("error", param)
                filled[param] = "error"
                continue
        touched.add(found)
        moved = base.removeprefix("model.") != name.removeprefix("model.")
        writers.setdefault(param, []).append(name)
        tensors[name] = ("renamed" if moved else "loaded", param)
        filled[param] = "loaded"
    _join(engine, params, filled, tensors)
    if fp8 is not None:
        _plain_events(fp8, engine, plain, checkpoint, events)
    # A parameter written twice keeps the last tensor written before the load raised (if it does).
    raised_at = min((name for name, (fate, _) in tensors.items() if fate == "error"), default=None)
    for names in writers.values():
        reached = [name for name in names if raised_at is None or name < raised_at] or names[:1]
        for other in names:
            if other != reached[-1] and tensors[other][0] in ("loaded", "renamed"):
                tensors[other] = ("skipped", None)
    for name, (fate, into) in list(tensors.items()):
        if into in taken and fate in ("loaded", "renamed"):
            events.add(engine.from_target_event, name, name=name)
            tensors[name] = ("from_target", into)
    if outside:
        events.add(engine.outside, count=len(outside), layers=list(layers))
    for layer in sorted(unread):
        events.add(engine.unread_layer, layer=layer, layers=list(layers))
    missing_layers = [layer for layer in layers if layer not in touched]
    for layer in missing_layers:
        events.add(engine.layer_missing, layer=layer, cls=chosen.name, nextn=spec.nextn)
    parameters: list[tuple[str, str]] = []
    told: set[str] = set()  # a fused parameter's unwritten shards are told once
    for param in params:
        if param in taken:
            parameters.append((param, "from_target"))
            continue
        if param in filled:
            parameters.append((param, filled[param]))
            continue
        absent = _absent_event(engine, quantized, _base(param), fp8)
        parameters.append((param, "random" if absent.severity == "warning" else "missing"))
        # a whole missing layer is told once, by its event
        if layer_of.get(param) not in missing_layers and _base(param) not in told:
            told.add(_base(param))
            events.add(absent, None, param=_base(param))
    listed = [(name, fate, into) for name, (fate, into) in tensors.items()]
    return listed, parameters


def _top_level(engine: MtpEngine, chosen: MtpClass, layers: tuple[int, ...], name: str) -> str | None:
    """The parameter a top-level tensor fills, for loaders that take some: vLLM's embedding, and Glm4MoeMTP's
    lm_head as the first MTP layer's shared_head.head."""
    if engine.loads_top_embedding and name in ("model.embed_tokens.weight", "embed_tokens.weight"):
        return "model.embed_tokens.weight"
    if chosen.loads_top_head and name == "lm_head.weight" and layers:
        return f"model.layers.{layers[0]}.shared_head.head.weight"
    return None


def _is_mtp_layer(spec: MtpSpec, index: int) -> bool:
    """A stored layer that holds an MTP layer's own tensors (not one of the target's main layers)."""
    return any(is_spec_weight(name) for name in spec.stored.get(index, ()))


def _join(
    engine: MtpEngine,
    params: dict[str, tuple[int, ...] | None],
    filled: dict[str, str],
    tensors: dict[str, tuple[str, str | None]],
) -> None:
    """A joined parameter (SGLang's fused_qkv_a_proj_with_mqa) is written only once all its pieces are there:
    otherwise none is, and the pieces that were there go unused."""
    for joined in engine.joined:
        shards = [p for p in params if _base(p) == joined]
        if shards and not all(filled.get(p) == "loaded" for p in shards):
            for shard in shards:
                filled.pop(shard, None)
            for name, (fate, into) in list(tensors.items()):
                if into in shards and fate in ("loaded", "renamed"):
                    tensors[name] = ("skipped", None)


def _plain(fp8: Fp8Load, rest: str) -> str | None:
    """The plain linear (``eh_proj``) a layer's tensor belongs to, if any."""
    return next((linear for linear in fp8.plain if rest.startswith(f"{linear}.")), None)


def _plain_events(
    fp8: Fp8Load,
    engine: MtpEngine,
    plain: dict[str, list[tuple[str, str]]],
    checkpoint: Checkpoint,
    events: _Events,
) -> None:
    """A plain linear stored in FP8 beside its scales is copied in without them: its values are wrong by them,
    silently (an FP8 weight stored without scales is copied exactly). A scale beside a plain linear whose weight is
    not FP8 is just a name without a parameter."""
    for weight, stored in plain.items():
        scales = sorted((name, param) for name, param in stored if name != weight)
        if not scales:
            continue
        info = checkpoint.tensors.get(weight)
        if info is not None and info.dtype.startswith("F8_"):
            events.add(fp8.plain_unscaled, weight, name=weight, dtype=info.dtype, scales=[name for name, _ in scales])
            continue
        for name, param in scales:
            events.add(engine.unknown, name, name=name, candidate=param)


def _absent_event(engine: MtpEngine, quantized: bool, param: str, fp8: Fp8Load | None = None) -> Event:
    if fp8 is not None and param.endswith(SCALE_SUFFIXES):
        return fp8.scale_missing
    if engine.name == "vllm" and quantized:
        from .vllm import QUANTIZED_PARAM_MISSING

        return QUANTIZED_PARAM_MISSING
    return engine.param_missing if engine.strict(param) else engine.param_missing_exempt


def _in_layers(engine: MtpEngine, layers: tuple[int, ...], name: str) -> tuple[int | None, str]:
    for layer in layers:
        for template in engine.prefixes:
            prefix = template.format(layer=layer)
            if name.startswith(prefix):
                return layer, name[len(prefix) :]
    return None, ""


def _replay_prefix(
    engine: MtpEngine, chosen: MtpClass, spec: MtpSpec, checkpoint: Checkpoint, events: _Events
) -> Fates:
    """Qwen3-Next's ``mtp.*`` layout, replayed by :mod:`.prefix` from the class's rules; an FP8 block with the
    engine's FP8 rules (:mod:`.prefix_quant`). Another quantization (compressed-tensors, AWQ, GPTQ, ModelOpt) is not
    modelled: then only the block's presence is checked, and the verdict says so."""
    load = chosen.prefix
    config = spec.quantization
    quant = None
    dtypes = {name: info.dtype for name, info in checkpoint.tensors.items()}
    if load is not None and load.quant is not None:
        linears = prefix.linears(spec, load.layers_built(spec), load.moe_layer)
        if config is not None:
            quant = prefix_quant.plan(load.quant, config, linears)
        elif prefix_quant.stores_fp8(dtypes):  # FP8 weights or scales, no quantization_config
            quant = prefix_quant.unquantized(load.quant, linears)
    if load is not None and (quant is not None or config is None):
        shapes = {name: tuple(info.shape) for name, info in checkpoint.tensors.items()}
        tensors, parameters = prefix.replay(load, chosen.name, spec, shapes, events.add, dtypes, quant)
        return list(tensors), list(parameters)
    fates: list[tuple[str, str, str | None]] = []
    stored = 0
    for name in sorted(checkpoint.tensors):
        stored += name.startswith("mtp.")
        fates.append((name, "unchecked" if name.startswith("mtp.") else "skipped", None))
    if not stored:
        events.add(engine.layer_missing, layer="mtp.*", cls=chosen.name, nextn=spec.nextn)
    else:
        unchecked = Event("info", "mtp_composition_unchecked", "mtp.mtp_composition_unchecked", chosen.source)
        events.add(unchecked, count=stored, cls=chosen.name, label=engine.label)
    return fates, []
