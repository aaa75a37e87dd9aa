"""Where a base (target) model keeps its text model: config nesting and weight names per role, as data.

A drafter's engine takes frozen weights from the base model (the embedding, sometimes the output head) and
its settings (vocab, hidden size, layer count) from the base's text model. Multimodal bases keep that text
model under a prefix (``language_model.model.embed_tokens.weight``) and its settings under a nested config
(``text_config``). :data:`LAYOUTS` lists the layouts of real published bases; :func:`recognise` picks the one
a base follows, from its config's ``architectures`` first, then from the tensor names it stores. A maintainer
adds a family by adding an entry; no logic changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from .checkpoint import config_at

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .families.model import Profile

Config = Mapping[str, Any]
#: What a tensor is for in the base, whatever the layout names it: "embedding", "lm_head" or "final_norm".
Role = str
ROLES: tuple[Role, ...] = ("embedding", "lm_head", "final_norm")

#: Where a config may nest its text model's settings, tried in this order after a layout's own path.
TEXT_CONFIG_PATHS: tuple[tuple[str, ...], ...] = (
    ("text_config",),
    ("language_config",),
    ("llm_config",),
    ("thinker_config", "text_config"),
    (),  # top level
)


@dataclass(frozen=True)
class BaseLayout:
    """One way real bases store their text model."""

    name: str  # short and stable: "kimi-k2.5", "text-only"
    description: str  # how reports describe it: "multimodal; text model under language_model."
    #: ``architectures[0]`` values that announce this layout (empty: recognised by tensor names only).
    architectures: tuple[str, ...]
    #: Where the text model's settings are in config.json (() = top level); keys missing there are looked
    #: up at the top level too (some multimodal configs keep e.g. tie_word_embeddings only there).
    text_config: tuple[str, ...]
    #: Tensor names per role, most likely first. The first one the base stores is the one used.
    embedding: tuple[str, ...]
    lm_head: tuple[str, ...]
    final_norm: tuple[str, ...]
    #: Whether the head is the embedding when config.json does not say (``tie_word_embeddings``'s default).
    tied_by_default: bool = False
    multimodal: bool = True
    #: Where these facts come from (published repo + file, or an engine's loader).
    source: str = ""

    def names(self, role: Role) -> tuple[str, ...]:
        return {"embedding": self.embedding, "lm_head": self.lm_head, "final_norm": self.final_norm}[role]


class RoleNames(TypedDict):
    """A layout's tensor names per role, as :class:`BaseLayout` takes them."""

    embedding: tuple[str, ...]
    lm_head: tuple[str, ...]
    final_norm: tuple[str, ...]


def _text_model(prefix: str, head: str) -> RoleNames:
    """Role names of a Llama-style text model stored under ``prefix`` with its head at ``head``."""
    return {"embedding": (f"{prefix}embed_tokens.weight",), "lm_head": (head,), "final_norm": (f"{prefix}norm.weight",)}


# transformers >= 4.52 saves multimodal models with the text model under ``model.language_model.`` and the head
# at ``lm_head.weight``; checkpoints published before keep ``language_model.model.`` / ``language_model.lm_head.``.
# Engines load both (vLLM's hf_to_vllm_mapper in vllm/model_executor/models/{qwen2_5_vl,gemma3_mm,mistral3}.py
# maps "model.language_model." -> "language_model.model."), so each multimodal layout lists both spellings.
_LLAVA = _text_model("language_model.model.", "language_model.lm_head.weight")
_HF_452 = _text_model("model.language_model.", "lm_head.weight")


def _both(first: RoleNames, second: RoleNames) -> RoleNames:
    return {
        "embedding": first["embedding"] + second["embedding"],
        "lm_head": first["lm_head"] + second["lm_head"],
        "final_norm": first["final_norm"] + second["final_norm"],
    }


LAYOUTS: tuple[BaseLayout, ...] = (
    BaseLayout(
        name="kimi-k2.5",
        description="multimodal; text model under language_model.",
        architectures=("KimiK25ForConditionalGeneration",),
        text_config=("text_config",),
        **_both(_LLAVA, _HF_452),
        source="moonshotai/Kimi-K2.5 config.json (model_type kimi_k25, text_config = the DeepSeek-V3/Kimi-K2 text "
        "model, vision_config) and model.safetensors.index.json (language_model.model.*, language_model.lm_head, "
        "vision_tower.*, mm_projector.*); loaders: vllm-project/vllm vllm/model_executor/models/kimi_k25.py, "
        "NVIDIA/TensorRT-LLM tests (KIMI_K25_SMALL_CONFIG mirrors the real config.json)",
    ),
    BaseLayout(
        name="llama-4",
        description="multimodal; text model under language_model.",
        architectures=("Llama4ForConditionalGeneration",),
        text_config=("text_config",),
        **_both(_LLAVA, _HF_452),
        source="meta-llama/Llama-4-Scout-17B-16E-Instruct and Llama-4-Maverick-17B-128E-Instruct config.json "
        "(text_config, vision_config) and model.safetensors.index.json (language_model.model.*, "
        "language_model.lm_head.weight, vision_model.*, multi_modal_projector.*); loader: vllm-project/vllm "
        "vllm/model_executor/models/mllama4.py",
    ),
    BaseLayout(
        name="mistral-3",
        description="multimodal; text model under language_model.",
        architectures=("Mistral3ForConditionalGeneration",),
        text_config=("text_config",),
        **_both(_LLAVA, _HF_452),
        source="mistralai/Mistral-Small-3.1-24B-Instruct-2503 config.json (text_config, vision_config) and "
        "model.safetensors.index.json (language_model.model.*, language_model.lm_head.weight, vision_tower.*, "
        "multi_modal_projector.*); loader: vllm-project/vllm vllm/model_executor/models/mistral3.py",
    ),
    BaseLayout(
        name="gemma-3",
        description="multimodal; text model under language_model., head tied to the embedding",
        architectures=("Gemma3ForConditionalGeneration",),
        text_config=("text_config",),
        **_both(_LLAVA, _HF_452),
        tied_by_default=True,
        source="google/gemma-3-4b-it, gemma-3-27b-it config.json (text_config without vocab_size, vision_config) "
        "and model.safetensors.index.json (language_model.model.*, no lm_head: tied; vision_tower.*, "
        "multi_modal_projector.*); loader: vllm-project/vllm vllm/model_executor/models/gemma3_mm.py",
    ),
    BaseLayout(
        name="qwen3-vl",
        description="multimodal; text model under model.language_model.",
        architectures=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
        text_config=("text_config",),
        **_HF_452,
        source="Qwen/Qwen3-VL-8B-Instruct, Qwen3-VL-30B-A3B-Instruct config.json (text_config, vision_config) and "
        "model.safetensors.index.json (model.language_model.*, lm_head.weight, model.visual.*); loader: "
        "vllm-project/vllm vllm/model_executor/models/qwen3_vl.py",
    ),
    BaseLayout(
        name="qwen2.5-vl",
        description="multimodal; text model under model. (vision tower under visual.)",
        architectures=("Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration"),
        text_config=("text_config",),  # older configs keep the text settings at the top level: the fallback
        embedding=("model.embed_tokens.weight", "model.language_model.embed_tokens.weight"),
        lm_head=("lm_head.weight",),
        final_norm=("model.norm.weight", "model.language_model.norm.weight"),
        source="Qwen/Qwen2.5-VL-7B-Instruct config.json (text settings at the top level, vision_config) and "
        "model.safetensors.index.json (model.embed_tokens, lm_head.weight, visual.*); re-saved with transformers "
        ">= 4.52: model.language_model.*, model.visual.*; loader: vllm-project/vllm "
        "vllm/model_executor/models/qwen2_5_vl.py (hf_to_vllm_mapper maps both)",
    ),
    BaseLayout(
        name="qwen2.5-omni",
        description="multimodal; text model under thinker.model.",
        architectures=("Qwen2_5OmniModel", "Qwen2_5OmniForConditionalGeneration"),
        text_config=("thinker_config", "text_config"),
        **_text_model("thinker.model.", "thinker.lm_head.weight"),
        source="Qwen/Qwen2.5-Omni-7B config.json (thinker_config.text_config, talker_config) and "
        "model.safetensors.index.json (thinker.model.*, thinker.lm_head.weight, thinker.visual.*, talker.*); "
        "loader: vllm-project/vllm vllm/model_executor/models/qwen2_5_omni_thinker.py",
    ),
    BaseLayout(
        name="internvl",
        description="multimodal; text model under language_model.",
        architectures=("InternVLChatModel",),
        text_config=("llm_config",),
        embedding=("language_model.model.embed_tokens.weight", "language_model.model.tok_embeddings.weight"),
        lm_head=("language_model.lm_head.weight", "language_model.output.weight"),
        final_norm=("language_model.model.norm.weight",),
        source="OpenGVLab/InternVL3-8B config.json (llm_config, vision_config) and model.safetensors.index.json "
        "(language_model.model.*, language_model.lm_head.weight, vision_model.*, mlp1.*); InternLM2-based "
        "InternVL2.5 names tok_embeddings/output; loader: vllm-project/vllm vllm/model_executor/models/internvl.py",
    ),
    BaseLayout(
        name="deepseek-vl2",
        description="multimodal; text model under language.",
        architectures=("DeepseekVLV2ForCausalLM",),
        text_config=("language_config",),
        **_text_model("language.model.", "language.lm_head.weight"),
        source="deepseek-ai/deepseek-vl2 config.json (language_config, vision_config) and "
        "model.safetensors.index.json (language.model.*, language.lm_head.weight, vision.*); loader: "
        "vllm-project/vllm vllm/model_executor/models/deepseek_vl2.py",
    ),
)

#: Recognised from tensor names alone when ``architectures`` names no layout above, most specific first.
GENERIC_LAYOUTS: tuple[BaseLayout, ...] = (
    BaseLayout(
        name="language_model.model",
        description="multimodal; text model under language_model.",
        architectures=(),
        text_config=(),
        **_LLAVA,
        source="the LLaVA-style layout (transformers < 4.52 multimodal checkpoints)",
    ),
    BaseLayout(
        name="model.language_model",
        description="multimodal; text model under model.language_model.",
        architectures=(),
        text_config=(),
        **_HF_452,
        source="the transformers >= 4.52 multimodal layout",
    ),
    BaseLayout(
        name="text-only",
        description="text-only; text model under model.",
        architectures=(),
        text_config=(),
        **_text_model("model.", "lm_head.weight"),
        multimodal=False,
        source="transformers *ForCausalLM checkpoints (Llama, Qwen, DeepSeek-V3, Kimi-K2: "
        "moonshotai/Kimi-K2-Instruct model.safetensors.index.json)",
    ),
)

TEXT_ONLY = GENERIC_LAYOUTS[-1]


def all_names(role: Role) -> tuple[str, ...]:
    """Every name any layout gives ``role``, without repeats: what to look for before the layout is known."""
    return tuple(dict.fromkeys(name for layout in LAYOUTS + GENERIC_LAYOUTS for name in layout.names(role)))


def wanted_groups(roles: Iterable[Role]) -> tuple[frozenset[str], ...]:
    """For a source reading only some shards: per role, the names any one of which satisfies it."""
    return tuple(frozenset(all_names(role)) for role in dict.fromkeys(roles))


# --- Recognition ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """A base's layout with the names it actually stores, and where its text settings are."""

    layout: BaseLayout
    how: str  # "architectures KimiK25ForConditionalGeneration", "tensor names", ...
    text_config_path: tuple[str, ...]  # where the text settings were found (() = top level)
    embedding: str | None  # the stored name, None when the base stores none of the layout's names
    lm_head: str | None  # the stored head, or the embedding when tied, or None
    lm_head_tied: bool
    final_norm: str | None

    def name(self, role: Role) -> str | None:
        return {"embedding": self.embedding, "lm_head": self.lm_head, "final_norm": self.final_norm}[role]

    @property
    def description(self) -> str:
        return self.layout.description

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.layout.name,
            "description": self.layout.description,
            "multimodal": self.layout.multimodal,
            "recognised_by": self.how,
            "text_config": list(self.text_config_path),
            "embedding": self.embedding,
            "lm_head": self.lm_head,
            "lm_head_tied": self.lm_head_tied,
            "final_norm": self.final_norm,
        }


def architecture(config: Config | None) -> str | None:
    architectures = config.get("architectures") if config else None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def _by_architecture(config: Config | None) -> BaseLayout | None:
    arch = architecture(config)
    return next((layout for layout in LAYOUTS if arch in layout.architectures), None) if arch else None


def _first_stored(names: Sequence[str], stored: Set[str]) -> str | None:
    return next((name for name in names if name in stored), None)


def recognise(config: Config | None, names: Iterable[str]) -> Resolved:
    """The layout a base follows, from its config.json's ``architectures``, else from the tensor names it stores
    (``names``: those read, which for ``--base`` is one shard or the few the index points at)."""
    stored = names if isinstance(names, Set) else frozenset(names)
    layout = _by_architecture(config)
    how = f"architectures {architecture(config)}" if layout else ""
    if layout is None:
        # by the embedding (or final norm): a bare lm_head.weight is shared by several layouts
        generic = [g for g in GENERIC_LAYOUTS if _first_stored(g.embedding + g.final_norm, stored)]
        layout, how = (generic[0], "tensor names") if generic else (TEXT_ONLY, "default")
        if layout is TEXT_ONLY and how == "default" and config and _nested_text_config(config):
            how = "default (config.json nests a text config, but no known tensor names were read)"
    path = text_config_path(config, layout)
    embedding = _first_stored(layout.embedding, stored)
    head = _first_stored(layout.lm_head, stored)
    tied = head is None and embedding is not None and is_tied(config, layout)
    return Resolved(
        layout=layout,
        how=how,
        text_config_path=path,
        embedding=embedding,
        lm_head=embedding if tied else head,
        lm_head_tied=tied,
        final_norm=_first_stored(layout.final_norm, stored),
    )


def _nested_text_config(config: Config) -> tuple[str, ...] | None:
    for path in TEXT_CONFIG_PATHS[:-1]:
        if isinstance(config_at(config, path), Mapping):
            return path
    return None


def text_config_path(config: Config | None, layout: BaseLayout | None = None) -> tuple[str, ...]:
    """Where ``config`` keeps its text model's settings: the layout's path if present, else the first nested
    text config found, else the top level."""
    if not config:
        return ()
    if layout is not None and layout.text_config and isinstance(config_at(config, layout.text_config), Mapping):
        return layout.text_config
    return _nested_text_config(config) or ()


def text_config(base_config: Config | None, layout: BaseLayout | None = None) -> Config:
    """The base's text-model settings (``text_config`` etc., or the top level), for callers such as engines."""
    if not base_config:
        return {}
    held = config_at(base_config, text_config_path(base_config, layout or _by_architecture(base_config)))
    return held if isinstance(held, Mapping) else base_config


@dataclass(frozen=True)
class Found:
    """A base setting and the dotted key it came from."""

    value: Any
    key: str


def lookup(config: Config | None, key: str, path: tuple[str, ...]) -> tuple[Found | None, tuple[str, ...]]:
    """``key`` under ``path``, then at the top level: the value found (not null) and every key looked at."""
    looked: list[str] = []
    for where in dict.fromkeys([path, ()]):
        dotted = ".".join((*where, key))
        looked.append(dotted)
        holder = config_at(config, where) if config else None
        if isinstance(holder, Mapping) and holder.get(key) is not None:
            return Found(holder[key], dotted), tuple(looked)
    return None, tuple(looked)


def is_tied(config: Config | None, layout: BaseLayout) -> bool:
    """Whether the base's head is its embedding: ``tie_word_embeddings`` under the text config, then at the top
    level (a top-level false wins: multimodal configs set it there while the nested one keeps the default)."""
    top = config.get("tie_word_embeddings") if config else None
    if isinstance(top, bool):
        return top
    found, _ = lookup(config, "tie_word_embeddings", text_config_path(config, layout))
    return found.value is True if found is not None else layout.tied_by_default


# --- Pairing a drafter's injected weights with the base's ---------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """One side's stored tensor that must equal a base tensor (``--values --base``)."""

    side: str  # "A" or "B"
    own: str  # the side's own stored name
    base: str  # the base's stored name
    role: Role


def pair_injected(
    side: str,
    stored: Mapping[str, str],
    roles: Mapping[str, Role],
    resolved: Resolved,
) -> tuple[list[Pair], list[dict[str, Any]]]:
    """Which of a side's tensors pair with which base tensor, and why a role could not be paired (the params of
    a ``base_pair_unavailable`` finding).

    ``stored`` maps the side's canonical names to its own stored names; ``roles`` maps canonical names of the
    weights the engine takes from the base (embed_tokens, and lm_head when taken from the base) to their role.
    A role the side does not carry needs no pair (the engine supplies it); one the base has no tensor for is
    reported.
    """
    pairs: list[Pair] = []
    unpaired: list[dict[str, Any]] = []
    for canonical, role in roles.items():
        own = stored.get(canonical)
        if own is None:
            continue
        base_name = resolved.name(role)
        if base_name is None:
            looked = list(resolved.layout.names(role))
            why = {"reason": "not_in_base", "layout": resolved.layout.name, "role": role, "looked_for": looked}
            unpaired.append({"side": side, "tensor": own, **why})
            continue
        pairs.append(Pair(side, own, base_name, role))
    return pairs, unpaired


#: Without a profile: the names a side may store its embedding under.
_PLAIN_ROLES: dict[str, Role] = {"embed_tokens.weight": "embedding", "model.embed_tokens.weight": "embedding"}


def value_pairs(
    profile: Profile | None, a: Checkpoint, b: Checkpoint, base: Checkpoint
) -> tuple[list[Pair], list[dict[str, Any]]]:
    """For ``--values --base``: each side's stored tensors that must equal the base's (embed_tokens; lm_head when
    the engine takes it from the base), under each side's own naming and the base's recognised layout; and, as
    params, each role a side carries that cannot be paired (no such tensor in the base, or another shape)."""
    resolved = recognise(base.config, base.tensors.keys())
    pairs: list[Pair] = []
    unpaired: list[dict[str, Any]] = []
    for label, side in (("A", a), ("B", b)):
        if profile is not None:
            roles: dict[str, Role] = {w.name: w.role for w in profile.injected_weights(side.config)}
            stored = {profile.canonical_name(name): name for name in side.tensors}
        else:
            roles, stored = _PLAIN_ROLES, {name: name for name in side.tensors}
        found, missing = pair_injected(label, stored, roles, resolved)
        unpaired += missing
        for pair in found:
            own, theirs = side.tensors[pair.own], base.tensors[pair.base]
            if own.shape != theirs.shape:
                shapes = {"shape": list(own.shape), "base_name": pair.base, "base_shape": list(theirs.shape)}
                unpaired.append({"side": label, "tensor": pair.own, "reason": "shapes_differ", **shapes})
            else:
                pairs.append(pair)
    return pairs, unpaired
