"""A drafter's settings as an engine reads them from its config.json, plus the target's from ``--base``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .rules import AuxIds
from .target import text_config


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def lookup(config: Mapping[str, Any], dotted: str) -> Any:
    """A dotted key ("eagle_config.eagle_aux_hidden_state_layer_ids") in a config, or None."""
    holder: Any = config
    for part in dotted.split("."):
        if not isinstance(holder, Mapping):
            return None
        holder = holder.get(part)
    return holder


@dataclass(frozen=True)
class Target:
    """What the engines read from the target (base) model's text config."""

    layers: int | None
    hidden: int | None
    vocab: int | None
    model_type: str | None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Target:
        text = text_config(config)
        model_type = text.get("model_type") or config.get("model_type")
        return cls(
            _int(text.get("num_hidden_layers")),
            _int(text.get("hidden_size")),
            _int(text.get("vocab_size")),
            model_type if isinstance(model_type, str) else None,
        )


@dataclass(frozen=True)
class Draft:
    """The settings a drafter class builds itself from (HF config attributes are top-level keys)."""

    config: Mapping[str, Any]
    names: frozenset[str]  # the checkpoint's tensor names
    hidden: int
    target_hidden: int  # target_hidden_size, else hidden_size
    target_hidden_set: bool
    vocab: int | None
    draft_vocab: int | None  # None: draft_vocab_size absent
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    intermediate: int | None
    layers: int
    tied: bool
    use_aux: bool  # eagle_config.use_aux_hidden_state (default true)
    aux_ids: tuple[int, ...] | None  # as this engine reads them (None: not set where it looks)
    aux_key: str | None  # the key it read them from
    target: Target | None

    @classmethod
    def of(cls, config: Mapping[str, Any], names: frozenset[str], aux: AuxIds, target: Target | None) -> Draft:
        hidden = _int(config.get("hidden_size")) or 0
        target_hidden = _int(config.get("target_hidden_size"))
        heads = _int(config.get("num_attention_heads"))
        head_dim = _int(config.get("head_dim")) or (hidden // heads if heads and hidden % heads == 0 else None)
        use_aux = lookup(config, "eagle_config.use_aux_hidden_state")
        aux_ids, aux_key = None, None
        for key in aux.keys:
            found = lookup(config, key)
            if isinstance(found, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in found):
                aux_ids, aux_key = tuple(found), key
                break
        return cls(
            config=config,
            names=names,
            hidden=hidden,
            target_hidden=target_hidden or hidden,
            target_hidden_set=target_hidden is not None,
            vocab=_int(config.get("vocab_size")),
            draft_vocab=_int(config.get("draft_vocab_size")),
            heads=heads,
            kv_heads=_int(config.get("num_key_value_heads")) or heads,
            head_dim=head_dim,
            intermediate=_int(config.get("intermediate_size")),
            layers=_int(config.get("num_hidden_layers")) or 1,
            tied=config.get("tie_word_embeddings") is True,
            use_aux=use_aux is not False,
            aux_ids=aux_ids,
            aux_key=aux_key,
            target=target,
        )

    @property
    def aux_count(self) -> int:
        return len(self.aux_ids) if self.aux_ids is not None else 3

    @property
    def target_width(self) -> int | None:
        """The target's hidden size: from --base, else the drafter's target_hidden_size when it sets one."""
        if self.target is not None and self.target.hidden is not None:
            return self.target.hidden
        return self.target_hidden if self.target_hidden_set else None

    @property
    def head_rows(self) -> int | None:
        """Rows of the drafter's own lm_head: draft_vocab_size, else vocab_size."""
        return self.draft_vocab or self.vocab

    def has(self, name: str) -> bool:
        return name in self.names

    def q_out(self) -> int | None:
        return self.heads * self.head_dim if self.heads and self.head_dim else None

    def kv_out(self) -> int | None:
        return self.kv_heads * self.head_dim if self.kv_heads and self.head_dim else None
