"""Replay an engine's drafter loader (ckptdiff.engines data) on a checkpoint's names, shapes and config.json."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Any

from ....checkpoint import Checkpoint
from ....report import Condition, EngineEvent, EngineResult
from ...rules import PARAMETER_FATES, TENSOR_FATES, Engine, Event, Loader, Param, Severity, SpeculatorsAdapter
from ..engine_messages import EVENTS
from ..spec import DrafterSpec
from .capture_verdict import class_capture
from .quantized import covered, quantized_shape, scale_of
from .settings import Draft, Target


@cache
def _named(wording: str) -> frozenset[str]:
    """The fields a wording's template names (none for a wording made by a function: it gets its fields)."""
    words = EVENTS[wording]
    if not isinstance(words, str):
        return frozenset()
    return frozenset(field for _, field, _, _ in string.Formatter().parse(words) if field)


class _Events:
    """The events of one replay: each with the params its wording names, from the call and the drafter's."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.items: list[EngineEvent] = []
        self.fields = dict(fields)
        self.conditions: list[Condition] = []

    def add(self, event: Event, tensor: str | None = None, **fields: Any) -> None:
        params = {key: self.fields[key] for key in _named(event.wording) if key in self.fields} | fields
        self.items.append(EngineEvent(event.severity, event.code, tensor, event.wording, params, str(event.source)))


def _plain(severity: Severity, code: str, **params: Any) -> EngineEvent:
    """An event of the replay itself (no rule of the engine's, so no citation)."""
    return EngineEvent(severity, code, None, f"eagle3.{code}", params)


def simulate(
    engine: Engine, checkpoint: Checkpoint, side: str, base_config: Mapping[str, Any] | None = None
) -> EngineResult:
    """What ``engine`` does with ``checkpoint`` served as an EAGLE-3 drafter (``base_config``: the target's)."""
    config = checkpoint.config
    if config is None:
        return EngineResult(
            engine.name, side, (_plain("error", "no_config", spec=checkpoint.spec, engine=engine.name),)
        )
    architectures = config.get("architectures")
    arch = architectures[0] if isinstance(architectures, list) and architectures else None
    if not isinstance(arch, str):
        return EngineResult(engine.name, side, (_plain("error", "no_architecture", engine=engine.name),))
    spec = DrafterSpec.of(config)
    looked_up, override = arch, False
    adapter = engine.speculators
    if adapter is not None and spec.speculators is not None:
        chosen, defect = _speculators_architecture(adapter, spec)
        if defect is not None:
            events = _Events({"defect": defect})
            events.add(adapter.invalid, defect=defect)
            return EngineResult(engine.name, side, tuple(events.items))
        looked_up = chosen
    else:
        model_type = spec.model_type.value if spec.model_type else None
        for types, replacement in engine.model_type_architectures:
            if model_type in types:
                looked_up, override = replacement, True
        for pattern, replacement in engine.architecture_mapping:
            looked_up = re.sub(pattern, replacement, looked_up, count=1)
    loader = next((loader for loader in engine.loaders if looked_up in loader.architectures), None)
    registered = ", ".join(a for loader in engine.loaders for a in loader.architectures)
    if loader is None:
        events = _Events({})
        why: dict[str, Any] = (
            {"why": override, "model_type": spec.model_type.value if spec.model_type else None} if override else {}
        )
        events.add(engine.unregistered, arch=arch, looked_up=looked_up, registered=registered, **why)
        return EngineResult(engine.name, side, tuple(events.items))
    target = Target.of(base_config) if base_config is not None else None
    validation = adapter.validation if adapter is not None and spec.speculators is not None else None
    defect = spec.speculators.defect() if validation is not None and spec.speculators is not None else None
    draft = Draft(
        spec=spec,
        names=frozenset(checkpoint.tensors),
        dtypes={name: info.dtype for name, info in checkpoint.tensors.items()},
        tensor_shapes={name: tuple(info.shape) for name, info in checkpoint.tensors.items()},
        aux=None if engine.aux_ids.from_serving_config else spec.aux_at(engine.aux_ids.keys),
        fc_aux=spec.fc_aux_count(loader.fc_aux_keys),
        target=target,
    )
    if adapter is not None and spec.speculators is not None and adapter.incomplete is not None:
        layer = spec.speculators.layer_config if isinstance(spec.speculators.layer_config, Mapping) else {}
        missing = [key for key in adapter.required if key not in layer]
        if missing:
            events = _Events({})
            events.add(adapter.incomplete, missing=missing)
            return EngineResult(engine.name, side, tuple(events.items))
    if not draft.hidden:
        return EngineResult(engine.name, side, (_plain("error", "no_hidden_size", engine=engine.name),))
    events = _Events(_draft_fields(draft))
    if validation is not None and defect is not None:
        events.add(validation, defect=defect)
    for case in (*engine.config_checks, *loader.checks):
        if case.when(draft):
            events.add(case.then)
    if target is not None:
        for check in engine.target_checks:
            if check.fails(draft):
                events.add(check.event)
        supported = engine.target_model_types
        if supported is not None and engine.target_refused is not None and target.model_type is not None:
            if not any(kind in target.model_type for kind in supported):
                events.add(engine.target_refused, model_type=target.model_type, supported=list(supported))
    # The class is checked when the capture is set up, which an engine skips when use_aux_hidden_state is false.
    capturing = draft.use_aux or engine.aux_ids.off_without_aux is None
    refused = capturing and target is not None and target.architecture in engine.refused_targets
    if refused and engine.target_class_refused is not None and target is not None:
        events.add(engine.target_class_refused, architecture=target.architecture)
    else:
        _aux_ids(engine, draft, events)
    _quantization(engine, loader, draft, events)
    fates = _Fates()
    _load(loader, checkpoint, draft, events, fates)
    ordered = sorted(events.items, key=lambda event: _RANK[event.severity])
    return EngineResult(
        engine.name,
        side,
        tuple(ordered),
        tensors=tuple(fates.tensors),
        parameters=tuple(fates.parameters),
        conditions=tuple(events.conditions),
    )


_RANK = {"error": 0, "warning": 1, "info": 2}


def _speculators_architecture(adapter: SpeculatorsAdapter, spec: DrafterSpec) -> tuple[str, str | None]:
    """The architecture the engine's speculators adapter builds, or why it refuses the config."""
    assert spec.speculators is not None
    if not adapter.types:
        return "", "a speculators-format config"
    kind = json.dumps(spec.speculators.model_type)
    other = dict(adapter.other_drafters).get(spec.speculators.model_type)
    if other is not None:
        return "", f"speculators_model_type is {kind}: the speculators adapter builds {other} from it, not EAGLE-3"
    if spec.speculators.model_type not in adapter.types:
        known = ", ".join(adapter.registered or adapter.types)
        return "", f"speculators_model_type is {kind}: ValueError: Expected one of: {known}"
    defect = spec.speculators.defect()
    if defect is not None and adapter.validation is None:
        return "", defect
    layer = spec.speculators.layer_config
    model_type = layer.get("model_type", "llama") if isinstance(layer, Mapping) else "llama"
    chosen = dict(adapter.architectures).get(model_type)
    if chosen is None:
        algorithm = "PEagle" if spec.speculators.model_type == "peagle" else "Eagle3"
        return "", (
            f"transformer_layer_config.model_type is {model_type!r}: ValueError: Unsupported model_type "
            f"{model_type} for {algorithm} speculator"
        )
    return chosen, None


def _draft_fields(d: Draft) -> dict[str, Any]:
    return {
        "hidden": d.hidden,
        "target_hidden": d.target_hidden,
        "vocab": d.vocab,
        "draft_vocab": d.draft_vocab,
        "layers": d.layers,
        "fc_aux": d.fc_aux,
        "head_rows": d.head_rows,
        "d2t_length": d.d2t_length,
        "captured": d.captured,
        "target_vocab": d.target_vocab,
        "target_width": d.target_width,
        "target_hidden_actual": d.target.hidden if d.target else None,
    }


class _Fates:
    """What became of each tensor (loaded, renamed, from_target, skipped, error) and each parameter."""

    def __init__(self) -> None:
        self.tensors: list[tuple[str, str, str | None]] = []
        self.parameters: list[tuple[str, str]] = []

    def of_parameters(self, fate: str) -> list[str]:
        return [name for name, each in self.parameters if each == fate]


def _resolve(loader: Loader, name: str) -> list[str]:
    """The parameter names the loader tries for a checkpoint name, after its renames (``param[shard]``)."""
    renamed, shard = name, None
    for rename in loader.renames:
        if re.search(rename.pattern, renamed):
            renamed = re.sub(rename.pattern, rename.replacement, renamed, count=1)
            shard = rename.shard or shard
    suffix = f"[{shard}]" if shard else ""
    return [template.format(name=renamed) + suffix for template in loader.lookups]


def _load(loader: Loader, checkpoint: Checkpoint, draft: Draft, events: _Events, fates: _Fates) -> None:
    """Every tensor to a parameter (or a drop, a skip, an error); then every parameter's fate."""
    params: dict[str, Param] = {p.name: p for p in loader.params if p.exists(draft)}
    params |= _scale_params(loader, params, draft)
    filled: dict[str, str] = {}  # parameter → its fate
    for name in sorted(checkpoint.tensors):
        info = checkpoint.tensors[name]
        drop = next((d for d in loader.drops if re.search(d.pattern, name) and d.when(draft)), None)
        if drop is not None:
            events.add(drop.event, name, name=name)
            fates.tensors.append((name, TENSOR_FATES.get(drop.event.code, "skipped"), None))
            continue
        candidates = _resolve(loader, name)
        param_name = next((c for c in candidates if c in params), None)
        if param_name is None:
            scale = _scale_param(loader, name, params, draft)
            if scale is not None:
                fates.tensors.append((name, "renamed" if _moved(name, scale) else "loaded", scale))
                filled[scale] = "loaded"
                continue
            looked_up = candidates[-1].split("[")[0]
            ignored = loader.ignored_unexpected
            if ignored is not None and name.endswith(ignored[0]):
                events.add(ignored[1], name, name=name, candidate=looked_up)
                fates.tensors.append((name, "skipped", None))
                continue
            events.add(loader.unknown, name, name=name, candidate=looked_up, inner=looked_up.removeprefix("model."))
            fates.tensors.append((name, "error" if loader.unknown.severity == "error" else "skipped", None))
            continue
        param = params[param_name]
        want = param.shape(draft)
        if loader.quantization(draft):
            want = quantized_shape(param, want, draft, loader.ignores)
        if want is not None and tuple(info.shape) != tuple(want):
            events.add(loader.shape_error, name, name=name, param=param_name, got=list(info.shape), want=list(want))
            fates.tensors.append((name, "error", param_name))
            filled[param_name] = "error"  # the load raised on it: nothing more happens to this parameter
            continue
        if param.dtypes is not None and info.dtype not in param.dtypes and param.dtype_event is not None:
            events.add(param.dtype_event, name, name=name, param=param_name, dtype=info.dtype)
            if param.dtype_event.severity == "error":
                fates.tensors.append((name, "error", param_name))
                filled[param_name] = "error"
                continue
        after = next((case for case in param.loaded if case.when(draft)), None)
        if after is not None:
            events.add(after.then, name, name=name, param=param_name)
        fate = TENSOR_FATES.get(after.then.code, "") if after is not None else ""
        fates.tensors.append((name, fate or ("renamed" if _moved(name, param_name) else "loaded"), param_name))
        filled[param_name] = fate or "loaded"
    for param in params.values():
        if param.name in filled:
            fates.parameters.append((param.name, filled[param.name]))
            continue
        case = next((c for c in param.absent if c.when(draft)), None)
        if case is None:
            fates.parameters.append((param.name, "random"))
            continue
        fates.parameters.append((param.name, PARAMETER_FATES.get(case.then.code, "missing")))
        events.add(case.then, None, param=param.name)


def _scale_params(loader: Loader, params: dict[str, Param], draft: Draft) -> dict[str, Param]:
    """The scales each quantized linear layer builds beside its weight (one per fused parameter)."""
    q = draft.spec.quantization
    if q is None or not loader.quantization(draft):
        return {}
    out: dict[str, Param] = {}
    for param in params.values():
        if covered(param, draft, loader.ignores):
            for suffix in q.scales:
                name = re.sub(r"\.weight(\[\w+\])?$", "." + suffix, param.name)
                out.setdefault(name, Param(name, lambda d: None, param.source, absent=param.absent))
    return out


def _scale_param(loader: Loader, name: str, params: dict[str, Param], draft: Draft) -> str | None:
    """The scale parameter a quantized linear layer builds for this tensor (``x.weight_scale``), or None."""
    scale = scale_of(name)
    if scale is None or not loader.quantization(draft) or draft.spec.quantization is None:
        return None
    weight, suffix = scale
    for candidate in _resolve(loader, weight):
        param = params.get(candidate)
        scale_name = re.sub(r"\.weight(\[\w+\])?$", "." + suffix, candidate)
        if param is not None and covered(param, draft, loader.ignores) and scale_name in params:
            return scale_name
    return None


def _moved(name: str, param: str) -> bool:
    """Whether the loader renamed the tensor beyond a ``model.`` prefix or a fused shard."""
    bare = re.sub(r"\[\w+\]$", "", param).removeprefix("model.")
    bare = re.sub(r"\.(qkv_proj|gate_up_proj)\.", ".", bare)
    plain = re.sub(r"\.(q_proj|k_proj|v_proj|gate_proj|up_proj)\.", ".", name.removeprefix("model."))
    return bare != plain


def _aux_ids(engine: Engine, draft: Draft, events: _Events) -> None:
    if not draft.use_aux and engine.aux_ids.off_without_aux is not None:
        # Nothing is captured: which ids it would read, and on which layers, does not matter.
        unread = [[found.key, list(found.value)] for found in draft.spec.aux_ids]
        events.add(engine.aux_ids.off_without_aux, None, ignored=unread, engine=engine.name)
        return
    empty_source = engine.aux_ids.empty_captures_nothing
    empty_key = draft.spec.empty_aux_key(engine.aux_ids.keys) if empty_source is not None else None
    if empty_source is not None and empty_key is not None:  # [] passed on as given: no layer is captured
        events.add(
            Event("error", "aux_count_mismatch", "eagle3.aux_count_mismatch", empty_source),
            None,
            captured=0,
            read=[empty_key, []],
            fc_aux=draft.fc_aux,
            target_hidden=draft.target_hidden,
        )
        return
    if engine.aux_ids.classes and not engine.aux_ids.from_serving_config:
        class_capture(engine, draft, events)
        return
    aux = engine.aux_ids
    n = draft.target.layers if draft.target is not None else None
    read_key = draft.aux_key
    ignored = [found for found in draft.spec.aux_ids if found.key != read_key]
    ignored_ids = [[found.key, list(found.value)] for found in ignored]
    if draft.aux_ids is None or aux.from_serving_config:
        default = aux.default_outputs(n) if n else None
        # Ids it ignores show the drafter may have been trained on other layers, unless they name the default
        # capture under either convention (SGLang's "output of layer k", vLLM's "output of layer k-1").
        same = default is not None and all(
            tuple(default) in (tuple(found.value), tuple(i - 1 for i in found.value)) for found in ignored
        )
        severity: Severity = "warning" if ignored and not same and not aux.from_serving_config else "info"
        events.add(
            replace(aux.default_event, severity=severity),
            None,
            ignored=ignored_ids,
            outputs=list(default) if default else None,
            base_hint=bool(ignored) and default is None and not aux.from_serving_config,
        )
        if not aux.from_serving_config:
            _count(draft, events, aux.source, None)
        return
    ids = list(draft.aux_ids)
    key = draft.aux_key
    convention: dict[str, Any] = {"engine": engine.name, "offset": aux.offset}
    if n is not None:
        valid = aux.valid(n)
        outside = [i for i in ids if i not in valid]
        if outside:
            events.add(
                Event("error", "aux_id_out_of_range", "eagle3.aux_id_out_of_range", aux.source),
                key=key,
                ids=ids,
                outside=outside,
                layers=n,
                first=valid.start,
                last=valid.stop - 1,
                **convention,
            )
    _count(draft, events, aux.source, [key, ids])
    outputs = [i + aux.offset for i in ids]
    events.add(
        Event("info", "aux_ids", "eagle3.aux_ids", aux.source),
        key=key,
        ids=ids,
        outputs=outputs,
        ignored=ignored_ids,
        **convention,
    )
    trained = _trained_convention(tuple(ids))
    if trained is not None and trained != aux.offset:
        events.add(
            Event("warning", "aux_ids_convention", "eagle3.aux_ids_convention", aux.source.inferring()),
            key=key,
            ids=ids,
            outputs=[i - 1 for i in ids],
            layers=n,
            engine=engine.name,
        )


def _count(draft: Draft, events: _Events, source: Any, captured_from: list[Any] | None) -> None:
    """The number of hidden states the engine captures against the width it built fc for (``captured_from``: the
    key and ids read, None for the engine's default three)."""
    if draft.use_aux and draft.captured != draft.fc_aux:
        events.add(
            Event("error", "aux_count_mismatch", "eagle3.aux_count_mismatch", source),
            captured=draft.captured,
            read=captured_from,
            fc_aux=draft.fc_aux,
            target_hidden=draft.target_hidden,
        )


def _quantization(engine: Engine, loader: Loader, draft: Draft, events: _Events) -> None:
    """A quantization_config the loader does not build the drafter with."""
    q = draft.spec.quantization
    if q is not None:
        case = next((c for c in loader.quantization_refused if c.when(draft)), None)
        if case is not None:
            events.add(case.then, None, method=q.method, algorithm=q.algorithm)


def _trained_convention(ids: tuple[int, ...]) -> int | None:
    """The offset the ids were written for, when they say so: a first id of 1 (or 0) means "output of layer k"."""
    if ids and ids[0] in (0, 1):
        return 0
    return None
