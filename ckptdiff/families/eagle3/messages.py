"""The words of the EAGLE-3 profile's findings (:mod:`ckptdiff.families.eagle3.profile`), each from its params alone.

A finding the profile made for both sides carries ``params["sides"]`` and reads "A and B: …".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

Params = Mapping[str, Any]


def on_sides(params: Params, text: str) -> str:
    """``A and B: text`` for a finding made on those sides (``params["sides"]``), else the text."""
    sides = params.get("sides")
    return f"{' and '.join(sides)}: {text}" if sides else text


def shape(dims: Any) -> str:
    return f"[{', '.join(map(str, dims))}]"


def _setting(found: Mapping[str, Any]) -> str:
    """A ``{key: value}`` param as a config line: ``num_hidden_layers=40``."""
    ((key, value),) = found.items()
    return f"{key}={json.dumps(value)}"


def _stored_as(params: Params) -> str:
    return f" (stored as {params['stored_as']})" if params.get("stored_as") else ""


def _shape_vs_config(params: Params) -> str:
    return (
        f"{params['tensor']}{_stored_as(params)} is {shape(params['shape'])} but its config.json implies "
        f"{shape(params['needs'])} ({params['because']}); the engine builds the layer from the config and cannot "
        "load this weight"
    )


def _t2d_length_mismatch(params: Params) -> str:
    return (
        f"t2d{_stored_as(params)} has {shape(params['shape'])} entries but config.json's {params['because']} needs "
        f"{shape(params['needs'])}: the draft vocabulary mask was built for a different target vocabulary"
    )


def _lm_head_missing(params: Params) -> str:
    return (
        f"config.json sets {params['draft_vocab']} but there is no lm_head.weight: engines take the head from the "
        "base model only when draft_vocab_size is absent, so it would be randomly initialised (accept length ≈ 1.00)"
    )


def _d2t_missing(params: Params) -> str:
    return (
        f"the draft vocabulary ({params['draft_vocab']}) differs from the target's ({params['vocab']}) but there is "
        "no d2t: draft token ids cannot be mapped to target ids (a missing d2t dropped accept length from 2.99 to "
        "1.12)"
    )


def _embed_tokens_carried(params: Params) -> str:
    return (
        f"carries its own {params['weight']}: vLLM uses it instead of the base's {params['base_name']} (SGLang "
        "takes the base's), so it must equal the base's; a random one collapses acceptance (--values --base "
        "compares them)"
    )


def _max_position_small(params: Params) -> str:
    below = f" is below the base's {params['base']}:" if "base" in params else " is small:"
    return f"{params['setting']}{below} RoPE positions past it are clamped, and acceptance collapses on longer prompts"


def _aux_layer_ids_differ(params: Params) -> str:
    text = f"{params['key']} differs: A {json.dumps(params['a'])}, B {json.dumps(params['b'])}"
    if "key_b" in params:  # each side sets its ids at another key
        text = f"aux layer ids differ: A {params['key']}={json.dumps(params['a'])}, B {params['key_b']}="
        text += json.dumps(params["b"])
    if "shift" not in params:  # the engine view: each engine's events say what it reads
        return text
    from .v1 import v1_engines  # the same clause v1 reports carry as params["engines"]

    return f"{text}; {v1_engines(params['shift'])}"


def _max_position_differs(params: Params) -> str:
    a, b = params["a"], params["b"]
    return f"max_position_embeddings differs: A {a}, B {b}; the smaller one clamps RoPE past {min(a, b)} tokens"


def _base_config_missing(params: Params) -> str:
    return (
        f"the base ({params['base']}) has no config.json: the drafters' vocab_size, hidden size, aux layer ids, "
        "dtype and max_position_embeddings are not checked against it"
    )


def _injected_from_base(params: Params) -> str:
    return (
        f"{params['weight']} is absent; the engine supplies it from the base model's {params['base_name']} "
        "(give --base to verify it)"
    )


def _injected_missing_in_base(params: Params) -> str:
    looked = " or ".join(params["looked_for"])
    return f"{params['weight']} is absent and the base ({params['base']}) has no {looked} to supply it"


def _injected_incompatible_with_base(params: Params) -> str:
    from .v1 import v1_problems  # the same clauses v1 reports carry as params["problems"]

    problems = v1_problems(params)
    return (
        f"{params['weight']} would come from the base's {params['base_name']}, which is "
        f"{shape(params['base_shape'])} {params['base_dtype']}, but {' and '.join(problems)}"
    )


def _injected_verified(params: Params) -> str:
    got = f"{shape(params['base_shape'])} {params['base_dtype']}"
    return f"{params['weight']}: the base's {params['base_name']} {got} fits"


def _dtype_differs_from_base(params: Params) -> str:
    if "base_setting" in params:  # the drafter's dtype against the base's config
        return (
            f"the drafter is {params['dtype']} but the base runs in {params['base_dtype']} "
            f"({_setting(params['base_setting'])}); the engine casts the drafter to the base's dtype"
        )
    return (
        f"{params['weight']} would come from the base's {params['base_name']} as {params['base_dtype']}, but the "
        f"drafter's weights are {params['dtype']}"
    )


#: What a base setting is checked against, by the setting's name (``params["key"]``).
_CHECKS = {
    "vocab_size": "the drafter's {setting}",
    "hidden_size": "the drafter's target hidden size ({setting})",
    "num_hidden_layers": "{setting}",
    "max_position_embeddings": "the drafter's {setting}",
}


def _base_setting_missing(params: Params) -> str:
    found = params.get("found")
    what = "has no" if found is None else f"has no usable ({_setting(found)})"
    checks = _CHECKS[params["key"]].format(setting=params["setting"])
    return f"the base's config.json {what} {' or '.join(params['looked_for'])}: {checks} not checked against the base"


def _base_config_mismatch(params: Params) -> str:
    base = f"the base's {params['base_key']} is {params['base']}"
    if params["key"] == "vocab_size":
        return f"{params['drafter']} but {base}: the drafter was trained for another tokenizer"
    return (
        f"the drafter expects target hidden states of {params['drafter']} but {base}: fc cannot take the base's "
        "hidden states"
    )


def _aux_layer_out_of_range(params: Params) -> str:
    ((key, layers),) = params["base"].items()
    return (
        f"{params['setting']} names layer(s) {json.dumps(params['outside'])} but the base has {key}={layers} "
        f"(ids must be < {layers}; mind the SGLang/vLLM off-by-one)"
    )


def _sided(render: Callable[[Params], str]) -> Callable[[Params], str]:
    return lambda params: on_sides(params, render(params))


#: The EAGLE-3 variants a drafter can be (DrafterSpec.variants).
VARIANTS: dict[str, str] = {
    "mla": "MLA attention (DeepSeek-V2/V3, Kimi-K2.5)",
    "eagle3.1": "EAGLE 3.1 (fc_norm, norm_before_fc or norm_output)",
    "multi-layer": "multi-layer (more than one decoder layer)",
}

#: EAGLE-3 finding code → its text from its params.
FINDINGS: dict[str, Callable[[Params], str]] = {
    code: _sided(render)
    for code, render in {
        "shape_vs_config": _shape_vs_config,
        "t2d_length_mismatch": _t2d_length_mismatch,
        "lm_head_missing": _lm_head_missing,
        "d2t_missing": _d2t_missing,
        "embed_tokens_carried": _embed_tokens_carried,
        "max_position_small": _max_position_small,
        "aux_layer_ids_differ": _aux_layer_ids_differ,
        "max_position_differs": _max_position_differs,
        "base_config_missing": _base_config_missing,
        "injected_from_base": _injected_from_base,
        "injected_missing_in_base": _injected_missing_in_base,
        "injected_incompatible_with_base": _injected_incompatible_with_base,
        "injected_verified": _injected_verified,
        "dtype_differs_from_base": _dtype_differs_from_base,
        "base_setting_missing": _base_setting_missing,
        "base_config_mismatch": _base_config_mismatch,
        "aux_layer_out_of_range": _aux_layer_out_of_range,
    }.items()
}
