"""The vocabulary engine rule tables are written in: where a rule was read, and what a loader does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .eagle3.engines.settings import Draft
    from .eagle3.spec import Quantization

Severity = Literal["error", "warning", "info"]
Shape = tuple[int, ...]
#: A condition on the drafter's settings (as this engine reads them).
When = Callable[["Draft"], bool]


#: What becomes of a parameter no tensor fills, by the code of the event its rule raises (else "missing").
PARAMETER_FATES: dict[str, str] = {
    "from_target": "from_target",
    "lm_head_from_target": "from_target",
    "embed_width_mismatch": "from_target",
    "embed_not_shared": "random",
    "random_init": "random",
    "scale_missing": "random",
    "lm_head_random": "random",
    "missing_weight": "missing",
    "d2t_missing": "default",
    "skipped": "not_needed",
    "not_needed": "not_needed",
    "unread": "not_needed",
}
#: What becomes of a tensor a drop or an on-load rule names, by the event's code (else: dropped → "skipped",
#: on-load → loaded).
TENSOR_FATES: dict[str, str] = {"embed_tokens_overridden": "from_target"}


def always(_: Draft) -> bool:
    return True


@dataclass(frozen=True)
class Source:
    """Where a rule was read: repository, commit, file. ``inferred``: reasoned from that code, not read in it."""

    repo: str
    commit: str
    path: str
    inferred: bool = False

    def __str__(self) -> str:
        return f"{self.repo}@{self.commit} {self.path}" + (" (inferred)" if self.inferred else "")

    def inferring(self) -> Source:
        return Source(self.repo, self.commit, self.path, inferred=True)


@dataclass(frozen=True)
class Event:
    """An event a rule raises: severity, stable code, the key of its words in the family's catalogue (a template
    over the event's params: {name}, {param}, ...), and where the rule was read."""

    severity: Severity
    code: str
    wording: str
    source: Source


@dataclass(frozen=True)
class Rename:
    """The loader rewrites a checkpoint name before looking its parameter up: ``re.sub(pattern, replacement)``,
    applied to every name the pattern is found in. ``shard``: the name is stacked into a fused parameter."""

    pattern: str
    replacement: str
    source: Source
    shard: str | None = None


@dataclass(frozen=True)
class Drop:
    """Checkpoint names the loader consumes or discards without a parameter of that name (re.search)."""

    pattern: str
    event: Event
    when: When = always


@dataclass(frozen=True)
class Case:
    """``then`` applies when ``when`` holds; a rule lists cases, the first that holds wins."""

    when: When
    then: Event


@dataclass(frozen=True)
class Param:
    """A parameter the engine's drafter module has, under the name its loader looks up.

    ``shape`` is computed from the drafter's settings (None: not checked). ``absent`` says what happens when no
    checkpoint tensor fills it (first case that holds; none: it stays randomly initialised, silently).
    ``loaded`` says what the engine then does with a loaded value (e.g. overwrites it with the target's).
    """

    name: str
    shape: Callable[[Draft], Shape | None]
    source: Source
    shards: tuple[str, ...] = ()  # a fused parameter: the shards it stacks (q, k, v)
    exists: When = always
    absent: tuple[Case, ...] = ()
    loaded: tuple[Case, ...] = ()
    #: The canonical module a linear layer's weight belongs to ("midlayer.self_attn.q_proj"): quantization
    #: applies to it unless the drafter's ignore list names it. None: not a quantizable linear weight.
    module: str | None = None
    #: The stored dtypes it takes as they are (None: any); another dtype raises ``dtype_event`` ({dtype}).
    dtypes: tuple[str, ...] | None = None
    dtype_event: Event | None = None


@dataclass(frozen=True)
class AuxIds:
    """How an engine chooses the target layers whose hidden states feed the drafter's fc."""

    keys: tuple[str, ...]  # dotted config keys read, in order
    #: A config id k makes the engine capture the output of target layer k + offset.
    offset: int
    #: The target layers whose outputs are captured when no id is set, for a target of n layers.
    default_outputs: Callable[[int], tuple[int, ...]]
    default_event: Event
    source: Source
    #: Not read from the drafter's config at all (TensorRT-LLM: a serving setting).
    from_serving_config: bool = False
    #: The config ids it can capture for a target of n layers (others are never captured).
    valid: Callable[[int], range] = lambda n: range(0, n)
    #: The capture per target model class (eagle3/engines/capture.py ``ClassCapture``s); empty: ``offset`` and
    #: ``default_outputs`` for every class.
    classes: tuple[Any, ...] = ()
    #: Said instead of any capture verdict when ``eagle_config.use_aux_hidden_state`` is false: the engine captures
    #: nothing then, the drafter reads the target's last hidden state (None: not known to switch the capture off).
    off_without_aux: Event | None = None
    #: Where the engine passes an empty list of ids on as given (the first of ``keys`` set holds ``[]``), so that
    #: no target layer is captured and fc gets nothing (None: an empty list reads as unset, the default is used).
    empty_captures_nothing: Source | None = None


@dataclass(frozen=True)
class TargetCheck:
    """A check against the base (target) model's text config (``--base``)."""

    fails: Callable[[Draft], bool]
    event: Event


def target_hidden_check(source: Source, wording: str) -> TargetCheck:
    """fc's input width (3 x target_hidden_size) against the target's hidden_size: every engine builds fc so."""
    return TargetCheck(
        lambda d: d.target is not None and d.target.hidden is not None and d.target_hidden != d.target.hidden,
        Event("error", "target_hidden_mismatch", wording, source),
    )


@dataclass(frozen=True)
class Loader:
    """One drafter class of an engine: the architectures it serves and how its load_weights treats names."""

    architectures: tuple[str, ...]
    source: Source
    renames: tuple[Rename, ...]
    drops: tuple[Drop, ...]
    #: Templates tried in order to find a name's parameter ("{name}", "model.{name}").
    lookups: tuple[str, ...]
    params: tuple[Param, ...]
    #: A name no parameter answers to: an error (the loader raises) or a silent skip.
    unknown: Event
    shape_error: Event  # message may use {name}, {param}, {got}, {want}
    checks: tuple[Case, ...] = ()  # config checks at construction (e.g. one layer only)
    #: A name with this suffix that no parameter answers to is skipped with this event instead of ``unknown``
    #: (vLLM's AutoWeightsLoader ignores unexpected ``.bias`` tensors).
    ignored_unexpected: tuple[str, Event] | None = None
    #: The aux-id keys its fc is sized from (num_aux_hidden_states first, else the first of these, else 3).
    fc_aux_keys: tuple[str, ...] = ("eagle_config.eagle_aux_hidden_state_layer_ids",)
    #: Whether it builds its linear layers from the drafter's own quantization_config.
    quantization: When = always
    #: Events when the drafter's quantization_config is one it does not honour (first that holds).
    quantization_refused: tuple[Case, ...] = ()
    #: The engine's own matching of the quantization ignore list against its layer names (quantized.py);
    #: None: the generic match on canonical names.
    ignores: Callable[[Quantization, str, Draft], bool] | None = None


@dataclass(frozen=True)
class SpeculatorsAdapter:
    """How an engine reads a speculators-format config (speculators_model_type, transformer_layer_config)."""

    #: transformer_layer_config.model_type (default "llama") → the architecture it builds.
    architectures: tuple[tuple[str, str], ...]
    types: tuple[str, ...]  # speculators_model_type values it accepts for EAGLE-3 (none: it refuses the format)
    source: Source
    invalid: Event  # {defect}: the config cannot be read (or, with no types, the format is refused)
    #: {defect}: what its validation of speculators_config finds, when that is not fatal to loading (None: it is)
    validation: Event | None = None
    #: transformer_layer_config keys the drafter's construction reads with no default (the adapter builds a bare
    #: PretrainedConfig from that section); ``incomplete`` ({missing}) when one is absent.
    required: tuple[str, ...] = ()
    incomplete: Event | None = None
    #: Every speculators_model_type its registry holds (any other is refused, naming these), with the drafter it
    #: builds from each type that is not one of ``types`` (another family's: DFlash, DSpark).
    registered: tuple[str, ...] = ()
    other_drafters: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Engine:
    """A serving engine: its drafter loaders, how it resolves architectures, and its config conventions."""

    name: str
    label: str
    version: str  # which code the rules were read from, in words
    #: ``config.architectures[0]`` → the class name the engine looks up (re.sub pairs, in order).
    architecture_mapping: tuple[tuple[str, str], ...]
    loaders: tuple[Loader, ...]
    unregistered: Event  # {arch}, {looked_up}
    aux_ids: AuxIds
    target_checks: tuple[TargetCheck, ...] = ()
    config_checks: tuple[Case, ...] = ()
    #: Target model_types this version serves EAGLE-3 for (a substring match on the base's text config);
    #: None: no restriction. ``target_refused`` is raised for any other ({model_type}, {supported}).
    target_model_types: tuple[str, ...] | None = None
    target_refused: Event | None = None
    #: Target architectures (``config.architectures[0]``) whose class the engine refuses EAGLE-3 for (no
    #: aux hidden-state capture): ``target_class_refused`` ({architecture}) with --base, and no capture verdict.
    refused_targets: frozenset[str] = frozenset()
    target_class_refused: Event | None = None
    #: None: a speculators-format config is looked up by its architectures like any other.
    speculators: SpeculatorsAdapter | None = None
    #: The drafter's model_type → the architecture the engine substitutes before its mapping (vLLM turns a
    #: deepseek_v3 draft into an MTP model); the ``why`` param of ``unregistered`` says so.
    model_type_architectures: tuple[tuple[tuple[str, ...], str], ...] = ()
