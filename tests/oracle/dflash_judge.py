"""The DFlash oracle: every case of dflash_cases.py through vLLM's and SGLang's own DFlash loaders on the CPU
(worker_dflash_vllm.py, worker_dflash_sglang.py inside the pinned engines' environments), against ckptdiff's
replay of the same drafter and target.

    python tests/oracle/dflash_check.py [--engine vllm] [--case NAME] [--cached-only]

Per case and engine the two sides must agree on the outcome (loads, degraded: a parameter left unwritten, fails)
and, when both fail, on the stage (config, construct, load, worker start-up, first forward) and, at the load, on the
tensor it raised on; when neither fails,
on every parameter's fate (loaded, left random, taken from the target, not needed) and on which tensors reached a
parameter. The engine's first forward is not run: its failure is derived from what the worker observed (the fc
width built against the target states captured, traced on the target's own class). Engine results are cached as
the EAGLE-3 job's are (results/dflash_<engine>-<version>/). Prints one line per disagreement and the count per
engine; exit 0 (none), 1 (some), 2 (no engine environment).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
for path in (str(HERE), str(REPO)):
    if path not in sys.path:
        sys.path.insert(0, path)

from dflash_cases import CASES, DFlashCase, target_config, write_cases  # noqa: E402
from engines import Pin, missing_environments, oracle_home, pins, run_engine  # noqa: E402

#: The stage each ckptdiff error event says the engine stops at, by wording key.
STAGES = {
    "dflash_not_supported": "config",
    "target_layer_ids_malformed": "config",
    "ids_vs_target": "config",
    "target_not_capturable": "config",
    "ids_vs_trained_depth": "construct",
    "unknown_name": "load",
    "shape_mismatch": "load",
    "fc_width_mismatch": "load",
    "mask_hidden_refused": "load",
    "domino_weights_refused": "load",
    "mask_token_out_of_vocab": "worker",
    "target_layer_not_captured": "forward",
    "hidden_mismatch": "forward",
}
ORDER = ("config", "construct", "load", "worker", "forward")


@dataclass(frozen=True)
class DriverPin(Pin):
    """An engine's pin driven by a family's worker module (worker_dflash_<engine>.py), in the engine's environment."""

    environment_of: str = ""

    @property
    def environment(self) -> Path:
        return oracle_home() / f"{self.environment_of}-{self.version}"


#: The EAGLE-3 driver each DFlash driver imports (its capture tracing, its SGLang set-up): part of the cache key.
SHARED = {"vllm": "worker_vllm.py", "sglang": "worker_sglang.py"}


def dflash_pins(wanted: list[str] | None = None) -> list[DriverPin]:
    """The pinned engines as DFlash drivers; the shared driver's digest rides in the requirements, so a change to it
    reruns these results as a change to worker.py does."""
    out = []
    for pin in pins():
        if pin.engine in SHARED and (not wanted or pin.engine in wanted):
            shared = hashlib.sha256((HERE / SHARED[pin.engine]).read_bytes()).hexdigest()[:16]
            requirements = f"{pin.requirements} # {SHARED[pin.engine]} {shared}"
            out.append(DriverPin(f"dflash_{pin.engine}", pin.version, requirements, environment_of=pin.engine))
    return out


@dataclass(frozen=True)
class Disagreement:
    case: str
    engine: str
    subject: str
    ckptdiff: str
    observed: str


def engine_view(case: DFlashCase, observed: dict[str, Any]) -> tuple[str, str | None, dict[str, str], set[str]]:
    """What the engine did: outcome, stage of failure, each parameter's fate, the tensors that reached a parameter."""
    taken = set(observed.get("from_target") or ())
    params: dict[str, str] = {}
    for name, state in (observed.get("params") or {}).items():
        if name in taken:
            params[name] = "from_target"
        elif state == "loaded":
            params[name] = "loaded"
        elif name.endswith("mask_embedding"):
            params[name] = "not_needed"
        else:
            params[name] = "random"  # unwritten, partial
    for name in taken:
        params.setdefault(name, "from_target")
    loaded = set(observed.get("loaded") or ())
    raised = observed.get("raised")
    if raised:
        stage = observed.get("stage", "?")
        return "fails", ("config" if stage == "distributed" else stage), params, loaded
    aux = observed.get("aux") or {}
    outputs = aux.get("outputs")
    if aux.get("uses_aux", True) and outputs is not None and aux.get("fc_in"):
        # combine_hidden_states: the captured states, each the target's hidden size wide, against fc's input.
        if len(outputs) * int(target_config(case.target)["hidden_size"]) != int(aux["fc_in"]):
            return "fails", "forward", params, loaded
    outcome = "degraded" if "random" in params.values() else "loads"
    return outcome, None, params, loaded


def ckptdiff_view(result: Any) -> tuple[str, str | None, dict[str, str], set[str]]:
    stages = [STAGES.get(e.wording.rsplit(".", 1)[-1], "?") for e in result.events if e.severity == "error"]
    stage = min(stages, key=lambda s: ORDER.index(s) if s in ORDER else 99) if stages else None
    params = {name: fate for name, fate in result.parameters if fate not in ("error",)}
    loaded = {name for name, fate, _ in result.tensors if fate in ("loaded", "renamed")}
    return result.outcome, stage, params, loaded


def case_config(case: DFlashCase, folder: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((folder / "config.json").read_text())
    return config


def judge(case: DFlashCase, engine: str, observed: dict[str, Any], folder: Path, target: Path) -> list[Disagreement]:
    from ckptdiff.pipeline import compare_specs

    report = compare_specs(str(folder), None, engines=(engine,), base=str(target))
    (result,) = report.engines
    ours, stage, params, loaded = ckptdiff_view(result)
    theirs, their_stage, their_params, their_loaded = engine_view(case, observed)
    found: list[Disagreement] = []

    def differ(subject: str, a: Any, b: Any) -> None:
        found.append(Disagreement(case.name, engine, subject, str(a), str(b)))

    if engine == "vllm" and "aux" in observed and "v1_ids" in observed["aux"]:
        from ckptdiff.families.dflash.engines import get_engine

        rule = get_engine("vllm").v1_ids
        said = list(rule(case_config(case, folder))) if rule is not None and rule(case_config(case, folder)) else None
        seen = observed["aux"]["v1_ids"]
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
            raising = {e.tensor for e in result.events if e.severity == "error" and e.tensor}
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


def run(
    engines: list[str] | None = None, names: list[str] | None = None, cached_only: bool = False, log: Any = sys.stderr
) -> tuple[list[Disagreement], dict[str, int], list[str]]:
    """Every case through each engine and ckptdiff: the disagreements, the cases compared per engine, and the
    cases an engine cannot be asked about here (with why)."""
    chosen = [case for case in CASES if not names or case.name in names]
    wanted = dflash_pins(engines)
    absent = missing_environments(list(wanted))
    if absent:
        raise SystemExit(f"not installed: {', '.join(pin.label for pin in absent)} under {oracle_home()}")
    found: list[Disagreement] = []
    compared: dict[str, int] = {}
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ckptdiff-dflash-oracle-") as scratch:
        paths = write_cases(Path(scratch), tuple(chosen))
        for pin in wanted:
            engine = pin.environment_of
            asked = {case.name: paths[case.name] for case in chosen if engine not in case.not_comparable}
            skipped += [f"{c.name}/{engine}: {c.not_comparable[engine]}" for c in chosen if engine in c.not_comparable]
            observed = run_engine(pin, asked, log=log, cached_only=cached_only)
            compared[engine] = len(asked)
            for case in chosen:
                if case.name in asked:
                    found += judge(case, engine, observed[case.name], *paths[case.name])
    return found, compared, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", action="append", choices=("vllm", "sglang"))
    parser.add_argument("--case", action="append")
    parser.add_argument("--cached-only", action="store_true", help="never run an engine (mutate.py)")
    args = parser.parse_args(argv)
    try:
        found, compared, skipped = run(args.engine, args.case, args.cached_only)
    except SystemExit as missing:
        print(missing)
        return 2
    for row in found:
        print(f"{row.case:28} {row.engine:7} {row.subject}: ckptdiff {row.ckptdiff} / engine {row.observed}")
    for line in skipped:
        print(f"not comparable: {line}")
    for engine, count in compared.items():
        n = sum(1 for row in found if row.engine == engine)
        print(f"dflash oracle: {engine}: {count} cases, {n} disagreement(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
