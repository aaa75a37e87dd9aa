"""What the values of a config.json the rules read must be, wherever the config nests them (text_config, an
eagle_config, ...): sizes and counts that are JSON integers, sizes above zero, counts no real model exceeds,
layer-id lists of integers. A value past these is a defect of the file: one line naming it, not a verdict built on
a value the rules would take as unset."""

from __future__ import annotations

import json
from typing import Any

from .errors import CkptdiffError
from .limits import (
    CONFIG_INTEGERS,
    EAGLE_LAYER_ID_KEYS,
    MAX_CONFIG_COUNTS,
    MAX_LAYER_ID_LISTS,
    POSITIVE_CONFIG_INTEGERS,
    SIGNED_CONFIG_INTEGERS,
    STRING_LAYER_ID_KEYS,
)


def check_config_values(document: dict[str, Any], config_name: str) -> None:
    """A size or count the rules read that is no JSON integer (:data:`~ckptdiff.limits.CONFIG_INTEGERS`), is
    below zero, or is a size at zero (:data:`~ckptdiff.limits.POSITIVE_CONFIG_INTEGERS`), is refused, and so is a
    layer or expert count past any real model's (:data:`~ckptdiff.limits.MAX_CONFIG_COUNTS`) and a layer-id list
    too long or holding other than integers."""
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        scope, holder = pending.pop()
        if isinstance(holder, list):
            pending += [(scope, item) for item in holder]
            continue
        if not isinstance(holder, dict):
            continue
        for key, value in holder.items():
            if key in CONFIG_INTEGERS:
                _check_integer(f"{scope}{key}", value, config_name)
            limit = MAX_CONFIG_COUNTS.get(key)
            if limit is not None and isinstance(value, int) and value > limit:
                raise CkptdiffError(
                    config_name, f"{key} is {value}, more than any model has (ckptdiff reads up to {limit})"
                )
            if key in MAX_LAYER_ID_LISTS and isinstance(value, list):
                _check_layer_ids(f"{scope}{key}", value, MAX_LAYER_ID_LISTS[key], config_name)
            elif key in EAGLE_LAYER_ID_KEYS and value is not None:
                # "2,30,58" or 5 was taken as no ids: the engines' default layers reported, the ids' change unseen
                shown = json.dumps(value)[:40] + (" (a string)" if isinstance(value, str) else "")
                raise CkptdiffError(config_name, f"{scope}{key} is {shown}: it must be a list of JSON integers")
            if isinstance(value, dict | list):
                pending.append((f"{scope}{key}.", value))


def _check_integer(key: str, value: Any, config_name: str) -> None:
    """An integer, null (unset), or a list or object (Gemma 3n's per-layer intermediate_size) the family reads."""
    if isinstance(value, bool | str | float):
        shown = json.dumps(value)[:40] + (" (a string)" if isinstance(value, str) else "")
        raise CkptdiffError(config_name, f"{key} is {shown}: it must be a JSON integer")
    name = key.rpartition(".")[2]
    if isinstance(value, int) and value < 1 and name in POSITIVE_CONFIG_INTEGERS:
        raise CkptdiffError(config_name, f"{key} is {value}: a size must be at least 1")
    if isinstance(value, int) and value < 0 and name not in SIGNED_CONFIG_INTEGERS:
        # the engines' replays would index layers from the end (-5 drafter layers asked for 31 of them)
        what = "a count" if name in MAX_CONFIG_COUNTS else "it"
        raise CkptdiffError(config_name, f"{key} is {value}: {what} cannot be negative")


def _check_layer_ids(key: str, ids: list[Any], limit: int, config_name: str) -> None:
    """Up to ``limit`` ids, each an integer (a string too in ``target_layer_ids``): SGLang adds 1 to an EAGLE-3 id
    (a TypeError on "58"), and the rules would take a list holding anything else as no ids and report the engine's
    default layers."""
    if len(ids) > limit:
        name = key.rpartition(".")[2]
        raise CkptdiffError(config_name, f"{name} names {len(ids)} layers, more than any drafter reads (up to {limit})")
    kinds: tuple[type, ...] = (int, str) if key.rpartition(".")[2] in STRING_LAYER_ID_KEYS else (int,)
    odd = [item for item in ids if not isinstance(item, kinds) or isinstance(item, bool)]
    if odd:
        raise CkptdiffError(config_name, f"{key} holds {json.dumps(odd[0])[:40]}: each layer id must be a JSON integer")
