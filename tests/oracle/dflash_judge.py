"""How the oracle compares a DFlash case (dflash_cases.py) under one engine: the DFlash family's ``judge`` in
oracle_families.py, run by run.py on what the engine's DFlash loader did (worker_dflash_<engine>.py) and on
ckptdiff's JSON report of the same drafter against the same target.

Per case and engine the two sides must agree on the outcome (loads, degraded: a parameter left unwritten, fails)
and, when both fail, on the stage (config, construct, load, the DFLASH worker's start-up, first forward) and, at
the load, on the tensor it raised on; when neither fails, on every parameter's fate (loaded, left random, taken
from the target, not needed, a default of its own: vLLM's -inf attention sinks, observed as built) and on which
tensors reached a parameter; under vLLM, on the target layers the V1
model runner captures at. The engine's first forward is not run whole: its failure is what the worker observed of
the captured states' handover (``aux.handover``: V2's own ``_store_hidden_states``, V1's drafter
``combine_hidden_states`` against the proposer's width), else derived from the fc width built against the target
states captured (traced on the target's own class). A shipped fc the drafter builds none for (vLLM,
``use_aux_hidden_state`` false) is not loaded as trained: degraded.

DFlash keeps these terms of its own rather than compare.py's: its stages include the DFLASH worker's start-up
check (after the load), its mask embedding is built and never loaded by design, and its parameters are compared
as ckptdiff names them per engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from compare import Disagreement
from dflash_cases import DFlashCase, names_of, target_config

_FC = re.compile(r"^(model\.)?(encoder\.)?fc\.")

#: The stage each ckptdiff error event says the engine stops at, by wording key.
STAGES = {
    "dflash_not_supported": "config",
    "target_layer_ids_malformed": "config",
    "config_refused": "config",
    "ids_vs_target": "config",
    "target_not_capturable": "config",
    "mask_token_missing": "config",
    "mask_token_null": "config",
    "ids_vs_trained_depth": "construct",
    "target_layer_ids_not_int": "construct",
    "sink_backend_required": "construct",
    "unknown_name": "load",
    "shape_mismatch": "load",
    "fc_width_mismatch": "load",
    "mask_hidden_refused": "load",
    "domino_weights_refused": "load",
    "mask_token_out_of_vocab": "worker",
    "target_layer_not_captured": "forward",
    "target_layer_not_captured_v1": "forward",
    "hidden_mismatch": "forward",
    "aux_states_unprojected": "forward",
    "aux_states_unprojected_v1": "forward",
}
ORDER = ("config", "construct", "load", "worker", "forward")

View = tuple[str, str | None, dict[str, str], set[str]]


def engine_view(case: DFlashCase, observed: Mapping[str, Any]) -> View:
    """What the engine did: outcome, stage of failure, each parameter's fate, the tensors that reached a parameter."""
    taken = set(observed.get("from_target") or ())
    # built at -inf (vLLM's attention sinks): left unwritten, the value it was built with stays, a default of its own
    filled = set(observed.get("built_fill") or ())
    params: dict[str, str] = {}
    for name, state in (observed.get("params") or {}).items():
        if name in taken:
            params[name] = "from_target"
        elif state == "loaded":
            params[name] = "loaded"
        elif name.endswith("mask_embedding"):
            params[name] = "not_needed"
        elif name in filled and state == "unwritten":
            params[name] = "default"
        else:
            params[name] = "random"  # unwritten, partial
    for name in taken:
        params.setdefault(name, "from_target")
    loaded = set(observed.get("loaded") or ())
    if observed.get("raised"):
        stage = observed.get("stage", "?")
        return "fails", ("config" if stage == "distributed" else stage), params, loaded
    if (observed.get("kv") or {}).get("error"):  # vLLM's start-up grouping of the KV caches refused
        return "fails", "worker", params, loaded
    aux = observed.get("aux") or {}
    outputs = aux.get("outputs")
    target_hidden = int(target_config(case.target)["hidden_size"])
    handover = aux.get("handover") or {}
    if "error" in handover:  # the engine's own code raised on the captured states (worker's observe_handover)
        return "fails", "forward", params, loaded
    if aux.get("uses_aux", True) and outputs is not None and aux.get("fc_in"):
        # combine_hidden_states: the captured states, each the target's hidden size wide, against fc's input.
        if len(outputs) * target_hidden != int(aux["fc_in"]):
            return "fails", "forward", params, loaded
    uses_aux = aux.get("uses_aux", True)
    if not uses_aux and "states" not in handover and outputs is not None:
        # not observed (a result from before the handover was): no fc, so the states themselves must be the
        # drafter's hidden size wide
        if len(outputs) * target_hidden != int(case.config_json()["hidden_size"]):
            return "fails", "forward", params, loaded
    # a shipped fc the drafter built none for (use_aux_hidden_state false): dropped, so not loaded as trained
    dropped_fc = [n for n in names_of(case) if _FC.match(n) and n not in loaded] if not uses_aux else []
    # a sink bias left at its -inf default: the layer attends without the sink its config asks for
    defaulted = any(params.get(name) == "default" for name in filled)
    outcome = "degraded" if "random" in params.values() or dropped_fc or defaulted else "loads"
    return outcome, None, params, loaded


def ckptdiff_view(entry: Mapping[str, Any]) -> View:
    """What ckptdiff says, from one ``engines[]`` entry of its JSON report."""
    errors = [e for e in entry.get("events", []) if e["severity"] == "error"]
    stages = [STAGES.get(str(e.get("wording") or e["code"]).rsplit(".", 1)[-1], "?") for e in errors]
    stage = min(stages, key=lambda s: ORDER.index(s) if s in ORDER else 99) if stages else None
    params = {p["name"]: p["fate"] for p in entry.get("parameters", []) if p["fate"] != "error"}
    loaded = {t["name"] for t in entry.get("tensors", []) if t["fate"] in ("loaded", "renamed")}
    return entry["outcome"], stage, params, loaded


def v1_ids_said(entry: Mapping[str, Any], observed: Mapping[str, Any]) -> list[int] | None:
    """The target layers ckptdiff says vLLM's V1 model runner captures at: those of its event when it says the V1
    runner differs from the default (V2) runner, else the ones the default runner captures at (observed)."""
    for event in entry.get("events", []):
        if event["code"] == "v1_runner_capture_differs":
            v1 = (event.get("params") or {}).get("v1")
            return list(v1) if v1 else None
    v2 = (observed.get("aux") or {}).get("ids")
    return list(v2) if v2 else None


def kv_cache_disagreements(
    case: DFlashCase, engine: str, observed: Mapping[str, Any], entry: Mapping[str, Any]
) -> list[Disagreement]:
    """Where ckptdiff says the drafter's attention differs from the target's (``draft_kv_cache``), what it says of
    the KV cache against what the engine's start-up did: vLLM groups the drafter's layers with the target's in one
    KV-cache group; SGLang sizes the draft's own pool at the bytes per token ckptdiff computes."""
    said = next((e for e in entry.get("events", []) if e["code"] == "draft_kv_cache"), None)
    if said is None or observed.get("raised") or entry["outcome"] == "fails":
        return []
    params = said.get("params") or {}
    kind = str(entry.get("engine", engine))
    if kind == "vllm" and "kv" in observed:  # the DFlash driver's (vLLM's V1-runner driver does not look)
        kv = observed["kv"]
        if "groups" not in kv:
            seen = kv.get("unobserved") or kv.get("error")
            return [Disagreement(case.name, engine, "KV-cache groups", "(compared only when observed)", str(seen))]
        if len(kv["groups"]) != 1:
            return [Disagreement(case.name, engine, "KV-cache groups", "one group", str(kv["groups"]))]
    if kind == "sglang" and observed.get("draft_kv_bytes_per_token") != params.get("bytes_per_token"):
        seen = observed.get("draft_kv_bytes_per_token")
        return [
            Disagreement(case.name, engine, "draft KV bytes per token", str(params.get("bytes_per_token")), str(seen))
        ]
    return []


def judge(case: DFlashCase, engine: str, observed: Mapping[str, Any], entry: Mapping[str, Any]) -> list[Disagreement]:
    """Every place ckptdiff's report (``entry``, its engines[] entry for ``engine``) and the engine differ."""
    # the engine whose rules speak: a variant's column (vLLM's V1 runner) is judged as its engine
    engine_kind = str(entry.get("engine", engine))
    ours, stage, params, loaded = ckptdiff_view(entry)
    theirs, their_stage, their_params, their_loaded = engine_view(case, observed)
    found: list[Disagreement] = []

    def differ(subject: str, a: Any, b: Any) -> None:
        found.append(Disagreement(case.name, engine, subject, str(a), str(b)))

    found += kv_cache_disagreements(case, engine, observed, entry)
    aux = observed.get("aux") or {}
    if engine_kind == "vllm" and "v1_ids" in aux:
        said, seen = v1_ids_said(entry, observed), aux["v1_ids"]
        if said != (list(seen) if seen else None):
            differ("V1 runner capture ids", said, seen)
    if ours != theirs:
        raised = observed.get("raised") or {}
        differ("outcome", ours, f"{theirs} ({raised.get('type', '')}: {str(raised.get('message', ''))[:120]})")
        return found
    if ours == "fails":
        if stage != their_stage:
            differ("stage", stage, their_stage)
        elif stage == "load" and observed.get("loading"):
            # the tensor the engine's load raised on (the last one its loader was handed) must be one ckptdiff
            # says the load raises on
            raising = {e["tensor"] for e in entry.get("events", []) if e["severity"] == "error" and e.get("tensor")}
            if observed["loading"] not in raising:
                differ("tensor the load raised on", sorted(raising), observed["loading"])
        return found
    for name in sorted(set(params) | set(their_params)):
        if params.get(name) != their_params.get(name):
            differ(f"parameter {name}", params.get(name, "(not built)"), their_params.get(name, "(not built)"))
    for name in sorted(loaded ^ their_loaded):
        state = ("loaded" if name in side else "not loaded" for side in (loaded, their_loaded))
        differ(f"tensor {name}", *state)
    return found
