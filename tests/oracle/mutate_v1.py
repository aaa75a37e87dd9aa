"""vLLM's V1 model runner's mutations (mutate.py runs them with the others): one plausible mistake each in the V1
rules (ckptdiff/families/eagle3/engines/vllm_v1.py, and the rules it shares with V2 where they decide a V1
verdict; and the rule V1's oracle found, use_aux_hidden_state false, under SGLang), judged
against the V1 runner's cached results (the ``vllm_v1`` variant, worker_v1_vllm.py)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any


def _v1() -> Any:
    return importlib.import_module("ckptdiff.families.eagle3.engines.vllm_v1")


def _change_aux(**fields: Any) -> None:
    module = _v1()
    module.ENGINE = dataclasses.replace(module.ENGINE, aux_ids=dataclasses.replace(module.ENGINE.aux_ids, **fields))


def _reads_layer_ids() -> None:
    _change_aux(keys=("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids"))


def _top_level_only() -> None:
    _change_aux(keys=("eagle_aux_hidden_state_layer_ids",))


def _nested_first() -> None:
    _change_aux(keys=("eagle_config.eagle_aux_hidden_state_layer_ids", "eagle_aux_hidden_state_layer_ids"))


def _captures_without_aux() -> None:
    _change_aux(off_without_aux=None)


def _shares_embedding_regardless() -> None:
    """V1's embedding rule replaced by V2's (shared whatever the width)."""
    module = _v1()
    vllm = importlib.import_module("ckptdiff.families.eagle3.engines.vllm")
    loaders = tuple(
        dataclasses.replace(lo, params=tuple(vllm.EMBED if p is module.EMBED_V1 else p for p in lo.params))
        for lo in module.ENGINE.loaders
    )
    module.ENGINE = dataclasses.replace(module.ENGINE, loaders=loaders)


def _engine_captures_without_aux(name: str) -> Callable[[], None]:
    """An engine's default rules set the capture up with use_aux_hidden_state false (SGLang's: its worker calls
    configure_aux_hidden_state_capture with the flag; vLLM V2's rule: mutate_v2.py, judged on the vllm_v2
    variant, whose worker runs the V2 runner's own load_model)."""

    def change() -> None:
        module = importlib.import_module(f"ckptdiff.families.eagle3.engines.{name}")
        aux = dataclasses.replace(module.ENGINE.aux_ids, off_without_aux=None)
        module.ENGINE = dataclasses.replace(module.ENGINE, aux_ids=aux)

    return change


def _mla_fc_skipped_without_capture() -> None:
    """V1 read as V2: with use_aux_hidden_state false the MLA drafter's fc is never run."""
    module = _v1()
    loaders = tuple(
        dataclasses.replace(lo, checks=tuple(c for c in lo.checks if c is not module.FC_WITHOUT_CAPTURE))
        for lo in module.ENGINE.loaders
    )
    module.ENGINE = dataclasses.replace(module.ENGINE, loaders=loaders)


def _default_capture_as_v2_keys() -> None:
    """The V1 engine is V2's (the runner setting ignored)."""
    module = _v1()
    module.ENGINE = importlib.import_module("ckptdiff.families.eagle3.engines.vllm").ENGINE


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "vllm_v1.aux_ids.keys.no_layer_ids": (
        "vLLM's V1 runner also reads eagle_config.layer_ids (as V2 does)",
        _reads_layer_ids,
    ),
    "vllm_v1.aux_ids.keys.nested": ("vLLM's V1 runner reads only the top-level ids", _top_level_only),
    "vllm_v1.aux_ids.keys.top_level_first": (
        "vLLM's V1 runner reads eagle_config's ids before the top-level ones",
        _nested_first,
    ),
    "vllm_v1.aux_ids.off_without_aux": (
        "vLLM's V1 runner sets the capture up (and checks the target's class) with use_aux_hidden_state false",
        _captures_without_aux,
    ),
    "vllm_v1.embed.width_checked": (
        "vLLM's V1 runner shares the target's embedding whatever its width",
        _shares_embedding_regardless,
    ),
    "sglang.aux_ids.off_without_aux": (
        "SGLang sets the capture up (and checks the target's class) with use_aux_hidden_state false",
        _engine_captures_without_aux("sglang"),
    ),
    "vllm_v1.runner.setting_read": ("--vllm-runner v1 replays the V2 runner's rules", _default_capture_as_v2_keys),
    "vllm_v1.mla.fc_without_capture": (
        "vLLM's V1 runner never runs the MLA drafter's fc when use_aux_hidden_state is false (as V2)",
        _mla_fc_skipped_without_capture,
    ),
}


def _dflash_v1_runner_ignored() -> None:
    """DFlash's rules judge the V2 runner's capture whatever --vllm-runner says."""
    module = importlib.import_module("ckptdiff.families.dflash.engines.vllm")
    module.ENGINE = dataclasses.replace(module.ENGINE, v1_ids=None)


def _dflash_v1_keeps_dflash_ids_beside_eagle_config() -> None:
    """The V1 runner read as keeping the DFlash ids when an eagle_config section has none of its own."""
    module = importlib.import_module("ckptdiff.families.dflash.engines.vllm")
    original = module.ENGINE.v1_ids

    def v1_ids(config: Any) -> Any:
        eagle = config.get("eagle_config")
        if isinstance(eagle, dict) and not eagle.get("eagle_aux_hidden_state_layer_ids"):
            config = {k: v for k, v in config.items() if k != "eagle_config"}
        return original(config)

    module.ENGINE = dataclasses.replace(module.ENGINE, v1_ids=v1_ids)


#: DFlash under the V1 runner (judged on v1_dflash.py's cases by mutate.py).
V1_DFLASH_MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "dflash.vllm_v1.capture.runner_read": (
        "DFlash under --vllm-runner v1 is judged at the V2 runner's capture",
        _dflash_v1_runner_ignored,
    ),
    "dflash.vllm_v1.capture.empty_eagle_config": (
        "the V1 runner keeps the DFlash ids when an eagle_config section has no ids of its own",
        _dflash_v1_keeps_dflash_ids_beside_eagle_config,
    ),
}
