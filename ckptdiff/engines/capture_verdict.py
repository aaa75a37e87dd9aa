"""The capture verdict: which target layers an engine feeds the drafter's fc, against what the drafter says it was
trained on, per target class (capture.py), decided with ``--base`` and solved for as a condition without it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..report import Condition, TargetSpan
from .capture import WRITERS, Claim, ClassCapture, Ids, Solution, capture_for, solve
from .rules import Engine, Event, Source

if TYPE_CHECKING:
    from .settings import Draft
    from .simulate import _Events


def _list(values: Ids) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def claim_of(draft: Draft) -> Claim | None:
    """What the drafter's config says it was trained on: the ids the engine reads, else the first ids it has."""
    found = draft.aux if draft.aux is not None else (draft.spec.aux_ids[0] if draft.spec.aux_ids else None)
    if found is None:
        return None
    ids = tuple(int(i) for i in found.value)
    writer = WRITERS.get(found.key, "vllm")
    return Claim(found.key, ids, writer, as_outputs=bool(ids) and ids[0] in (0, 1))


def _writer_classes(claim: Claim) -> tuple[ClassCapture, ...]:
    from . import get_engine  # the registry; the writer's rules are data like this engine's

    return get_engine(claim.writer).aux_ids.classes


def _where(draft: Draft) -> str:
    return f"{draft.aux_key}={json.dumps(list(draft.aux_ids or ()))}" if draft.aux_ids else "no ids it reads"


def _ignored(draft: Draft) -> str:
    return "".join(f" (it ignores {found})" for found in draft.spec.aux_ids if found.key != draft.aux_key)


def _named(claim: Claim, capture: ClassCapture, n: int) -> str:
    if claim.as_outputs:
        how = (
            f"it starts at {claim.ids[0]}, SGLang's convention: id k = the output of layer k; the first id is 1 "
            "because the embedding output is never used, sglang PR#25454 (inferred), not vLLM's convention "
            "(id j = the output of layer j-1)"
        )
    else:
        how = f"as {claim.writer} captures them on this class"
    return f"{claim.key}={_list(claim.ids)} name the outputs of layers {{named}} ({how})"


def _count(draft: Draft, events: _Events, captured: int, source: Source, where: str) -> None:
    if draft.use_aux and captured != draft.fc_aux:
        events.add(
            Event(
                "error",
                "aux_count_mismatch",
                f"{captured} target hidden states are captured ({where}) but fc takes {draft.fc_aux} x "
                f"target_hidden_size={draft.target_hidden}: the fc matmul fails on the first forward",
                source,
            )
        )


def class_capture(engine: Engine, draft: Draft, events: _Events) -> None:
    """The capture on the target given (--base), or the targets it is right on when none is."""
    aux = engine.aux_ids
    target = draft.target
    claim = claim_of(draft)
    if target is not None and target.layers is not None:
        capture = capture_for(aux.classes, target.architecture, target.model_type)
        if capture is None:
            _unknown_class(engine, draft, events, claim, target.architecture or target.model_type or "?", target.layers)
        else:
            _decided(engine, draft, events, claim, capture, target.layers)
        return
    _solved(engine, draft, events, claim)


def _decided(engine: Engine, draft: Draft, events: _Events, claim: Claim | None, capture: ClassCapture, n: int) -> None:
    label = engine.label
    read = draft.aux_ids
    captured = capture.outputs(read, n)
    where = _where(draft)
    source = capture.setup
    if read:
        head = f"reads {where}{_ignored(draft)}: captures"
    else:
        head = f"no aux layer ids where {label} looks{_ignored(draft)}: its default captures"
    text = (
        f"{head} the outputs of target layers {_list(captured)} on this {n}-layer {capture.label} target (indices "
        f"through {capture.setup.path}; the {capture.takes} of the layer at each index, {capture.forward.path})"
    )
    if read:
        unreached = capture.unreached(read, n)
        if unreached:
            events.add(
                Event(
                    "error",
                    "aux_id_out_of_range",
                    f"{where}: id(s) {_list(unreached)} are never captured from a {n}-layer target ({capture.label}): "
                    "fewer hidden states than fc takes",
                    source,
                )
            )
    _count(draft, events, len(captured), source, where)
    named = claim.outputs(_writer_classes(claim), capture.label, n) if claim is not None else None
    code = "aux_ids" if read else "aux_ids_default"
    if claim is not None and named is None:
        events.add(Event("info", code, text, source))
        _condition_unknown(engine, events, claim, capture.label, capture.architectures, n, captured)
        return
    if claim is not None and named is not None and named != captured:
        events.add(
            Event(
                "warning",
                "aux_ids_convention" if read else "aux_ids_default",
                f"{text}, but {_named(claim, capture, n).format(named=_list(named))}: every fused hidden state comes "
                "from another layer than in training (vllm PR#43671: position-0 acceptance ~10 %)",
                source,
            )
        )
        return
    events.add(Event("info", code, text, source))


def _unknown_class(
    engine: Engine, draft: Draft, events: _Events, claim: Claim | None, architecture: str, n: int
) -> None:
    """A target class no rule names: the verdict is conditional on how that class captures, never guessed."""
    where = _where(draft)
    known = ", ".join(c.label for c in engine.aux_ids.classes)
    events.add(
        Event(
            "info",
            "aux_capture_unknown_class",
            f"{where}{_ignored(draft)}: ckptdiff has no capture rule for a {architecture} target under "
            f"{engine.label} (it has them for {known}): which of its {n} layers feed fc is not known here",
            engine.aux_ids.source,
        )
    )
    if claim is not None:
        wanted = claim.ids if claim.as_outputs else None
        text = (
            f"loads as trained if {engine.label}'s {architecture} class captures the layers "
            f"{claim.key}={_list(claim.ids)} name" + (f" (the outputs of {_list(wanted)})" if wanted else "")
        )
        events.conditions.append(
            Condition("aux_capture_class", text, (TargetSpan(architecture, (architecture,), ((n, n),)),))
        )
        events.add(Event("info", "aux_capture_conditional", text, engine.aux_ids.source))


def _condition_unknown(
    engine: Engine, events: _Events, claim: Claim, family: str, architectures: tuple[str, ...], n: int, captured: Ids
) -> None:
    text = (
        f"loads as trained if {claim.key}={_list(claim.ids)} were written for the outputs {_list(captured)} "
        f"{engine.label} captures on this {family} target ({claim.writer} has no capture rule for it here)"
    )
    events.conditions.append(Condition("aux_capture_writer", text, (TargetSpan(family, architectures, ((n, n),)),)))
    events.add(Event("info", "aux_capture_conditional", text, engine.aux_ids.source))


def _solved(engine: Engine, draft: Draft, events: _Events, claim: Claim | None) -> None:
    """No --base: solve for the targets on which the capture is the trained one, and say so as a condition."""
    aux = engine.aux_ids
    where = _where(draft)
    read = draft.aux_ids
    code = "aux_ids" if read else "aux_ids_default"
    if claim is None:
        outputs = "the layers its default names for the target's class and depth (give --base to see which)"
        events.add(Event("info", code, f"{where}: {engine.label} captures {outputs}", aux.source))
        if read is None:
            _count(draft, events, 3, aux.source, "its default three")
        else:
            _count(draft, events, len(set(read)), aux.source, where)
        return
    solutions = solve(aux.classes, read, claim, _writer_classes(claim), draft.fc_aux)
    lowest = max((*claim.ids, *(read or ()))) + 2
    everywhere = len(solutions) == len(aux.classes) and all(
        set(range(max(lowest, 1), 257)) <= set(s.depths) for s in solutions
    )
    if everywhere:
        events.add(
            Event(
                "info",
                code,
                f"reads {where}{_ignored(draft)}: {_example(aux.classes, read, claim)}and on every target class it "
                f"knows deep enough for the ids ({', '.join(c.label for c in aux.classes)}) the layers {claim.key} "
                "names",
                aux.source,
            )
        )
        return
    if not solutions:
        _count(draft, events, len(set(read)) if read else 3, aux.source, where)
        families = ", ".join(c.label for c in aux.classes)
        events.add(
            Event(
                "warning",
                "aux_ids_convention" if read else "aux_ids_default",
                f"{where}{_ignored(draft)}: on no target class ckptdiff knows ({families}), at any depth, "
                f"does {engine.label} capture the layers {claim.key}={_list(claim.ids)} name (as "
                f"{'layer outputs, inferred' if claim.as_outputs else claim.writer + ' captures them'}): the fused "
                "hidden states come from other layers than in training",
                aux.source,
            )
        )
        return
    text = (
        f"{where}{_ignored(draft)}: loads as trained if the target is "
        + " or ".join(s.words() for s in solutions)
        + f" (there {engine.label} captures the layers {claim.key}={_list(claim.ids)} name; give --base to decide)"
    )
    events.conditions.append(Condition("aux_capture", text, tuple(_span(s) for s in solutions)))
    events.add(Event("info", "aux_capture_conditional", text, aux.source))


def _example(classes: tuple[ClassCapture, ...], read: Ids | None, claim: Claim) -> str:
    """On the first family, at a depth that holds the ids: the outputs captured, as an example."""
    if not classes:
        return ""
    n = max(claim.ids) + 2
    return (
        f"captures the outputs of target layers {_list(classes[0].outputs(read, n))} on a {classes[0].label} target, "
    )


def _span(solution: Solution) -> TargetSpan:
    return TargetSpan(solution.family.label, solution.family.architectures, tuple(solution.ranges()))
