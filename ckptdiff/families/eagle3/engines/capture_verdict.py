"""The capture verdict: which target layers an engine feeds the drafter's fc, against what the drafter says it was
trained on, per target class (capture.py), decided with ``--base`` and solved for as a condition without it.

Events are data: a code, a wording key of engine_messages.py (``eagle3.capture.*``) and params."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ....report import Condition, TargetSpan
from ...rules import Engine, Event, Severity, Source
from .capture import WRITERS, Claim, ClassCapture, Solution, capture_for, default_depth, solve

if TYPE_CHECKING:
    from .settings import Draft


class _Events(Protocol):
    """The replay's event list (replay.py), as this module uses it."""

    conditions: list[Condition]

    def add(self, event: Event, tensor: str | None = None, **fields: Any) -> None: ...


def claim_of(draft: Draft) -> Claim | None:
    """What the drafter's config says it was trained on: the ids the engine reads, else the first ids it has."""
    found = draft.aux if draft.aux is not None else (draft.spec.aux_ids[0] if draft.spec.aux_ids else None)
    if found is None:
        return None
    ids = tuple(int(i) for i in found.value)
    writer = WRITERS.get(found.key, "vllm")
    return Claim(found.key, ids, writer, as_outputs=bool(ids) and ids[0] in (0, 1), default_depth=default_depth(ids))


def _writer_classes(claim: Claim) -> tuple[ClassCapture, ...]:
    from . import get_engine  # the writer's rules are data like this engine's

    classes: tuple[ClassCapture, ...] = get_engine(claim.writer).aux_ids.classes
    return classes


def _common(engine: Engine, draft: Draft) -> dict[str, Any]:
    """Params every capture event has: the engine, the ids it reads (key, ids) and those it ignores."""
    read = [draft.aux_key, list(draft.aux_ids)] if draft.aux_ids else None
    ignored = [[found.key, list(found.value)] for found in draft.spec.aux_ids if found.key != draft.aux_key]
    return {"engine": engine.name, "read": read, "ignored": ignored}


def _claim(claim: Claim) -> dict[str, Any]:
    found = {"claim": [claim.key, list(claim.ids)], "claim_writer": claim.writer, "as_outputs": claim.as_outputs}
    return found | ({"default_depth": claim.default_depth} if claim.default_depth is not None else {})


def _event(severity: Severity, code: str, wording: str, source: Source) -> Event:
    return Event(severity, code, f"eagle3.capture.{wording}", source)


def _count(draft: Draft, events: _Events, captured: int, source: Source) -> None:
    if draft.use_aux and captured != draft.fc_aux:
        events.add(
            Event("error", "aux_count_mismatch", "eagle3.aux_count_mismatch", source),
            captured=captured,
            read=[draft.aux_key, list(draft.aux_ids)] if draft.aux_ids else None,
            fc_aux=draft.fc_aux,
            target_hidden=draft.target_hidden,
        )


def class_capture(engine: Engine, draft: Draft, events: _Events) -> None:
    """The capture on the target given (--base), or the targets it is right on when none is."""
    target = draft.target
    claim = claim_of(draft)
    if target is not None and target.layers is not None:
        capture = capture_for(engine.aux_ids.classes, target.architecture, target.model_type)
        if capture is None:
            name = target.architecture or target.model_type or "?"
            _unknown_class(engine, draft, events, claim, name, target.layers)
        else:
            _decided(engine, draft, events, claim, capture, target.layers)
        return
    _solved(engine, draft, events, claim)


def _decided(engine: Engine, draft: Draft, events: _Events, claim: Claim | None, capture: ClassCapture, n: int) -> None:
    read = draft.aux_ids
    captured = capture.outputs(read, n)
    where = {
        **_common(engine, draft),
        "captured": list(captured),
        "layers": n,
        "family": capture.label,
        "setup": capture.setup.path,
        "takes": capture.takes,
        "forward": capture.forward.path,
    }
    if read:
        unreached = capture.unreached(read, n)
        if unreached:
            events.add(
                _event("error", "aux_id_out_of_range", "out_of_range", capture.setup),
                **where,
                outside=list(unreached),
            )
    _count(draft, events, len(captured), capture.setup)
    code = "aux_ids" if read else "aux_ids_default"
    named = claim.outputs(_writer_classes(claim), capture.label, n) if claim is not None else None
    if claim is not None and named is None:  # the writer has no rule for this class: conditional on it
        events.add(_event("info", code, "decided", capture.setup), **where)
        events.conditions.append(
            Condition("aux_capture_writer", (TargetSpan(capture.label, capture.architectures, ((n, n),)),))
        )
        events.add(
            _event("info", "aux_capture_conditional", "writer_unknown", engine.aux_ids.source), **where, **_claim(claim)
        )
        return
    if claim is not None and named is not None and named != captured:
        severity_code = "aux_ids_convention" if read else "aux_ids_default"
        other = _other_convention(claim, capture, n)
        events.add(
            _event("warning", severity_code, "differs", capture.setup),
            **where,
            **_claim(claim),
            named=list(named),
            **other,
        )
        return
    events.add(_event("info", code, "decided", capture.setup), **where)


def _other_convention(claim: Claim, capture: ClassCapture, n: int) -> dict[str, Any]:
    """When the ids are default-capture indices that the writer's convention for the target's own class would read
    as other layers: they were written for another class's convention (said in the event, with that reading)."""
    if claim.default_depth is None:
        return {}
    reading = claim.class_reading(_writer_classes(claim), capture.label, n)
    named = claim.outputs((), capture.label, n)
    return {"class_reading": list(reading)} if reading is not None and reading != named else {}


def _unknown_class(
    engine: Engine, draft: Draft, events: _Events, claim: Claim | None, architecture: str, n: int
) -> None:
    """A target class no rule names: the verdict is conditional on how that class captures, never guessed."""
    params = {
        **_common(engine, draft),
        "architecture": architecture,
        "layers": n,
        "families": [c.label for c in engine.aux_ids.classes],
    }
    events.add(_event("info", "aux_capture_unknown_class", "unknown_class", engine.aux_ids.source), **params)
    if claim is not None:
        events.conditions.append(
            Condition("aux_capture_class", (TargetSpan(architecture, (architecture,), ((n, n),)),))
        )
        events.add(
            _event("info", "aux_capture_conditional", "class_unknown", engine.aux_ids.source), **params, **_claim(claim)
        )
    _count(draft, events, len(set(draft.aux_ids)) if draft.aux_ids else 3, engine.aux_ids.source)


def _solved(engine: Engine, draft: Draft, events: _Events, claim: Claim | None) -> None:
    """No --base: solve for the targets on which the capture is the trained one, and say so as a condition."""
    aux = engine.aux_ids
    read = draft.aux_ids
    params: dict[str, Any] = {**_common(engine, draft), "families": [c.label for c in aux.classes]}
    code = "aux_ids" if read else "aux_ids_default"
    if claim is None:
        events.add(_event("info", code, "no_claim", aux.source), **params)
        _count(draft, events, len(set(read)) if read else 3, aux.source)
        return
    params |= _claim(claim)
    solutions = solve(aux.classes, read, claim, _writer_classes(claim), draft.fc_aux)
    lowest = max(1, max((*claim.ids, *(read or ()))) + 2)
    everywhere = len(solutions) == len(aux.classes) and all(set(range(lowest, 257)) <= set(s.depths) for s in solutions)
    if everywhere:
        first = aux.classes[0]
        example = first.outputs(read, max(claim.ids) + 2)
        events.add(
            _event("info", code, "everywhere", aux.source), **params, example=list(example), example_family=first.label
        )
        return
    if not solutions:
        _count(draft, events, len(set(read)) if read else 3, aux.source)
        events.add(
            _event("warning", "aux_ids_convention" if read else "aux_ids_default", "never", aux.source), **params
        )
        return
    events.conditions.append(Condition("aux_capture", tuple(_span(s) for s in solutions)))
    targets = [{"family": s.family.label, "layers": s.ranges(), "example": s.family.example} for s in solutions]
    events.add(_event("info", "aux_capture_conditional", "conditional", aux.source), **params, targets=targets)


def _span(solution: Solution) -> TargetSpan:
    return TargetSpan(solution.family.label, solution.family.architectures, tuple(solution.ranges()))
