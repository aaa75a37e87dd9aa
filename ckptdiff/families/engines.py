"""Serving engines as data: one module per engine (what its drafter loader does), one registry of them.

An engine is a module here named like the engine, holding ``ENGINE`` (a :class:`rules.Engine`); adding one is
adding its module and its name below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .rules import Engine

#: Every engine ckptdiff simulates (module names), in the order ``all`` runs them.
ENGINE_NAMES: tuple[str, ...] = ("sglang", "vllm", "trtllm")
ALL = "all"
ENGINE_CHOICES: tuple[str, ...] = (*ENGINE_NAMES, ALL)


def get_engine(name: str) -> Engine:
    if name not in ENGINE_NAMES:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINE_NAMES)}")
    engine: Engine = importlib.import_module(f"{__name__}.{name}").ENGINE  # a module attribute: Any to mypy
    return engine


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
