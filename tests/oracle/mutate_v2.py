"""The mutations of whether the target captures at all (mutate.py runs them with the others): one plausible mistake
each in vLLM's V2 rule (ckptdiff/families/eagle3/engines/vllm.py ``AuxIds.off_without_aux``) and in how the
drafter's ``use_aux_hidden_state`` is read (ckptdiff/families/eagle3/spec.py ``_use_aux``), judged against the V2
runner's cached results (the ``vllm_v2`` variant, worker_v2_vllm.py), and V1's and the engines' where they reach."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any


def _v2_captures_without_aux() -> None:
    """vLLM's V2 rule sets the capture up (and checks the target's class) whatever use_aux_hidden_state says. V1's
    rules, built from V2's when vllm_v1 is imported, are built first: they keep theirs (only V2 is mutated)."""
    importlib.import_module("ckptdiff.families.eagle3.engines.vllm_v1")
    module = importlib.import_module("ckptdiff.families.eagle3.engines.vllm")
    aux = dataclasses.replace(module.ENGINE.aux_ids, off_without_aux=None)
    module.ENGINE = dataclasses.replace(module.ENGINE, aux_ids=aux)


def _reading(read: Callable[[Mapping[str, Any], bool], bool]) -> Callable[[], None]:
    def change() -> None:
        module = importlib.import_module("ckptdiff.families.eagle3.spec")
        module._use_aux = read

    return change


def _false_only(config: Mapping[str, Any], speculators: bool) -> bool:
    """Only the value false turns the capture off (null and 0 read as absent)."""
    eagle = config.get("eagle_config")
    return not (isinstance(eagle, Mapping) and eagle.get("use_aux_hidden_state") is False)


def _speculators_top_level(config: Mapping[str, Any], speculators: bool) -> bool:
    """A speculators config's top-level eagle_config is read, as for a plain config."""
    eagle = config.get("eagle_config")
    if not isinstance(eagle, Mapping) or "use_aux_hidden_state" not in eagle:
        return True
    return bool(eagle["use_aux_hidden_state"])


def _top_level_key_too(config: Mapping[str, Any], speculators: bool) -> bool:
    """A top-level use_aux_hidden_state counts where eagle_config has none (DFlash's reading, not EAGLE-3's)."""
    holder = config.get("transformer_layer_config") if speculators else config
    holder = holder if isinstance(holder, Mapping) else {}
    eagle = holder.get("eagle_config")
    eagle = eagle if isinstance(eagle, Mapping) else {}
    return bool(eagle.get("use_aux_hidden_state", holder.get("use_aux_hidden_state", True)))


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "vllm.aux_ids.off_without_aux": (
        "vLLM's V2 runner sets the capture up (and checks the target's class) with use_aux_hidden_state false",
        _v2_captures_without_aux,
    ),
    "eagle3.use_aux.false_only": (
        "use_aux_hidden_state turns the capture off only when it is false (null and 0 read as true)",
        _reading(_false_only),
    ),
    "eagle3.use_aux.speculators_top_level": (
        "a speculators config's top-level eagle_config.use_aux_hidden_state is read (vLLM reads "
        "transformer_layer_config's)",
        _reading(_speculators_top_level),
    ),
    "eagle3.use_aux.top_level_key": (
        "a top-level use_aux_hidden_state turns the capture off where eagle_config has none",
        _reading(_top_level_key_too),
    ),
}
