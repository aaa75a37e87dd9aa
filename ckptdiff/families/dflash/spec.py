"""A DFlash drafter's settings from config.json and its tensor names, read once: where each DFlash key was found.

DFlash drafters (z-lab's ``DFlashDraftModel``) are a few Qwen3-style decoder layers that attend over a block of
mask tokens, conditioned on the target's hidden states after ``target_layer_ids``, concatenated and projected by
``fc`` (``[hidden, K * hidden]``), normalised by ``hidden_norm``; ``norm`` is the final norm. They carry no
embedding and no head: the engines embed with the target's and project with the target's ``lm_head``. The DFlash
keys sit in ``dflash_config`` or, in older exports, at the top level (``block_size``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from ...base_layouts import architecture as first_architecture

Config = Mapping[str, Any]
_LAYER = re.compile(r"^(?:model\.)?layers\.(\d+)\.")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(_int(v) is not None for v in value):
        return tuple(value)
    return None


#: Past this many characters a string is no layer id (a real one has a few digits): not handed to int(), whose own
#: limit (4,300 digits) raises.
_MAX_ID_CHARS = 64


def _stated_id(value: Any) -> int | None:
    """An id as SGLang's int() reads it: an integer, or a string int() takes (``"3"``, ``" 3"``); None for anything
    else (``"three"``, a superscript ``"³"``, which str.isdigit() passes and int() refuses)."""
    if not isinstance(value, str):
        return _int(value)
    if len(value) > _MAX_ID_CHARS:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def stated_ids(value: Any) -> tuple[int, ...] | None:
    """The ids a config states, a string read as int() reads it (what SGLang makes of ``"3"``; vLLM's refusal of
    it is its rules')."""
    if not isinstance(value, list):
        return None
    ids = [_stated_id(v) for v in value]
    return None if None in ids else tuple(cast(list[int], ids))


def layer_of(name: str) -> int | None:
    """``layers.3.mlp.up_proj.weight`` → 3 (also under ``model.``)."""
    found = _LAYER.match(name)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Setting:
    """One DFlash setting as the config states it, and the key it was read at (None: absent)."""

    value: Any
    key: str | None


@dataclass(frozen=True)
class DFlashSpec:
    """What a DFlash drafter's config and names say."""

    config: Config
    names: frozenset[str]

    @classmethod
    def of(cls, config: Config, names: Iterable[str] = ()) -> DFlashSpec:
        return cls(config, frozenset(names))

    @property
    def section(self) -> Mapping[str, Any]:
        found = self.config.get("dflash_config")
        return found if isinstance(found, Mapping) else {}

    def setting(self, name: str, *, null_is_set: bool = False) -> Setting:
        """``dflash_config.<name>`` first, then the top level. ``null_is_set``: a null in ``dflash_config`` is its
        value there (``dict.get(key, <top level>)``, how both engines read the mask token id and SGLang the block
        size), the top level unread."""
        if self.section.get(name) is not None or (null_is_set and name in self.section):
            return Setting(self.section[name], f"dflash_config.{name}")
        if self.config.get(name) is not None:
            return Setting(self.config[name], name)
        return Setting(None, None)

    @property
    def architecture(self) -> str | None:
        return first_architecture(self.config)

    @property
    def hidden(self) -> int | None:
        return _int(self.config.get("hidden_size"))

    @property
    def target_hidden(self) -> int | None:
        """``target_hidden_size`` (vLLM sizes fc's input with it when set)."""
        return _int(self.config.get("target_hidden_size"))

    @property
    def layers(self) -> int | None:
        """The drafter's own decoder layers (``num_hidden_layers``)."""
        return _int(self.config.get("num_hidden_layers"))

    @property
    def vocab(self) -> int | None:
        return _int(self.config.get("vocab_size"))

    @property
    def heads(self) -> int | None:
        return _int(self.config.get("num_attention_heads"))

    @property
    def kv_heads(self) -> int | None:
        return _int(self.config.get("num_key_value_heads")) or self.heads

    @property
    def head_dim(self) -> int | None:
        explicit = _int(self.config.get("head_dim"))
        if explicit:
            return explicit
        h, n = self.hidden, self.heads
        return h // n if h and n else None

    @property
    def intermediate(self) -> int | None:
        return _int(self.config.get("intermediate_size"))

    @property
    def block_size(self) -> Setting:
        """As SGLang parses it (``int()``: ``"16"`` is 16; vLLM's DFlash drafter never reads it); a value ``int()``
        refuses stays as written (SGLang's config check says so)."""
        found = self.setting("block_size", null_is_set=True)
        if isinstance(found.value, str | float | bool):
            try:
                return Setting(int(found.value), found.key)
            except (ValueError, OverflowError):
                return found
        return found

    @property
    def target_layer_ids(self) -> Setting:
        """``target_layer_ids``: the target layers whose outputs feed fc (0-based, the layer's output)."""
        found = self.setting("target_layer_ids")
        return Setting(stated_ids(found.value), found.key) if found.key else found

    @property
    def num_target_layers(self) -> int | None:
        return _int(self.setting("num_target_layers").value)

    @property
    def mask_token_id(self) -> Setting:
        """A null in ``dflash_config`` is the value: neither engine then reads the top-level key (vLLM's speculator
        refuses the null, SGLang resolves the token from the target's tokenizer)."""
        return self.setting("mask_token_id", null_is_set=True)

    @property
    def use_aux_hidden_state(self) -> bool:
        """vLLM's reading (qwen3_dflash.py:436): ``eagle_config`` overlaid by ``dflash_config``, else the top level,
        else true; by truth value, so ``null`` and ``0`` are false. SGLang never reads it."""
        eagle = self.config.get("eagle_config")
        merged = {**(eagle if isinstance(eagle, Mapping) else {}), **self.section}
        return bool(merged.get("use_aux_hidden_state", self.config.get("use_aux_hidden_state", True)))

    @property
    def eagle_aux_ids(self) -> tuple[int, ...] | None:
        """``eagle_aux_hidden_state_layer_ids`` at the top level (vLLM reads it before the DFlash ids)."""
        return _ids(self.config.get("eagle_aux_hidden_state_layer_ids"))

    @cached_property
    def stored_layers(self) -> tuple[int, ...]:
        return tuple(sorted({index for name in self.names if (index := layer_of(name)) is not None}))

    def features(self, ids: tuple[int, ...] | None) -> int | None:
        """How many target hidden states fc concatenates: one per id, else one per drafter layer."""
        return len(ids) if ids else self.layers
