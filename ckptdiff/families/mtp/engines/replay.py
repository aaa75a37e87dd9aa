"""Replay an engine's MTP loading (:class:`.model.MtpEngine` data) on a checkpoint's names, shapes and config.json."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ....checkpoint import Checkpoint
from ....report import EngineEvent, EngineResult
from ...rules import Event
from ..spec import MtpSpec, is_spec_weight
from .model import MtpClass, MtpEngine
from .shapes import expected_layer

#: Suffixes of the scale tensors a quantized linear layer stores beside its weight (FP8 block, per tensor).
SCALE_SUFFIXES = ("weight_scale_inv", "weight_scale", "input_scale")
_EXPERT = re.compile(r"experts\.\d+\.(gate_proj|up_proj|down_proj)\.")
_RANK = {"error": 0, "warning": 1, "info": 2}


class _Events:
    def __init__(self) -> None:
        self.items: list[EngineEvent] = []

    def add(self, event: Event, tensor: str | None = None, **params: Any) -> None:
        self.items.append(EngineEvent(event.severity, event.code, tensor, event.wording, params, str(event.source)))


def simulate(
    engine: MtpEngine, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
) -> EngineResult:
    """What ``engine`` does with ``checkpoint``'s MTP layers served as its drafter (the checkpoint is the target)."""
    config = checkpoint.config
    events = _Events()
    if config is None:
        events.items.append(EngineEvent("error", "no_config", None, "mtp.no_config", {"spec": checkpoint.spec}))
        return EngineResult(engine.name, side, tuple(events.items))
    spec = MtpSpec.of(config, checkpoint.tensors)
    chosen = next((c for c in engine.classes if c.serves(spec)), None)
    if chosen is None:
        registered = [c.name for c in engine.classes]
        events.add(engine.no_class, model_type=spec.model_type, architecture=spec.architecture, registered=registered)
        return EngineResult(engine.name, side, tuple(events.items))
    if spec.nextn is None and chosen.layout == "deepseek":
        events.add(engine.nextn_absent, cls=chosen.name)
        return EngineResult(engine.name, side, tuple(events.items))
    if chosen.layout == "deepseek" and (spec.nextn or 0) <= 0:
        events.add(engine.nextn_absent, cls=chosen.name, nextn=spec.nextn)
        return EngineResult(engine.name, side, tuple(events.items))
    allowed = engine.nextn_allowed
    if chosen.layout == "deepseek" and allowed is not None and spec.nextn not in allowed:
        assert engine.nextn_refused is not None
        events.add(engine.nextn_refused, nextn=spec.nextn, allowed=list(allowed))
        return EngineResult(engine.name, side, tuple(events.items))
    fates = _replay_prefix(engine, chosen, spec, checkpoint, events) if chosen.layout == "mtp" else None
    if fates is None:
        fates = _replay_layers(engine, chosen, spec, checkpoint, events)
    tensors, parameters = fates
    ordered = sorted(events.items, key=lambda event: _RANK[event.severity])
    return EngineResult(engine.name, side, tuple(ordered), tensors=tuple(tensors), parameters=tuple(parameters))


Fates = tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]


def _param_of(engine: MtpEngine, layer: int, rest: str) -> str:
    """The parameter a layer's tensor fills: experts into the fused expert weights, stacked pieces into their
    fused parameter (``[shard]``), the spec weights and the block under the engine's prefixes."""
    if _EXPERT.search(rest):
        fused = _EXPERT.sub(lambda m: "experts.w2_" if m.group(1) == "down_proj" else "experts.w13_", rest)
        return engine.block_param(layer, fused)
    for piece in engine.fused:
        if f".{piece.piece}." in f".{rest}":
            rest = rest.replace(f"{piece.piece}.", f"{piece.param}.", 1) + f"[{piece.shard}]"
            break
    return engine.spec_param(layer, rest) if is_spec_weight(f".{rest}") else engine.block_param(layer, rest)


def _base(param: str) -> str:
    return re.sub(r"\[\w+\]$", "", param)


def _replay_layers(
    engine: MtpEngine, chosen: MtpClass, spec: MtpSpec, checkpoint: Checkpoint, events: _Events
) -> Fates:
    layers = engine.layer_ids(spec)
    expected = expected_layer(spec)
    params: dict[str, tuple[int, ...] | None] = {}
    layer_of: dict[str, int] = {}  # parameter → the MTP layer that fills it
    from_target: list[str] = []
    for layer in layers:
        for rest, shape in expected.items():
            if any(piece in rest for piece in engine.from_target):
                continue
            param = _param_of(engine, layer, rest)
            params.setdefault(param, shape)
            layer_of.setdefault(param, layer)
    if not engine.own_embedding:
        from_target.append("model.embed_tokens.weight")
    if not engine.own_head:
        from_target.append("lm_head.weight")
    quantized = isinstance(spec.text.get("quantization_config") or spec.config.get("quantization_config"), Mapping)
    filled: dict[str, str] = {}
    tensors: list[tuple[str, str, str | None]] = []
    touched: set[int] = set()
    outside: list[str] = []
    for name in sorted(checkpoint.tensors):
        info = checkpoint.tensors[name]
        found, rest = _in_layers(engine, layers, name)
        if found is None:
            if engine.own_embedding and name in ("model.embed_tokens.weight", "embed_tokens.weight"):
                tensors.append((name, "loaded", "model.embed_tokens.weight"))
                filled["model.embed_tokens.weight"] = "loaded"
                continue
            outside.append(name)
            tensors.append((name, "skipped", None))
            continue
        if any(piece in rest for piece in engine.from_target):
            events.add(engine.from_target_event, name, name=name)
            tensors.append((name, "from_target", None))
            continue
        if rest.startswith("embed_tokens.") and found != layers[0]:
            tensors.append((name, "skipped", None))  # "MTP modules share the embedding: only the first is loaded"
            continue
        param = _param_of(engine, found, rest)
        base = _base(param)
        if any(rest.endswith(suffix) for suffix in SCALE_SUFFIXES) and quantized:
            params.setdefault(param, None)
        if param not in params:
            events.add(engine.unknown, name, name=name, candidate=base)
            tensors.append((name, "error" if engine.unknown.severity == "error" else "skipped", None))
            continue
        want = params[param]
        if want is not None and tuple(info.shape) != tuple(want):
            events.add(engine.shape_error, name, name=name, param=base, got=list(info.shape), want=list(want))
            tensors.append((name, "error", param))
            filled[param] = "error"
            continue
        touched.add(found)
        moved = base.removeprefix("model.") != name.removeprefix("model.")
        tensors.append((name, "renamed" if moved else "loaded", param))
        filled[param] = "loaded"
    if outside:
        events.add(engine.outside, count=len(outside), layers=list(layers))
    missing_layers = [layer for layer in layers if layer not in touched]
    for layer in missing_layers:
        events.add(engine.layer_missing, layer=layer, cls=chosen.name, nextn=spec.nextn)
    parameters: list[tuple[str, str]] = [(name, "from_target") for name in from_target]
    absent = _absent_event(engine, quantized)
    for param in params:
        if param in filled:
            parameters.append((param, filled[param]))
            continue
        parameters.append((param, "random" if absent.severity == "warning" else "missing"))
        if layer_of.get(param) not in missing_layers:  # a whole missing layer is told once, by its event
            events.add(absent, None, param=_base(param))
    return tensors, parameters


def _absent_event(engine: MtpEngine, quantized: bool) -> Event:
    if engine.name == "vllm" and quantized:
        from .vllm import QUANTIZED_PARAM_MISSING

        return QUANTIZED_PARAM_MISSING
    return engine.param_missing


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
    """Qwen3-Next's ``mtp.*`` layout: the MTP tensors are read under ``mtp.``, everything else is the target's."""
    tensors: list[tuple[str, str, str | None]] = []
    parameters: list[tuple[str, str]] = []
    outside = 0
    found = False
    for name in sorted(checkpoint.tensors):
        if name.startswith("mtp."):
            found = True
            param = "model." + name.removeprefix("mtp.") if engine.own_embedding else name
            tensors.append((name, "renamed" if engine.own_embedding else "loaded", param))
            parameters.append((param, "loaded"))
        elif engine.own_embedding and ("embed_tokens" in name or "lm_head" in name):
            tensors.append((name, "loaded", name))
            parameters.append((name, "loaded"))
        else:
            outside += 1
            tensors.append((name, "skipped", None))
    if outside:
        events.add(engine.outside, count=outside, layers=[])
    if not found:
        events.add(engine.layer_missing, layer="mtp.*", cls=chosen.name, nextn=spec.nextn)
    return tensors, parameters
