"""Serving engines as data: one module per engine (what its drafter loader does), one registry of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .rules import Engine

#: Every engine ckptdiff simulates, in the order ``all`` runs them.
ENGINE_NAMES: tuple[str, ...] = ("sglang", "vllm", "trtllm")
ALL = "all"
ENGINE_CHOICES: tuple[str, ...] = (*ENGINE_NAMES, ALL)


def get_engine(name: str) -> Engine:
    from .sglang import SGLANG
    from .trtllm import TRTLLM
    from .vllm import VLLM

    return {engine.name: engine for engine in (SGLANG, VLLM, TRTLLM)}[name]


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
