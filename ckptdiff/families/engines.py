"""The serving engines ``--engine`` names: every engine some family has a pinned loader for (:data:`FAMILIES`)."""

from __future__ import annotations

from . import FAMILIES

#: Every engine ckptdiff replays (some family's rules name it), in the order ``all`` runs them.
ENGINE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(engine for family in FAMILIES for engine in family.engines))
ALL = "all"
ENGINE_CHOICES: tuple[str, ...] = (*ENGINE_NAMES, ALL)


def engine_names(requested: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Requested names (``all`` expands) without repeats, in the order given; unknown names raise ValueError."""
    out: list[str] = []
    for name in requested:
        if name not in ENGINE_CHOICES:
            raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINE_CHOICES)}")
        for each in ENGINE_NAMES if name == ALL else (name,):
            if each not in out:
                out.append(each)
    return tuple(out)
