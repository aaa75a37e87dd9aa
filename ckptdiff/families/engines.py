"""The serving engines ``--engine`` names, from the families' registry lines, and what a family an engine has no
rules for comes out as: its pinned registry has no loader for it (cited), or ckptdiff has not modelled it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import FAMILIES, family

if TYPE_CHECKING:
    from ..report import EngineResult

#: Every engine ckptdiff replays (some family's rules name it), in the order ``all`` runs them.
ENGINE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(engine for each in FAMILIES for engine in each.engines))
ALL = "all"
ENGINE_CHOICES: tuple[str, ...] = (*ENGINE_NAMES, ALL)
#: Where each engine registers the model classes it can build, at the pinned version.
REGISTRIES: dict[str, str] = {
    "vllm": "vllm-project/vllm@v0.33.0 vllm/model_executor/models/registry.py",
    "sglang": "sgl-project/sglang@v0.5.23 python/sglang/srt/models/registry.py",
    "trtllm": "NVIDIA/TensorRT-LLM@b35ac1b tensorrt_llm/_torch/models/modeling_auto.py",
}
LABELS: dict[str, str] = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


def engine_names(requested: tuple[str, ...] | list[str], family_name: str | None = None) -> tuple[str, ...]:
    """Requested names without repeats, in the order given; ``all`` expands to every engine, or for a family to
    the engines it has rules for and those whose pinned registry has no loader for it (every engine for a
    family with neither). Unknown names raise ValueError."""
    every = ENGINE_NAMES
    if family_name is not None:
        chosen = family(family_name)
        known = (*chosen.engines, *chosen.no_loader)  # nothing known: every engine says it has no rules for it
        every = tuple(name for name in ENGINE_NAMES if name in known) if known else ENGINE_NAMES
    out: list[str] = []
    for name in requested:
        if name not in ENGINE_CHOICES:
            raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINE_CHOICES)}")
        for each in every if name == ALL else (name,):
            if each not in out:
                out.append(each)
    return tuple(out)


def unserved(family_name: str, engine: str, side: str) -> EngineResult:
    """An engine without rules for this family: the pinned version has no loader for it (its registry cited),
    or ckptdiff has not modelled that engine's loader for the family; either way nothing says it loads."""
    from ..report import EngineEvent, EngineResult

    missing = engine in family(family_name).no_loader
    code = "family_not_loaded" if missing else "family_not_modelled"
    params = {"family": family_name, "engine": engine}
    event = EngineEvent("error", code, None, f"families.{code}", params, REGISTRIES.get(engine) if missing else None)
    return EngineResult(engine, side, (event,))


#: The words of the events above (registered in the formats' catalogue with every family's).
EVENTS: dict[str, str] = {
    "families.family_not_loaded": (
        "{label} {version} has no loader for {family} drafters: no model class of its registry and no speculative "
        "method it accepts serves one"
    ),
    "families.family_not_modelled": (
        "ckptdiff has no rules for {label}'s loading of {family} drafters: it cannot say what {label} does with "
        "this checkpoint (see the support table in docs/families.md)"
    ),
}
VERSIONS: dict[str, str] = {"vllm": "0.33.0", "sglang": "0.5.23", "trtllm": "b35ac1b"}
DERIVED = {
    "label": lambda params: LABELS.get(params.get("engine", ""), "?"),
    "version": lambda params: VERSIONS.get(params.get("engine", ""), "?"),
}
SUMMARIES: dict[str, str] = {
    "family_not_loaded": "no loader for {family}",
    "family_not_modelled": "no rules for {family} under this engine",
}
