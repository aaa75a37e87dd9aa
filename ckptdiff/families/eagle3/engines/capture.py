"""Which target layers an engine captures for the drafter's fc, per target model class (rules as data).

An engine turns the aux-layer ids it reads into layer indices with the target class's own set-up code, then
the class's forward takes a hidden state at each index: the *input* of the layer at that index (the output of
the layer before it; index 0: the embeddings) or its *output*. Both differ by class, so the capture is stated
per class, each with where it was read. A target class no table names is not guessed: the verdict is
conditional on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ...rules import Source

Ids = tuple[int, ...]


@dataclass(frozen=True)
class ClassCapture:
    """How one engine captures aux hidden states on targets of one family of model classes."""

    label: str  # the family in words ("Llama-class")
    #: Target architectures (``config.architectures[0]``) of this family; ``model_types``: their model_type.
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    #: The engine's set-up: the ids it read and the target's depth → the layer indices it captures at.
    indices: Callable[[Ids, int], Ids]
    #: The indices when no id is read, for a target of n layers.
    default: Callable[[int], Ids]
    #: Whether the state taken at index i is the input of layer i (the output of layer i-1) or its output.
    takes: Literal["input", "output"]
    #: The indices the forward ever reaches, for a target of n layers.
    reached: Callable[[int], range]
    setup: Source  # where the set-up (ids → indices, default) was read
    forward: Source  # where the forward's capture line was read
    example: str = ""  # a well-known model of this family at its usual depth, for conditions in words
    rule: str = "as given"  # ``indices`` in words, for the documented table

    def outputs(self, ids: Ids | None, n: int) -> Ids:
        """The target-layer outputs captured (-1: the embeddings), each once, in layer order (the forward appends
        them as it passes the layers, whatever order the ids are in)."""
        indices = self.indices(ids, n) if ids else self.default(n)
        shift = -1 if self.takes == "input" else 0
        return tuple(sorted({index + shift for index in indices if index in self.reached(n)}))

    def unreached(self, ids: Ids, n: int) -> Ids:
        """The ids whose index the forward never reaches on a target of n layers."""
        indices = self.indices(ids, n)
        return tuple(i for i, index in zip(ids, indices) if index not in self.reached(n))

    def covers(self, architecture: str | None, model_type: str | None) -> bool:
        return (architecture is not None and architecture in self.architectures) or (
            architecture is None and model_type is not None and model_type in self.model_types
        )


def plus_one(ids: Ids, n: int) -> Ids:
    return tuple(i + 1 for i in ids)


def as_given(ids: Ids, n: int) -> Ids:
    return tuple(ids)


def vllm_default(n: int) -> Ids:
    return (2, n // 2, n - 3)


#: Where each aux-id key is written, and so whose capture its ids name: a trainer writes the ids of the engine
#: it captured with (SpecForge: SGLang's eagle_config ids; speculators: vLLM's top-level ids; eagle_config's
#: layer_ids is vLLM's V2 runner key).
WRITERS: dict[str, str] = {
    "eagle_config.eagle_aux_hidden_state_layer_ids": "sglang",
    "eagle_aux_hidden_state_layer_ids": "vllm",
    "eagle_config.layer_ids": "vllm",
}


def capture_for(
    classes: tuple[ClassCapture, ...], architecture: str | None, model_type: str | None
) -> ClassCapture | None:
    """The family of the target's class: by its architecture, else (a wrapper class, e.g. a multimodal model around a
    text model) by its text config's model_type."""
    by_class = next((c for c in classes if architecture is not None and architecture in c.architectures), None)
    return by_class or next((c for c in classes if model_type is not None and model_type in c.model_types), None)


#: Depths the condition is solved over when the target is not given (every realistic decoder depth).
DEPTHS = range(1, 257)


@dataclass(frozen=True)
class Claim:
    """What the drafter's config says it was trained on: ids at a key, and whose capture they name."""

    key: str
    ids: Ids
    writer: str  # the engine whose capture the ids name ("sglang", "vllm")
    #: The ids start at 0 or 1: written as "the output of layer k" whoever reads them (the embedding output
    #: is never used, sglang PR#25454) (inferred).
    as_outputs: bool
    #: The ids are the default capture's layer indices of an m-layer model, (2, m//2, m-3): each the input of
    #: its layer (the outputs of layers 1, m//2-1, m-4), as vLLM's default (interfaces.py), SGLang's
    #: DeepSeek-V2 class and the EAGLE-3 reference code index them, whatever class they are served on
    #: (inferred: e.g. AQ-MedAI's Kimi-K2 drafter's [2, 30, 58]). None: they are not.
    default_depth: int | None = None

    def outputs(self, writer_classes: tuple[ClassCapture, ...], label: str, n: int) -> Ids | None:
        """The target-layer outputs these ids name on a target of family ``label`` and depth n (None: unknown)."""
        if self.as_outputs:
            return tuple(sorted(set(self.ids)))
        if self.default_depth is not None:
            return tuple(sorted({i - 1 for i in self.ids}))
        return self.class_reading(writer_classes, label, n)

    def class_reading(self, writer_classes: tuple[ClassCapture, ...], label: str, n: int) -> Ids | None:
        """The outputs the writer's own class convention for family ``label`` makes of the ids (None: no rule)."""
        capture = next((c for c in writer_classes if c.label == label), None)
        return capture.outputs(self.ids, n) if capture is not None else None


def default_depth(ids: Ids) -> int | None:
    """The depth m whose default capture indices (2, m//2, m-3) the ids are, if they are (three ids, in order)."""
    if len(ids) != 3 or ids[0] != 2:
        return None
    m = ids[2] + 3
    return m if vllm_default(m) == tuple(ids) else None


@dataclass(frozen=True)
class Solution:
    """The targets on which the capture matches the claim: per family, the depths."""

    family: ClassCapture
    depths: tuple[int, ...]

    def ranges(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for depth in self.depths:
            if out and out[-1][1] == depth - 1:
                out[-1] = (out[-1][0], depth)
            else:
                out.append((depth, depth))
        return out


def solve(
    captures: tuple[ClassCapture, ...],
    read: Ids | None,
    claim: Claim,
    writer_classes: tuple[ClassCapture, ...],
    fc_aux: int,
    depths: range = DEPTHS,
) -> list[Solution]:
    """Every (family, depth) whose capture of ``read`` equals what ``claim`` names, with fc's width."""
    found = []
    for capture in captures:
        good = []
        for n in depths:
            captured = capture.outputs(read, n)
            named = claim.outputs(writer_classes, capture.label, n)
            if named is not None and captured == named and len(captured) == fc_aux:
                good.append(n)
        if good:
            found.append(Solution(capture, tuple(good)))
    return found


def convention_table(engines: tuple[tuple[str, tuple[ClassCapture, ...]], ...]) -> str:
    """The per-class capture conventions as a Markdown table (docs/engines.md holds it, generated from the rules).

    ``engines``: (engine label, its classes). Each row says how ids become indices, the default, whether the
    state at an index is the layer's input or output, and what id k then captures on a 61-layer target."""
    lines = [
        "| engine | target class | ids → indices | no ids | takes | ids [2, 30, 58] on 61 layers capture | read in |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, classes in engines:
        for c in classes:
            outputs = ", ".join(map(str, c.outputs((2, 30, 58), 61)))
            lines.append(
                f"| {label} | {c.label} | {c.rule} | {list(c.default(61))} for 61 | {c.takes} of the layer | "
                f"outputs of layers {outputs} | `{c.setup.path}`; `{c.forward.path}` |"
            )
    return "\n".join(lines) + "\n"


def documented_table() -> str:
    """The table docs/engines.md carries, from the engines' rules."""
    from . import ENGINE_NAMES, get_engine

    engines = tuple(
        (e.label, e.aux_ids.classes) for e in (get_engine(name) for name in ENGINE_NAMES) if e.aux_ids.classes
    )
    return convention_table(engines)
