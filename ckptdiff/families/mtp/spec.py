"""An MTP head's settings from config.json and the checkpoint's names: where its layers are, what each holds.

Two layouts exist. DeepSeek-V3 and GLM-4.5 (``deepseek``) append ``num_nextn_predict_layers`` decoder layers after
the ``num_hidden_layers`` main ones, each ``model.layers.{N+i}.`` with ``enorm``, ``hnorm``, ``eh_proj``,
``shared_head.{norm,head}``, often a copy of ``embed_tokens``, and an ordinary decoder block (MLA attention, a
dense or MoE MLP). Qwen3-Next (``mtp``) keeps them under ``mtp.*`` (``mtp.fc``, ``mtp.pre_fc_norm_*``,
``mtp.layers.{i}.*``, ``mtp.norm``). MiMo and ERNIE-4.5 keep them under names of their own, counted from 0
(``detect.INDEXED_LAYOUTS``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...base_layouts import architecture as first_architecture
from .detect import INDEXED_LAYOUTS, MTP_PREFIX_TYPES, nextn_layers, text_settings

Config = Mapping[str, Any]
#: "deepseek", "mtp", or an INDEXED_LAYOUTS name.
Layout = str

#: The tensors of an MTP layer that are not its decoder block (vLLM's ``_rewrite_spec_layer_name`` list).
SPEC_WEIGHTS = ("embed_tokens", "enorm", "hnorm", "eh_proj", "shared_head")
_LAYER = re.compile(
    r"^(?P<prefix>(?:model\.language_model\.|language_model\.model\.|model\.)?layers\.)(?P<index>\d+)\."
)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def split_layer(name: str) -> tuple[str, int, str] | None:
    """``model.layers.61.enorm.weight`` → (``model.layers.``, 61, ``enorm.weight``) (also ``layers.61.``,
    ``model.language_model.layers.61.``); None for a name outside the decoder layers."""
    found = _LAYER.match(name)
    return (found["prefix"], int(found["index"]), name[found.end() :]) if found else None


def layer_index(name: str) -> int | None:
    """``model.layers.61.enorm.weight`` → 61."""
    split = split_layer(name)
    return split[1] if split else None


def is_spec_weight(name: str) -> bool:
    """An MTP layer's own tensor (enorm, hnorm, eh_proj, shared_head, embed_tokens), not its decoder block."""
    return any(f".{weight}." in name for weight in SPEC_WEIGHTS)


@dataclass(frozen=True)
class MtpSpec:
    """What a checkpoint announces and stores of its MTP layers."""

    config: Config
    names: frozenset[str]

    @classmethod
    def of(cls, config: Config, names: Iterable[str]) -> MtpSpec:
        return cls(config, frozenset(names))

    @property
    def text(self) -> Config:
        return text_settings(self.config)

    @property
    def model_type(self) -> str | None:
        value = self.text.get("model_type") or self.config.get("model_type")
        return value if isinstance(value, str) else None

    @property
    def architecture(self) -> str | None:
        return first_architecture(self.config)

    @property
    def layout(self) -> Layout:
        if self.model_type in MTP_PREFIX_TYPES or any(n.startswith("mtp.") for n in self.names):
            return "mtp"
        for name, (_, architectures, _) in INDEXED_LAYOUTS.items():
            if self.architecture in architectures or any(_indexed(name, n) is not None for n in self.names):
                return name
        return "deepseek"

    @property
    def quantization(self) -> Config | None:
        """``quantization_config`` (the text config's, else the top level's) when it is an object."""
        found = self.text.get("quantization_config") or self.config.get("quantization_config")
        return found if isinstance(found, Mapping) else None

    @property
    def hidden_layers(self) -> int | None:
        return _int(self.text.get("num_hidden_layers"))

    @property
    def nextn(self) -> int | None:
        """``num_nextn_predict_layers`` as written (None when absent)."""
        return nextn_layers(self.config)

    @property
    def hidden(self) -> int | None:
        return _int(self.text.get("hidden_size"))

    @property
    def vocab(self) -> int | None:
        return _int(self.text.get("vocab_size"))

    @property
    def q_lora_rank(self) -> int | None:
        return _int(self.text.get("q_lora_rank"))

    @property
    def moe(self) -> bool:
        """Whether an MTP layer's MLP is a mixture of experts (the engines build it so when the config has experts)."""
        return bool(_int(self.text.get("n_routed_experts")) or _int(self.text.get("num_experts")))

    @property
    def experts(self) -> int | None:
        """The routed experts an MTP layer's MoE has (n_routed_experts / num_experts)."""
        return _int(self.text.get("n_routed_experts")) or _int(self.text.get("num_experts"))

    @cached_property
    def stored(self) -> dict[int, tuple[str, ...]]:
        """Layer index → the names stored under it, for every layer that holds an MTP layer's own tensors or lies
        past ``num_hidden_layers`` (``deepseek`` layout)."""
        by_layer: dict[int, list[str]] = {}
        for name in self.names:
            index = layer_index(name)
            if index is not None:
                by_layer.setdefault(index, []).append(name)
        n = self.hidden_layers
        return {
            index: tuple(sorted(held))
            for index, held in sorted(by_layer.items())
            if any(is_spec_weight(name) for name in held) or (n is not None and index >= n)
        }

    @property
    def announced(self) -> tuple[int, ...]:
        """The layer indices the config announces for MTP: N .. N + num_nextn_predict_layers - 1."""
        n, count = self.hidden_layers, self.nextn
        if n is None or not count or count < 0:
            return ()
        return tuple(range(n, n + count))

    @property
    def stored_mtp(self) -> tuple[int, ...]:
        """The layer indices that hold MTP tensors (``deepseek`` layout)."""
        return tuple(self.stored)

    @property
    def mtp_prefix_names(self) -> tuple[str, ...]:
        """The ``mtp.*`` names (Qwen3-Next layout)."""
        return tuple(sorted(name for name in self.names if name.startswith("mtp.")))

    @property
    def indexed_stored(self) -> tuple[int, ...]:
        """The MTP layer indices stored under the names of an indexed layout (MiMo, ERNIE-4.5)."""
        if self.layout not in INDEXED_LAYOUTS:
            return ()
        found = {index for n in self.names for index in [_indexed(self.layout, n)] if index is not None}
        return tuple(sorted(found))


def _indexed(layout: str, name: str) -> int | None:
    """The layer index of ``name`` under one of ``layout``'s prefixes, or None."""
    for prefix in INDEXED_LAYOUTS[layout][0]:
        head = prefix.partition("{i}")[0]  # every prefix ends "{i}."
        if name.startswith(head):
            index, dot, _ = name[len(head) :].partition(".")
            if index.isdigit() and dot:
                return int(index)
    return None
