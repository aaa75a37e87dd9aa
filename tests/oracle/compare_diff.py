"""The diff of the two sides compare.py puts in one vocabulary (its docstring defines the terms): where ckptdiff's
view and the engine's differ for one case under one engine (outcome, failure, tensor and parameter fates), and a
model runner's own capture set-up against ckptdiff's capture events (``runner_capture``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from compare import STAGES, Disagreement, View


def _stage_rank(stage: str) -> int:
    return STAGES.index(stage) if stage in STAGES else -1  # an unmapped code comes first, so it is seen


def failure_disagreement(ours: View, theirs: View) -> tuple[str, str] | None:
    """Where both fail: (what ckptdiff says, what the engine did) when the reasons differ, else None."""
    if not ours.failures or not theirs.failures:
        return None
    first = min(_stage_rank(f.stage) for f in ours.failures)
    said = [f for f in ours.failures if _stage_rank(f.stage) == first]
    did = theirs.failures
    said_text, did_text = "; ".join(map(str, said)), "; ".join(map(str, did))
    if said[0].stage != did[0].stage:
        return said_text, did_text
    if did[0].stage == "forward":
        same = {f.subject for f in said} == {f.subject for f in did}
        return None if same else (said_text, did_text)
    failure = did[0]
    if failure.kind == "tensor" and failure.subject not in {f.subject for f in said if f.kind == "tensor"}:
        return said_text, did_text
    if failure.kind == "key" and failure.subject is not None:
        if not re.search(rf"\b{re.escape(failure.subject)}\b", ours.messages.get(failure.stage, "")):
            return said_text + " (no message names the key)", did_text
    return None


def disagreements(case: str, engine: str, ours: View, theirs: View) -> list[Disagreement]:
    """Every place ckptdiff (``ours``) and the engine (``theirs``) differ, outcome first."""
    found = []
    if theirs.unobserved is not None:
        found.append(Disagreement(case, engine, "capture", "(compared only when observed)", theirs.unobserved))
    if ours.outcome != theirs.outcome:
        said, did = _because(ours), _because(theirs)
        found.append(Disagreement(case, engine, "outcome", said, did))
    elif ours.outcome == "fails":
        differ = failure_disagreement(ours, theirs)
        if differ is not None:
            found.append(Disagreement(case, engine, "failure", *differ))
    if theirs.raised:
        for name, fate in sorted(theirs.tensors.items()):
            if fate == "error":
                if ours.tensors.get(name) != "error":
                    found.append(Disagreement(case, engine, f"tensor {name}", str(ours.tensors.get(name)), fate))
            elif fate != "unused" and ours.tensors.get(name) in ("unused", None):
                found.append(Disagreement(case, engine, f"tensor {name}", str(ours.tensors.get(name)), fate))
        return found  # ckptdiff's other error tensors were never reached: not comparable
    for name in sorted(set(ours.tensors) | set(theirs.tensors)):
        said, did = ours.tensors.get(name, "(not listed)"), theirs.tensors.get(name, "(not in checkpoint)")
        if said != did:
            found.append(Disagreement(case, engine, f"tensor {name}", said, did))
    for name in sorted(set(ours.parameters) | set(theirs.parameters)):
        said = ours.parameters.get(name, "(no such parameter)")
        did = theirs.parameters.get(name, "(no such parameter)")
        if said != did:
            found.append(Disagreement(case, engine, f"parameter {name}", said, did))
    return found


def _because(view: View, limit: int = 240) -> str:
    """The outcome and why, each reason once with its count, cut at ``limit`` characters."""
    counts: dict[str, int] = {}
    for reason in view.reasons:
        counts[reason] = counts.get(reason, 0) + 1
    reasons = "; ".join(r + (f" x{n}" if n > 1 else "") for r, n in counts.items())
    text = f"{view.outcome} ({reasons})" if reasons else view.outcome
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: ckptdiff's capture events that say which target layers' outputs the engine captures (params ``captured``).
CAPTURE_DECIDED = ("aux_ids", "aux_ids_default", "aux_ids_convention")


def runner_capture(case: str, engine: str, result: Mapping[str, Any], entry: Mapping[str, Any]) -> list[Disagreement]:
    """A model runner's capture decision, observed on the runner itself (``aux.runner_uses_aux``: vLLM's V1 and V2
    runner drivers), against ckptdiff's: no capture set up exactly when ckptdiff says ``aux_capture_off``, and, when
    one was set up and traced, its captured outputs equal those of ckptdiff's capture event. Observations without
    the runner's flag (the EAGLE-3 job's, which sets the capture up itself) are not judged here."""
    aux = result.get("aux") or {}
    if "runner_uses_aux" not in aux or result.get("raised"):
        return []
    events = entry.get("events", [])
    off_said = any(e["code"] == "aux_capture_off" for e in events)
    off_did = not aux["runner_uses_aux"] or aux.get("set_up_called") is False
    found = []
    if off_said != off_did:
        said = "aux_capture_off: no capture set up" if off_said else "a capture set up"
        did = f"runner_uses_aux {aux['runner_uses_aux']}" + (
            f", set-up called {aux['set_up_called']}" if "set_up_called" in aux else ""
        )
        found.append(Disagreement(case, engine, "capture set-up", said, did))
    if off_did or off_said or "outputs" not in aux or aux.get("capture_error"):
        return found
    decided = [e for e in events if e["code"] in CAPTURE_DECIDED and "captured" in (e.get("params") or {})]
    believed = sorted({int(i) for e in decided for i in e["params"]["captured"]})
    if not decided:
        said = "(no capture event with captured)"
        found.append(Disagreement(case, engine, "runner_capture", said, str(aux["outputs"])))
    elif believed != aux["outputs"]:
        found.append(Disagreement(case, engine, "runner_capture", f"outputs {believed}", f"outputs {aux['outputs']}"))
    return found
