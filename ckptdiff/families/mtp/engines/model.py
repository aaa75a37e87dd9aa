"""The vocabulary MTP load rules are written in: which class an engine builds from a checkpoint's MTP layers,
which layers it reads, how it names their parameters, and what it says when something is missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...rules import Event, Source
from ..spec import MtpSpec
from .prefix import PrefixLoad


@dataclass(frozen=True)
class Fp8Load:
    """How a class builds and loads its MTP layer under an FP8 ``quantization_config``: which of the block's
    weights are built quantized and the scale parameters each gets, which linears stay plain whatever the config
    (their scales have no parameter), and whose loaders refuse a tensor of a wider type than the parameter."""

    source: Source
    #: Whether the checkpoint's quantization_config selects this scheme.
    applies: Callable[[Mapping[str, Any]], bool]
    #: The parameters a quantized weight gets beside it (``weight_scale_inv``; ``weight_scale``, ``input_scale``),
    #: from the quantization_config.
    scales: Callable[[Mapping[str, Any]], tuple[str, ...]]
    #: Whether a block weight (its name after the layer prefix) is built quantized.
    quantized: Callable[[str], bool]
    #: The dtype (safetensors name) of a quantized weight and of its scales.
    weight_dtype: str
    scale_dtype: str
    #: Spec linears built plain (``eh_proj``: nn.Linear): an FP8 weight is copied in unscaled, its scales skipped.
    plain: tuple[str, ...]
    plain_unscaled: Event  # {name}, {dtype}, {scales}
    #: Pieces of block names whose parameters' loader checks the dtype; ``refuses(tensor dtype, parameter
    #: dtype)``: whether that check raises.
    checked: tuple[str, ...]
    refuses: Callable[[str, str], bool]
    dtype_refused: Event  # {name}, {param}, {got}, {want}
    #: A scale parameter no tensor fills ({param}).
    scale_missing: Event


@dataclass(frozen=True)
class MtpClass:
    """A drafter class the engine builds from MTP layers: for these draft model_types or architectures[0]."""

    name: str
    source: Source
    model_types: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    #: The checkpoint layout its loader reads ("deepseek": model.layers.{N+i}; "mtp": mtp.*; an indexed layout of
    #: ``detect.INDEXED_LAYOUTS``: "mimo", "ernie"; "other": a class not modelled, its layout not described).
    layout: str = "deepseek"
    #: Whether its loader also takes the top-level ``lm_head.weight`` as the first MTP layer's shared_head.head
    #: (vLLM's Glm4MoeMTP).
    loads_top_head: bool = False
    #: Raised at construction when no MTP layer it builds is a MoE layer (vLLM's Glm4MoeMTP), else None.
    needs_moe: Event | None = None
    #: Whether its loader skips a stacked piece whose fused parameter it lacks (SGLang's GLM NextN), rather than
    #: the engine's ``stacked_unknown``.
    skips_stacked_unknown: bool = False
    #: How it loads the ``mtp.*`` layout (layout "mtp"); None for the DeepSeek layout.
    prefix: PrefixLoad | None = None
    #: How it builds and loads an FP8-quantized MTP layer (None: not modelled; scales are then taken as they come).
    fp8: Fp8Load | None = None
    #: The engine builds this class, but ckptdiff has no rules for its loader: the replay says so ({cls}) and stops,
    #: so the gate fails rather than guess (None: its loader is modelled).
    not_modelled: Event | None = None
    #: Pieces of a model_type it is chosen for wherever they occur in it (vLLM's ``"exaone4_5" in model_type``).
    model_type_pieces: tuple[str, ...] = ()
    #: A further condition on the config for it to be chosen (vLLM's Parse 3.5: ``decoder.causal_vision_prefix``;
    #: its Transformers-backend MTP: ``num_mtp_layers`` in the text config). None: none.
    when: Callable[[Mapping[str, Any]], bool] | None = None

    def serves(self, spec: MtpSpec) -> bool:
        """Chosen by the text config's model_type or the top level's (the engine reads the one its rule names), any
        of the pieces in either, or architectures[0] (and ``when``, if any, holds)."""
        top = spec.config.get("model_type")
        types = {t for t in (spec.model_type, top if isinstance(top, str) else None) if t}
        if self.when is not None and not self.when(spec.config):
            return False
        return (
            bool(types & set(self.model_types))
            or any(piece in t for piece in self.model_type_pieces for t in types)
            or spec.architecture in self.architectures
        )


def dsa(config: Mapping[str, Any]) -> bool:
    """DeepSeek's sparse attention (DSA): ``index_topk`` set (in the text config or at the top), which makes both
    engines build the lightning indexer in each MTP layer (vLLM ``is_v32``, SGLang ``is_deepseek_dsa``)."""
    text = config.get("text_config")
    return any(h.get("index_topk") is not None for h in (text if isinstance(text, Mapping) else {}, config))


def unmodelled(
    engine: str,
    name: str,
    source: Source,
    *,
    model_types: tuple[str, ...] = (),
    architectures: tuple[str, ...] = (),
    layout: str = "deepseek",
    model_type_pieces: tuple[str, ...] = (),
    when: Callable[[Mapping[str, Any]], bool] | None = None,
) -> MtpClass:
    """A class ``engine`` builds whose loader ckptdiff does not replay: its verdict cites the class's own source."""
    event = Event("error", "mtp_not_modelled", f"mtp.{engine}.mtp_not_modelled", source)
    return MtpClass(
        name,
        source,
        model_types,
        architectures,
        layout=layout,
        not_modelled=event,
        model_type_pieces=model_type_pieces,
        when=when,
    )


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
    #: The checkpoint layer indices it reads, from the checkpoint's spec and (a standalone export served beside a
    #: target) the target's spec (DeepSeek layout).
    layer_ids: Callable[[MtpSpec, MtpSpec | None], tuple[int, ...]]
    #: Name prefixes of a read layer, ``{layer}`` filled in (a name must start with one of them).
    prefixes: tuple[str, ...]
    #: Pieces of a read layer's names it skips because it takes them from the target (SGLang: embed, head).
    from_target: tuple[str, ...]
    from_target_event: Event
    #: The parameters (``{layer}`` filled in) the drafter's set-up replaces by the target's after loading.
    taken: tuple[str, ...]
    #: Whether it loads the top-level ``model.embed_tokens.weight`` into its embedding (vLLM) before that.
    loads_top_embedding: bool
    #: (layer, rest of the name after the layer prefix) → the parameter it fills.
    spec_param: Callable[[int, str], str]
    block_param: Callable[[int, str], str]
    fused: tuple[Fused, ...]
    #: Fused parameters written only once every piece is there (SGLang concatenates q_a and kv_a): otherwise none.
    joined: tuple[str, ...]
    #: The routed experts' fused parameters, after the MLP's prefix (``experts.w13_weight``).
    experts: str
    #: Whether layer ``index``'s MLP is a mixture of experts (vLLM: as the target's layers; SGLang: always).
    moe_layer: Callable[[MtpSpec, int], bool]
    #: A routed expert past n_routed_experts ({name}, {experts}).
    extra_expert: Event
    #: A stacked piece (gate_proj, q_a_proj) whose fused parameter the layer does not have ({name}, {candidate}).
    stacked_unknown: Event
    #: Of the parameters no tensor fills, those the loader's strict check names (else ``param_missing_exempt``).
    strict: Callable[[str], bool]
    param_missing_exempt: Event
    #: A stored MTP layer it does not read ({layer}, {layers}).
    unread_layer: Event
    #: A read layer that no tensor fills ({layer}).
    layer_missing: Event
    #: A parameter that no tensor fills ({param}).
    param_missing: Event
    #: Tensors outside the layers it reads, skipped ({count}, {pattern}).
    outside: Event
    #: A name inside a read layer that has no parameter ({name}, {candidate}).
    unknown: Event
    shape_error: Event  # {name}, {param}, {got}, {want}
    #: Whether a config no class's rule serves is looked up by its own architectures[0] among the classes (vLLM: a
    #: standalone export whose type ``hf_config_override`` leaves keeps its architecture, which the registry
    #: resolves; ``Glm4MoeMTPModel`` is that class).
    by_own_name: bool = False

    def choose(self, spec: MtpSpec) -> MtpClass | None:
        """The class the engine builds for ``spec``: the first whose rule serves it, else (``by_own_name``) the one
        its architecture names."""
        found = next((c for c in self.classes if c.serves(spec)), None)
        if found is None and self.by_own_name:
            found = next((c for c in self.classes if c.name == spec.architecture), None)
        return found
