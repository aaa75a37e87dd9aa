"""A checkpoint that is no drafter at all (a base model) under the EAGLE-3 replay: one event saying so, not one per
tensor and parameter.

vLLM builds ``Eagle3`` + any architecture it is given (``DeepseekV3ForCausalLM`` becomes its MLA drafter class), so
its replay of a base model lists every tensor the drafter has no parameter for and every parameter left random:
hundreds of events for what is one fact. A checkpoint whose config.json carries no EAGLE-3 sign and whose tensors
mostly have no place in the drafter is named as not a drafter instead; the per-tensor and per-parameter fates stay
in the result (the JSON report lists them)."""

from __future__ import annotations

import msgspec

from ...checkpoint import Checkpoint
from ...report import EngineEvent, EngineResult
from .detect import is_eagle3


def not_a_drafter(result: EngineResult, checkpoint: Checkpoint) -> EngineResult | None:
    """``result`` with its events folded into one ``not_a_drafter`` error when ``checkpoint`` is not an EAGLE-3
    drafter by its config and the loader has no parameter for more than half of its tensors; else None."""
    config = checkpoint.config
    if config is None or is_eagle3(config) or not result.tensors or result.outcome == "loads":
        return None
    unplaced = [name for name, fate, parameter in result.tensors if parameter is None and fate in ("error", "skipped")]
    if 2 * len(unplaced) <= len(checkpoint.tensors):
        return None
    named = set(unplaced)
    first = next((e for e in result.events if e.severity != "info" and e.tensor in named), None)
    at = first.tensor if first is not None and first.tensor is not None else unplaced[0]
    architectures = config.get("architectures")
    arch = architectures[0] if isinstance(architectures, list) and architectures else None
    params = {
        "engine": result.engine,
        "arch": arch if isinstance(arch, str) else "config.json",
        "unplaced": len(unplaced),
        "tensors": len(checkpoint.tensors),
        "at": at,
        "code": first.code if first is not None else "no parameter",
        "random": sum(1 for _, fate in result.parameters if fate == "random"),
    }
    source = first.source if first is not None else None
    event = EngineEvent("error", "not_a_drafter", at, "eagle3.not_a_drafter", params, source)
    return msgspec.structs.replace(result, events=(event,))
