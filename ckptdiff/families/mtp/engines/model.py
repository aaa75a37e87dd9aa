"""The vocabulary MTP load rules are written in: which class an engine builds from a checkpoint's MTP layers,
which layers it reads, how it names their parameters, and what it says when something is missing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...rules import Event, Source
from ..spec import MtpSpec


@dataclass(frozen=True)
class MtpClass:
    """A drafter class the engine builds from MTP layers: for these draft model_types or architectures[0]."""

    name: str
    source: Source
    model_types: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    #: The checkpoint layout its loader reads ("deepseek": model.layers.{N+i}; "mtp": mtp.*).
    layout: str = "deepseek"

    def serves(self, spec: MtpSpec) -> bool:
        return spec.model_type in self.model_types or spec.architecture in self.architectures


@dataclass(frozen=True)
class Fused:
    """A checkpoint name piece the loader stacks into a fused parameter (``gate_proj`` → ``gate_up_proj[0]``)."""

    piece: str
    param: str
    shard: str


@dataclass(frozen=True)
class MtpEngine:
    """One engine's MTP loading, as data; :mod:`.replay` replays it."""

    name: str
    label: str
    classes: tuple[MtpClass, ...]
    #: Where the engine maps a target's model type to its MTP class (cited when it has none for this one).
    registry: Source
    no_class: Event  # {model_type}, {architecture}, {registered}
    #: No num_nextn_predict_layers in the config.
    nextn_absent: Event
    #: num_nextn_predict_layers values the class accepts (None: any > 0); else ``nextn_refused`` ({nextn}).
    nextn_allowed: tuple[int, ...] | None
    nextn_refused: Event | None
    #: The checkpoint layer indices it reads, from the spec (DeepSeek layout).
    layer_ids: Callable[[MtpSpec], tuple[int, ...]]
    #: Name prefixes of a read layer, ``{layer}`` filled in (a name must start with one of them).
    prefixes: tuple[str, ...]
    #: Pieces of a read layer's names it skips because it takes them from the target (SGLang: embed, head).
    from_target: tuple[str, ...]
    from_target_event: Event
    #: Whether it builds and loads its own embedding (vLLM) rather than sharing the target's.
    own_embedding: bool
    #: Whether it builds its own head from ``shared_head.head`` (vLLM) rather than the target's lm_head.
    own_head: bool
    #: (layer, rest of the name after the layer prefix) → the parameter it fills.
    spec_param: Callable[[int, str], str]
    block_param: Callable[[int, str], str]
    fused: tuple[Fused, ...]
    #: A read layer that no tensor fills ({layer}).
    layer_missing: Event
    #: A parameter that no tensor fills ({param}).
    param_missing: Event
    #: Tensors outside the layers it reads, skipped ({count}, {pattern}).
    outside: Event
    #: A name inside a read layer that has no parameter ({name}, {candidate}).
    unknown: Event
    shape_error: Event  # {name}, {param}, {got}, {want}
