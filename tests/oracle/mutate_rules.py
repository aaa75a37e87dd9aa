"""Where mutate.py's mutations find the rules they change, and the changes they make with them: the engines' rule
modules (wherever they live), a loader's parameters, an engine's capture classes."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

# ---- where the rules live (the one place to update if they move again)

#: Where each part of the rules has lived, newest first: a mutation names a rule, these find its module.
PLACES = {
    "engines": ("ckptdiff.families.eagle3.engines", "ckptdiff.engines"),
    "spec": ("ckptdiff.families.eagle3.spec", "ckptdiff.profiles.drafter"),
    "capture": ("ckptdiff.families.eagle3.engines.capture", "ckptdiff.engines.capture"),
    "rules": ("ckptdiff.families.rules", "ckptdiff.engines.rules"),
}


def place(part: str) -> Any:
    import importlib

    for name in PLACES[part]:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"mutate.py: none of {PLACES[part]} imports: update PLACES")


def engine_module(name: str) -> Any:
    """The module holding engine ``name``'s rules, found by the object the registry returns (wherever it lives)."""
    engine = place("engines").get_engine(name)
    return next(m for m in list(sys.modules.values()) if getattr(m, "ENGINE", None) is engine)


def change_engine(name: str, change: Callable[[Any], Any]) -> None:
    module = engine_module(name)
    module.ENGINE = change(module.ENGINE)


def change_aux(name: str, **fields: Any) -> None:
    change_engine(name, lambda e: dataclasses.replace(e, aux_ids=dataclasses.replace(e.aux_ids, **fields)))


def change_loader(name: str, architecture: str, change: Callable[[Any], Any]) -> None:
    def apply(engine: Any) -> Any:
        loaders = tuple(change(lo) if architecture in lo.architectures else lo for lo in engine.loaders)
        return dataclasses.replace(engine, loaders=loaders)

    change_engine(name, apply)


def change_params(name: str, architecture: str, change: Callable[[Any], Any]) -> None:
    """``change(param)`` → the changed Param, or None to drop it."""

    def apply(loader: Any) -> Any:
        params = tuple(p for p in (change(param) for param in loader.params) if p is not None)
        return dataclasses.replace(loader, params=params)

    change_loader(name, architecture, apply)


def change_capture(name: str, label: str, **fields: Any) -> None:
    def apply(engine: Any) -> Any:
        classes = tuple(dataclasses.replace(c, **fields) if c.label == label else c for c in engine.aux_ids.classes)
        return dataclasses.replace(engine, aux_ids=dataclasses.replace(engine.aux_ids, classes=classes))

    change_engine(name, apply)


def _import_spec() -> Any:
    return place("spec").DrafterSpec


def capture_labels(name: str, takes: str | None = None) -> list[str]:
    """The labels of engine ``name``'s capture classes (those taking ``takes``, when given): every class the engine
    has, Llama-4's included, so a mutation of every class reaches a class added later."""
    classes = engine_module(name).ENGINE.aux_ids.classes
    return [c.label for c in classes if takes is None or c.takes == takes]
