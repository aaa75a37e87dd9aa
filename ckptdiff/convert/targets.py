"""What each engine's EAGLE-3 loader reads, as the layout convert writes for it: class names, tensor names, where
the aux-layer ids go and in which convention, the d2t dtypes it takes.

Facts come from the engines' rule tables (:mod:`ckptdiff.families.eagle3.engines`), which cite the loaders'
files; this module only chooses, among the spellings a loader accepts, the one convert writes (the engine's own):
SGLang's is
SpecForge's (``midlayer.*``), vLLM's is its speculators layout (``layers.{i}.*``), TensorRT-LLM's keeps
``midlayer.*`` and lets its loader add ``model.``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Attention kinds and layer flavours a drafter's decoder layers come in.
LLAMA, QWEN3, MLA = "llama", "qwen3", "mla"


@dataclass(frozen=True)
class AuxConvention:
    """Where an engine reads a drafter's aux-layer ids, and what an id means: id k captures the output of target
    layer ``k + offset``."""

    key: str  # dotted config key written
    offset: int


@dataclass(frozen=True)
class TargetLayout:
    """The checkpoint convert writes for one engine."""

    engine: str
    label: str
    #: Layer kind → the class written to ``architectures`` (a kind missing: the engine has no EAGLE-3 class
    #: for it, and the plan fails naming the engine's registry).
    architectures: dict[str, str]
    #: Layer kind → the model_type written (None: kept).
    model_types: dict[str, str]
    #: How decoder layer i is named: one layer, several layers.
    single_layer: str
    multi_layer: str
    aux: AuxConvention | None  # None: not read from the drafter's config (a serving setting)
    #: dtypes the engine takes d2t in as they are; another is cast to ``d2t_cast``.
    d2t_dtypes: tuple[str, ...]
    d2t_cast: str
    #: Whether an engine has run this layout's loader here (the oracle job); else its proof is ckptdiff's alone.
    engine_proven: bool
    #: Config keys of other engines' conventions that this layout removes (they would be read wrongly).
    foreign_aux_keys: tuple[str, ...] = ()
    #: Where the engine registers its EAGLE-3 classes (for the message when a kind has none).
    registry: str = ""

    def layer_prefix(self, index: int, layers: int) -> str:
        template = self.single_layer if layers == 1 else self.multi_layer
        return template.format(i=index)


SGLANG = TargetLayout(
    engine="sglang",
    label="SGLang",
    architectures={LLAMA: "LlamaForCausalLMEagle3", MLA: "Eagle3DeepseekV2ForCausalLM"},
    model_types={LLAMA: "llama", MLA: "deepseek_v2"},
    single_layer="midlayer.",
    multi_layer="layers.{i}.",
    aux=AuxConvention("eagle_config.eagle_aux_hidden_state_layer_ids", 0),
    d2t_dtypes=("I64", "I32", "I16", "I8", "U8", "U16", "U32"),
    d2t_cast="I64",
    engine_proven=True,
    foreign_aux_keys=("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids"),
    registry="sgl-project/sglang@v0.5.23 python/sglang/srt/models/registry.py (EAGLE-3: llama_eagle3.py, "
    "kimi_k25_eagle3.py)",
)
VLLM = TargetLayout(
    engine="vllm",
    label="vLLM",
    architectures={
        LLAMA: "Eagle3LlamaForCausalLM",
        QWEN3: "Eagle3Qwen3ForCausalLM",
        MLA: "Eagle3DeepseekV2ForCausalLM",
    },
    model_types={LLAMA: "llama", QWEN3: "qwen3", MLA: "deepseek_v2"},
    single_layer="layers.{i}.",
    multi_layer="layers.{i}.",
    # the V2 model runner (vLLM 0.33.0's default for EAGLE-3) reads the top-level ids, id j = output of layer j-1
    aux=AuxConvention("eagle_aux_hidden_state_layer_ids", -1),
    d2t_dtypes=("I64", "I32", "I16", "U8", "U16", "U32", "I8"),
    d2t_cast="I64",
    engine_proven=True,
    foreign_aux_keys=("eagle_config.layer_ids",),
    registry="vllm-project/vllm@v0.33.0 vllm/model_executor/models/registry.py",
)
TRTLLM = TargetLayout(
    engine="trtllm",
    label="TensorRT-LLM",
    architectures={LLAMA: "LlamaForCausalLMEagle3"},
    model_types={LLAMA: "llama"},
    single_layer="midlayer.",
    multi_layer="midlayer.{i}.",
    aux=None,  # EagleDecodingConfig.eagle3_layers_to_capture, a serving setting
    d2t_dtypes=("I64", "I32"),
    d2t_cast="I64",
    engine_proven=False,
    registry="NVIDIA/TensorRT-LLM@b35ac1b tensorrt_llm/_torch/models/modeling_auto.py",
)
TARGETS: dict[str, TargetLayout] = {layout.engine: layout for layout in (SGLANG, VLLM, TRTLLM)}

#: Where a source's aux ids may be, and the convention each location is written in (the engine that reads it
#: there): SpecForge and SGLang's eagle_config ids are outputs; vLLM's top-level and layer_ids are output + 1.
SOURCE_AUX_CONVENTIONS: tuple[AuxConvention, ...] = (
    AuxConvention("eagle_config.eagle_aux_hidden_state_layer_ids", 0),
    AuxConvention("eagle_aux_hidden_state_layer_ids", -1),
    AuxConvention("eagle_config.layer_ids", -1),
)


# --- names ----------------------------------------------------------------------------------------------------

#: A stored name's decoder layer: ``midlayer.``, ``midlayer.{i}.``, ``layers.{i}.``, after an optional ``model.``.
_LAYER = re.compile(r"^(?:model\.)?(?:midlayer\.(?:(?P<mid>\d+)\.)?|layers\.(?P<index>\d+)\.)(?P<rest>.+)$")
#: Legacy and in-memory names of top-level tensors → the stored canonical name.
_TOP_ALIASES = {
    "draft_id_to_target_id": "d2t",
    "aux_norm_low.weight": "fc_norm.0.weight",
    "aux_norm_mid.weight": "fc_norm.1.weight",
    "aux_norm_high.weight": "fc_norm.2.weight",
}


@dataclass(frozen=True)
class ParsedName:
    """A drafter tensor name taken apart: its decoder layer (None: a top-level tensor) and the rest."""

    layer: int | None
    rest: str


def parse_name(name: str) -> ParsedName:
    """Any convention's drafter name → (layer, rest): ``model.layers.0.mlp.up_proj.weight`` → (0,
    ``mlp.up_proj.weight``); ``model.fc.weight`` → (None, ``fc.weight``)."""
    found = _LAYER.match(name)
    if found is not None:
        index = found["mid"] or found["index"] or "0"
        return ParsedName(int(index), found["rest"])
    rest = name[len("model.") :] if name.startswith("model.") else name
    return ParsedName(None, _TOP_ALIASES.get(rest, rest))


def output_name(parsed: ParsedName, layout: TargetLayout, layers: int) -> str:
    """The name ``layout`` stores this tensor under."""
    if parsed.layer is None:
        return parsed.rest
    return layout.layer_prefix(parsed.layer, layers) + parsed.rest
