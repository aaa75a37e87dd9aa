"""One engine's view of a drafter: the shared :class:`DrafterSpec`, plus what this engine reads differently
(which aux-id keys, how fc is sized) and the target's settings from ``--base``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ....base_layouts import text_config
from ..shapes import Expected, shapes_of
from ..spec import DrafterSpec, Setting, lookup

__all__ = ["Draft", "Target", "lookup"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class Target:
    """What the engines read from the target (base) model's text config."""

    layers: int | None
    hidden: int | None
    vocab: int | None
    model_type: str | None
    #: ``architectures[0]``: the model class the engine builds for the target (its capture depends on it).
    architecture: str | None = None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Target:
        text = text_config(config)
        model_type = text.get("model_type") or config.get("model_type")
        architectures = config.get("architectures")
        architecture = architectures[0] if isinstance(architectures, list) and architectures else None
        return cls(
            _int(text.get("num_hidden_layers")),
            _int(text.get("hidden_size")),
            _int(text.get("vocab_size")),
            model_type if isinstance(model_type, str) else None,
            architecture if isinstance(architecture, str) else None,
        )


@dataclass(frozen=True)
class Draft:
    """A drafter as one engine builds it: the spec's facts, the ids this engine reads, the target's settings.

    Every width comes from the spec; the fields below are only what the engine's own code decides.
    """

    spec: DrafterSpec
    names: frozenset[str]  # the checkpoint's tensor names
    dtypes: Mapping[str, str]  # tensor name → stored dtype
    tensor_shapes: Mapping[str, tuple[int, ...]]  # tensor name → stored shape
    aux: Setting | None  # the aux ids this engine reads (None: not set where it looks)
    fc_aux: int  # how many target hidden states this engine sizes fc for
    target: Target | None

    @property
    def config(self) -> Mapping[str, Any]:
        return self.spec.config

    @property
    def hidden(self) -> int:
        return self.spec.hidden_size

    @property
    def target_hidden(self) -> int:
        return self.spec.target_hidden_size

    @property
    def target_hidden_set(self) -> bool:
        return self.spec.target_hidden is not None

    @property
    def vocab(self) -> int | None:
        return self.spec.vocab_size

    @property
    def draft_vocab(self) -> int | None:
        return self.spec.draft_vocab_size

    @property
    def layers(self) -> int:
        return self.spec.layer_count

    @property
    def tied(self) -> bool:
        return self.spec.tied

    @property
    def use_aux(self) -> bool:
        return self.spec.use_aux

    @property
    def aux_ids(self) -> tuple[int, ...] | None:
        return tuple(self.aux.value) if self.aux is not None else None

    @property
    def aux_key(self) -> str | None:
        return self.aux.key if self.aux is not None else None

    @property
    def captured(self) -> int:
        """How many hidden states the engine captures: its distinct ids (a layer is captured once), else three."""
        return len(set(self.aux.value)) if self.aux is not None else 3

    @property
    def target_width(self) -> int | None:
        """The target's hidden size: from --base, else the drafter's target_hidden_size when it sets one."""
        if self.target is not None and self.target.hidden is not None:
            return self.target.hidden
        return self.target_hidden if self.target_hidden_set else None

    @property
    def target_vocab(self) -> int | None:
        """The target's vocabulary: from --base, else the drafter's vocab_size (EAGLE-3 shares the tokenizer)."""
        if self.target is not None and self.target.vocab is not None:
            return self.target.vocab
        return self.vocab

    @property
    def head_rows(self) -> int | None:
        return self.spec.head_rows

    @property
    def d2t_length(self) -> int | None:
        """The length of the checkpoint's d2t, if it stores one."""
        found = next((shape for name, shape in self.tensor_shapes.items() if name.split(".")[-1] == "d2t"), None)
        return found[0] if found else None

    def has(self, name: str) -> bool:
        return name in self.names

    def shape(self, canonical: str) -> tuple[int, ...] | None:
        """The shape the spec implies for a canonical (SpecForge) tensor name."""
        found = self.expected.get(canonical)
        return found.shape if found else None

    @cached_property
    def expected(self) -> dict[str, Expected]:
        """Canonical (SpecForge) tensor name → the shape the spec implies."""
        return shapes_of(self.spec)
