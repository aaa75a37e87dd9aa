"""Drafter families: one folder each under ``ckptdiff/families/``, and the one registry of them, ``FAMILIES``.

A family's folder (``families/<name>/``) holds everything that family knows:

- ``detect.py``: ``detect(config) -> bool``, light (a run whose configs no family claims loads no family);
- ``profile.py``: ``PROFILE``, the typed spec's use in a comparison (canonical naming, weights the engine
  injects, checks whose findings are codes + params);
- ``engines/``: per engine, its load rules as data citing the engine's files at the pinned version, and
  ``simulate(engine, checkpoint, side, base_config)`` replaying them (events are codes + params);
- ``messages.py``: ``FINDINGS`` (finding code → words), ``VARIANTS`` (the profile's variant codes → words) and
  ``engine_messages.py``: ``EVENTS`` (event wording key → template), which the formats' catalogue registers.

Adding a family is one folder and one line in ``FAMILIES``. What is generic stays outside: naming patterns
(:mod:`ckptdiff.naming`) and base layouts (:mod:`ckptdiff.base_layouts`) take roles, not a family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..checkpoint import Checkpoint
    from ..report import EngineResult
    from .model import Convention as Convention
    from .model import InjectedWeight as InjectedWeight
    from .model import Profile as Profile
    from .model import Review as Review

Config = Mapping[str, Any]
#: The profile model (:mod:`.model`), loaded with the first family a run uses: a run that uses none (and
#: ``--help``) does not define its classes.
_MODEL = ("Convention", "InjectedWeight", "Profile", "Review")


def __getattr__(name: str) -> Any:
    if name in _MODEL:
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Family:
    """One registry line: a family's name (its folder), the engines its rules replay, and the engines whose
    pinned version registers no loader for it (the verdict says so, citing the engine's registry)."""

    name: str
    #: What a checkpoint of the family holds, in words ("a DFlash drafter").
    title: str
    #: Engines whose loaders the family's rules replay (``--engine``), in the order ``all`` runs them.
    engines: tuple[str, ...] = ()
    no_loader: tuple[str, ...] = ()


#: Every family, in detection order (the first whose detector accepts a config is chosen).
FAMILIES: tuple[Family, ...] = (
    # DFlash first: its architecture or dflash_config decides, even beside an eagle_config section (vLLM and SGLang
    # serve such a drafter as DFlash under method dflash)
    Family("dflash", "a DFlash drafter", engines=("sglang", "vllm")),
    Family("eagle3", "an EAGLE-3 drafter", engines=("sglang", "vllm", "trtllm")),
    Family("mtp", "MTP layers (in a model or a standalone export)", engines=("sglang", "vllm")),
    Family("medusa", "a Medusa drafter", no_loader=("sglang", "vllm")),
)


def family(name: str) -> Family:
    found = next((f for f in FAMILIES if f.name == name), None)
    if found is None:
        raise ValueError(f"unknown family {name!r}; choose from {', '.join(profile_names())}")
    return found


def profile_names() -> tuple[str, ...]:
    return tuple(f.name for f in FAMILIES)


#: ``--profile`` values besides the families' names.
AUTO, NONE = "auto", "none"


def profile_choices() -> tuple[str, ...]:
    """Every value ``--profile`` and the config file's ``profile`` accept."""
    return (AUTO, NONE, *profile_names())


def get_profile(name: str) -> Profile | None:
    """A family's profile by name; ``none`` means the generic comparison."""
    if name == NONE:
        return None
    family(name)
    profile: Profile = import_module(f"{__name__}.{name}.profile").PROFILE
    return profile


def detect_family(*configs: Config | None) -> str | None:
    """The first family whose detector accepts any of the given configs."""
    for each in FAMILIES:
        detect: Callable[[Config], bool] = import_module(f"{__name__}.{each.name}.detect").detect
        if any(config is not None and detect(config) for config in configs):
            return each.name
    return None


def detect_profile(*configs: Config | None) -> Profile | None:
    """The profile of the first family whose detector accepts any of the given configs."""
    name = detect_family(*configs)
    return get_profile(name) if name is not None else None


def simulate(
    family_name: str, engine: str, checkpoint: Checkpoint, side: str, base_config: Config | None = None
) -> EngineResult:
    """What ``engine``'s loader does with ``checkpoint`` served as a drafter of this family; for an engine the
    family has no rules for, why not (:func:`.engines.unserved`)."""
    if engine not in family(family_name).engines:
        from .engines import unserved

        return unserved(family_name, engine, side)
    replay: Callable[..., EngineResult] = import_module(f"{__name__}.{family_name}.engines").simulate
    return replay(engine, checkpoint, side, base_config)


def finding_words() -> dict[str, Callable[[Mapping[str, Any]], str]]:
    """Every family's finding code → its words (the formats' catalogue registers them)."""
    out: dict[str, Callable[[Mapping[str, Any]], str]] = {}
    for each in FAMILIES:
        out |= import_module(f"{__name__}.{each.name}.messages").FINDINGS
    return out


def variant_words() -> dict[str, str]:
    """Every family's variant code → its words (``messages.VARIANTS``; the formats name a side's variants)."""
    out: dict[str, str] = {}
    for each in FAMILIES:
        out |= getattr(import_module(f"{__name__}.{each.name}.messages"), "VARIANTS", {})
    return out


def event_words() -> list[Any]:
    """Every family's engine-event wording module (``EVENTS``, ``PARAM_WORDS``, ``DERIVED``, ``SUMMARIES``), and
    the registry's own (an engine without rules for a family)."""
    from . import engines

    return [engines, *(import_module(f"{__name__}.{each.name}.engine_messages") for each in FAMILIES)]
