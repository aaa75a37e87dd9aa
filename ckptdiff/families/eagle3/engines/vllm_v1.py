"""vLLM's EAGLE-3 under its V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``, or a feature V2 lacks;
``--vllm-runner v1``): the V2 rules (``vllm.py``) with what V1 does differently, as data.

The drafter is built and loaded by the same model loader; two things differ:

- the aux ids (``v1/worker/gpu_model_runner.py``, ``_get_eagle3_aux_layers_from_config``): the top-level
  ``eagle_aux_hidden_state_layer_ids``, then ``eagle_config["eagle_aux_hidden_state_layer_ids"]`` (SpecForge's key,
  which V2 ignores); never ``eagle_config["layer_ids"]`` (V2's); the class's default when neither is set
  (``_setup_eagle3_aux_hidden_state_outputs``), captured by the same classes;
- the embedding (``v1/spec_decode/llm_base_proposer.py``, ``_maybe_share_embeddings``): a drafter without its own
  shares the target's only when the widths are equal; otherwise it keeps its own, which nothing loads (V2 shares
  it regardless and the first forward fails on the width);
- with ``use_aux_hidden_state`` false, what the drafter's fc gets: V1's proposer calls ``combine_hidden_states``
  whatever was captured, which the MLA drafter applies fc in (``FC_WITHOUT_CAPTURE``); V2's speculator hands the
  last hidden state over without it.
"""

from __future__ import annotations

from dataclasses import replace

from ...rules import Case, Engine, Event, Loader, Param, Source
from . import vllm
from .vllm_common import EMBED, REPO, VERSION
from .vllm_mla import MLA_LOADER

RUNNER = Source(REPO, VERSION, "vllm/v1/worker/gpu_model_runner.py (_get_eagle3_aux_layers_from_config)")
SETUP = Source(REPO, VERSION, "vllm/v1/worker/gpu_model_runner.py (_setup_eagle3_aux_hidden_state_outputs)")
SHARE = Source(REPO, VERSION, "vllm/v1/spec_decode/llm_base_proposer.py (_maybe_share_embeddings)")
#: use_aux_hidden_state false: the runner sets no capture up (and checks no target class).
NO_AUX = Source(
    REPO,
    VERSION,
    "vllm/v1/spec_decode/llm_base_proposer.py:1674 (_get_eagle3_use_aux_hidden_state_from_config), "
    "vllm/v1/worker/gpu_model_runner.py:652 (use_aux_hidden_state_outputs), :5170 (no set-up without it)",
)
KEYS = ("eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids")
#: use_aux_hidden_state false with the MLA drafter: V1's proposer combines whatever the runner captured, and the MLA
#: drafter's combine_hidden_states runs fc unconditionally (its fc is built whatever the flag says): fc, sized for
#: the aux states, gets the target's last hidden state (V2 hands that state over without fc).
FC_WITHOUT_CAPTURE = Case(
    lambda d: not d.use_aux and d.fc_aux != 1,
    Event(
        "error",
        "fc_without_capture",
        "eagle3.vllm.fc_without_capture",
        Source(
            REPO,
            VERSION,
            "vllm/v1/spec_decode/llm_base_proposer.py:549 (combine_hidden_states, whatever was captured), "
            "vllm/model_executor/models/deepseek_eagle3.py:368 (fc applied unconditionally)",
        ),
    ),
)

EMBED_V1 = replace(
    EMBED,
    absent=(
        Case(
            lambda d: d.target_width not in (None, d.hidden),
            Event("warning", "embed_not_shared", "eagle3.vllm.embed_not_shared", SHARE),
        ),
        *EMBED.absent[1:],
    ),
)


def _source(event: Event | None, source: Source) -> Event | None:
    return replace(event, source=source) if event is not None else None


def _param(param: Param) -> Param:
    return EMBED_V1 if param is EMBED else param


def _loader(loader: Loader) -> Loader:
    loader = replace(loader, params=tuple(map(_param, loader.params)))
    if loader.architectures == MLA_LOADER.architectures:
        loader = replace(loader, checks=(*loader.checks, FC_WITHOUT_CAPTURE))
    return loader


def _engine(engine: Engine) -> Engine:
    loaders = tuple(map(_loader, engine.loaders))
    classes = tuple(replace(c, setup=SETUP) for c in engine.aux_ids.classes)
    aux = replace(
        engine.aux_ids,
        keys=KEYS,
        source=RUNNER,
        default_event=replace(engine.aux_ids.default_event, source=RUNNER),
        classes=classes,
        off_without_aux=_source(engine.aux_ids.off_without_aux, NO_AUX),
    )
    runner = Case(lambda d: True, Event("info", "runner_v1", "eagle3.vllm.runner_v1", RUNNER))
    return replace(
        engine,
        version=f"{engine.version}, V1 model runner",
        loaders=loaders,
        aux_ids=aux,
        config_checks=(*engine.config_checks, runner),
    )


ENGINE = _engine(vllm.ENGINE)
