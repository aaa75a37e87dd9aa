"""The one mapping between what an engine did (worker.py) and what ckptdiff says (its JSON), and their differences.

Both sides are put in one vocabulary, then compared name by name:

tensor (a checkpoint name)   ``used``: its marker reached a parameter, or the engine consumed it into an
                             attribute (SGLang's d2t → hot_token_id); ckptdiff ``loaded``/``renamed``.
                             ``from_target``: used, then replaced by the target's (the embedding both engines
                             take from the target, the head SGLang takes without draft_vocab_size); ckptdiff
                             ``from_target``. ``unused``: its marker reached nothing; ckptdiff ``skipped``
                             (dropped or skipped). ckptdiff ``error`` is compared only through the outcome.
parameter (the engine's)     ``loaded``: every element written; ``partial``: some (one of q/k/v);
                             ``unwritten``: none, and the engine does not take it from the target;
                             ``altered``: fully written, but with values no checkpoint tensor holds (zero
                             padding of a narrower tensor, a lossy cast); ``from_target``: the engine takes
                             it from the target. ckptdiff's fused shards (``qkv_proj.weight[q]``) are folded
                             into their parameter; ``random``, ``default``, ``not_needed`` and ``missing``
                             are ``unwritten``. Attention KV-cache scales, which the engine sets itself when
                             the checkpoint has none, are not compared.
outcome                      ``fails``: the engine raised while building or loading the drafter, or its
                             first forward cannot run: fc's width is not that of the hidden states the
                             target captures; the embedding comes from a target of another width; a loader
                             replaced a parameter by a tensor of another shape; hot_token_id is shorter
                             than the head it maps. ``degraded``: it loaded, but a trained tensor went
                             unused (other than those no loader uses: t2d, mask_hidden, rotary inv_freq), a
                             parameter stayed unwritten, partial or altered, the token map went through a
                             float type, hot_token_id is longer than the head, the head comes from a target
                             with another vocabulary, or the target layers captured differ from the ones
                             the case says it was trained on. ``loads``: none of these.

When the engine raised, its lists describe progress up to the raise: then only the outcome is compared, plus
that every tensor whose marker reached a parameter is one ckptdiff does not call unused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cases import HIDDEN, VOCAB, Case, tensors_of

#: Names no loader uses by design: skipping them is not a degradation.
INERT = re.compile(r"(^|\.)(t2d|mask_hidden|rotary_emb\.inv_freq)$")
#: Parameters an engine fills itself when the checkpoint has none (attention KV-cache quantization scales,
#: set to 1.0 by the attention layer): not compared.
ENGINE_DEFAULTS = re.compile(r"\.attn\.(k|v|q|prob)_scale$")
CKPTDIFF_TENSOR = {"loaded": "used", "renamed": "used", "from_target": "from_target", "skipped": "unused"}
CKPTDIFF_PARAMETER = {
    "loaded": "loaded",
    "from_target": "from_target",
    "random": "unwritten",
    "default": "unwritten",
    "not_needed": "unwritten",
    "missing": "unwritten",
}


@dataclass(frozen=True)
class View:
    """One side's account of a case under one engine, in the shared vocabulary."""

    outcome: str
    tensors: dict[str, str]
    parameters: dict[str, str]
    reasons: tuple[str, ...] = ()
    raised: bool = False


@dataclass(frozen=True)
class Disagreement:
    case: str
    engine: str
    subject: str  # "outcome", "tensor NAME" or "parameter NAME"
    ckptdiff: str
    engine_did: str

    def row(self) -> tuple[str, str, str, str, str]:
        return (self.case, self.engine, self.subject, self.ckptdiff, self.engine_did)


def engine_view(result: Mapping[str, Any], case: Case) -> View:
    """What the engine did, from the worker's observation of one case."""
    raised = result.get("raised")
    params = {name: state for name, state in result.get("params", {}).items() if not ENGINE_DEFAULTS.search(name)}
    taken = set(result.get("from_target", []))
    parameters = {name: "from_target" if name in taken else state for name, state in params.items()}
    loaded = set(result.get("loaded", [])) | set(result.get("consumed", []))
    names = list(tensors_of(case))
    tensors = {}
    for name in names:
        if name in loaded:
            replaced = any(_same_weight(name, p) for p in taken)
            tensors[name] = "from_target" if replaced else "used"
        else:
            tensors[name] = "unused"
    if raised:
        first_line = (raised["message"].strip().splitlines() or [""])[0][:160]
        reason = f"raised {raised['type']}: {first_line} (at {result.get('stage')})"
        return View("fails", tensors, parameters, (reason,), raised=True)
    fails, degraded = [], []
    fails += _forward_failures(result)
    for name, fate in tensors.items():
        if fate == "unused" and not INERT.search(name):
            degraded.append(f"{name} unused")
    for name, state in parameters.items():
        if state in ("unwritten", "partial"):
            degraded.append(f"{name} {state}")
        elif state == "altered":
            degraded.append(f"{name} holds values that are in no checkpoint tensor (padded or converted)")
    for name in result.get("float_into_int", []):
        degraded.append(f"{name}: token ids through a float type")
    hot = result.get("hot_token_id")
    if hot and hot.get("rows") is not None and hot["length"] != hot["rows"]:
        (fails if hot["length"] < hot["rows"] else degraded).append(
            f"hot_token_id has {hot['length']} entries for a {hot['rows']}-row head"
        )
    head_rows = result.get("head_rows")
    if "lm_head.weight" in taken and head_rows is not None and head_rows != VOCAB:
        degraded.append(f"lm_head from the {VOCAB}-row target though the drafter's head has {head_rows} rows")
    aux = result.get("aux") or {}
    if case.trained_outputs is not None and aux.get("uses_aux", True) and "outputs" in aux:
        if sorted(case.trained_outputs) != aux["outputs"]:
            degraded.append(f"captures outputs {aux['outputs']}, trained on {sorted(case.trained_outputs)}")
    outcome = "fails" if fails else "degraded" if degraded else "loads"
    return View(outcome, tensors, parameters, tuple(fails or degraded))


def _forward_failures(result: Mapping[str, Any]) -> list[str]:
    found = []
    aux = result.get("aux") or {}
    if aux.get("uses_aux", True) and aux.get("fc_in") is not None and "outputs" in aux:
        width = len(aux["outputs"]) * HIDDEN
        if width != aux["fc_in"]:
            found.append(f"fc reads {aux['fc_in']} but {len(aux['outputs'])} captured states are {width} wide")
    for name, (built, now) in sorted(result.get("reshaped", {}).items()):
        found.append(f"{name} was built {built} and now holds {now}")
    embed = next((p for p in result.get("from_target", []) if p.endswith("embed_tokens.weight")), None)
    width = result.get("embed_width")
    if embed and width is not None and width != HIDDEN:
        found.append(f"the target's {HIDDEN}-wide embedding replaces a {width}-wide one")
    return found


def _same_weight(tensor: str, parameter: str) -> bool:
    """Whether a checkpoint name is the parameter's weight (embed_tokens / lm_head), whatever its prefix."""
    return tensor.split(".")[-2:] == parameter.split(".")[-2:]


def ckptdiff_view(entry: Mapping[str, Any]) -> View:
    """What ckptdiff says, from one ``engines[]`` entry of its JSON report."""
    tensors = {t["name"]: CKPTDIFF_TENSOR.get(t["fate"], t["fate"]) for t in entry.get("tensors", [])}
    shards: dict[str, set[str]] = {}
    for parameter in entry.get("parameters", []):
        name = re.sub(r"\[\w+\]$", "", parameter["name"])
        shards.setdefault(name, set()).add(CKPTDIFF_PARAMETER.get(parameter["fate"], parameter["fate"]))
    parameters = {}
    for name, fates in shards.items():
        if len(fates) == 1:
            parameters[name] = next(iter(fates))
        elif fates <= {"loaded", "unwritten"}:
            parameters[name] = "partial"
        else:
            parameters[name] = "/".join(sorted(fates))
    codes = tuple(f"{e['severity']} {e['code']}" for e in entry.get("events", []) if e["severity"] != "info")
    return View(entry["outcome"], tensors, parameters, codes, raised=entry["outcome"] == "fails")


def disagreements(case: str, engine: str, ours: View, theirs: View) -> list[Disagreement]:
    """Every place ckptdiff (``ours``) and the engine (``theirs``) differ, outcome first."""
    found = []
    if ours.outcome != theirs.outcome:
        said, did = _because(ours), _because(theirs)
        found.append(Disagreement(case, engine, "outcome", said, did))
    if theirs.raised:
        for name, fate in sorted(theirs.tensors.items()):
            if fate != "unused" and ours.tensors.get(name) in ("unused", None):
                found.append(Disagreement(case, engine, f"tensor {name}", str(ours.tensors.get(name)), fate))
        return found
    for name in sorted(set(ours.tensors) | set(theirs.tensors)):
        said, did = ours.tensors.get(name, "(not listed)"), theirs.tensors.get(name, "(not in checkpoint)")
        if said != did and said != "error":
            found.append(Disagreement(case, engine, f"tensor {name}", said, did))
    for name in sorted(set(ours.parameters) | set(theirs.parameters)):
        said = ours.parameters.get(name, "(no such parameter)")
        did = theirs.parameters.get(name, "(no such parameter)")
        if said != did and said != "error":
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
