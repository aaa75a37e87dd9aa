"""The words of the DFlash family's findings, each from its params alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Params = Mapping[str, Any]


def _fc(params: Params) -> str:
    read = (
        f"the {params['features']} target layer ids at {params['key']}"
        if params.get("key")
        else (f"one feature per drafter layer ({params['features']}; no target_layer_ids)")
    )
    return (
        f"{params['side']}: fc.weight is {params['got']} but its config makes it {params['want']} ({read} x "
        "hidden_size): both engines refuse to load it"
    )


def _layers(params: Params) -> str:
    parts = []
    if params.get("missing"):
        parts.append(f"layers {params['missing']} are missing (random in both engines)")
    if params.get("extra"):
        parts.append(f"layers {params['extra']} are beyond it (vLLM refuses them, SGLang skips them)")
    return (
        f"{params['side']}: num_hidden_layers is {params['layers']} but the checkpoint stores drafter layers "
        f"{params['stored']}: " + "; ".join(parts or ["the layers stored differ"])
    )


def _differs(params: Params) -> str:
    where = params.get("key_a") or params.get("key_b") or params["setting"]
    return (
        f"{params['setting']} differs: A {params['a']}, B {params['b']} ({where}): the two drafters are not drop-ins "
        "for each other (another target layer set feeds fc, or another block or mask token is drafted)"
    )


def _out_of_range(params: Params) -> str:
    return (
        f"{params['side']}: target layer ids {params['ids']} ({params['key']}) reach past the base's "
        f"{params['layers']} layers: SGLang refuses to start, vLLM fails at the first forward"
    )


def _hidden(params: Params) -> str:
    return (
        f"{params['side']}: hidden_size {params['hidden']} but the base is {params['target_hidden']} wide: the drafter "
        "embeds with the base's embedding and drafts through its head, which do not fit"
    )


def _mask(params: Params) -> str:
    return (
        f"{params['side']}: mask token id {params['mask_token_id']} ({params['key']}) is outside the base's vocabulary "
        f"of {params['vocab']}"
    )


FINDINGS: dict[str, Callable[[Params], str]] = {
    "dflash_fc_width_mismatch": _fc,
    "dflash_layers_mismatch": _layers,
    "dflash_setting_differs": _differs,
    "dflash_target_layer_out_of_range": _out_of_range,
    "dflash_hidden_mismatch": _hidden,
    "dflash_mask_token_out_of_vocab": _mask,
}
