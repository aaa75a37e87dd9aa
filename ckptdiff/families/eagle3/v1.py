"""The prose params v1 JSON reports carry for three EAGLE-3 findings; kept until v2.

``ckptdiff/report/v1`` put some words into params: ``engines`` (aux_layer_ids_differ), ``problems``
(injected_incompatible_with_base) and ``checks`` (base_setting_missing). Removing a params key needs v2
(docs/json-schema.md), so they stay, built from the structured params beside them. The formats word those
findings from the structured params (:mod:`ckptdiff.families.eagle3.messages`), through the two clause builders
here, so each clause is written once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .spec import Setting


def _shape(dims: list[int]) -> str:
    return f"[{', '.join(map(str, dims))}]"


def v1_engines(shift: int) -> str:
    """``engines``: what a difference of aux layer ids B's = A's + ``shift`` (0: not one shift) says."""
    if abs(shift) == 1:
        return (
            f"B's ids are A's {shift:+d}: SGLang and vLLM read these ids off by one from each other, so one of the "
            "two was probably written for the other engine"
        )
    return (
        "the drafters fuse different target layers; SGLang and vLLM also read these ids off by one from each other, "
        "so check which engine each was written for"
    )


def v1_problems(problems: Mapping[str, Any]) -> list[str]:
    """``problems``: why an injected weight does not fit, from ``config_needs`` and ``other_stores``."""
    out = []
    if "config_needs" in problems:
        needs = problems["config_needs"]
        out.append(f"{needs['side']}'s config.json needs {_shape(needs['shape'])} ({needs['because']})")
    if "other_stores" in problems:
        stores = problems["other_stores"]
        out.append(f"{stores['side']} stores its own as {_shape(stores['shape'])}")
    return out


#: ``checks``: the drafter's setting a base setting is checked against, by the base setting's name.
_CHECKS = {
    "vocab_size": "the drafter's {setting}",
    "hidden_size": "the drafter's target hidden size ({setting})",
    "num_hidden_layers": "{setting}",
    "max_position_embeddings": "the drafter's {setting}",
}


def v1_checks(key: str, drafter: Setting) -> str:
    return _CHECKS[key].format(setting=drafter)
