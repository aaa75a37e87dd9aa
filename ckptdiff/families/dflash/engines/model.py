"""The vocabulary DFlash load rules are written in: which class an engine builds for a DFlash drafter, where it
reads the target-layer ids, how it names the drafter's parameters, what it takes from the target, and what it
says when something does not fit. Each engine's module (``vllm.py``, ``sglang.py``) is one ``DFlashEngine``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...rules import Event, Source

Ids = tuple[int, ...]


@dataclass(frozen=True)
class DFlashClass:
    """A drafter class the engine builds, for these ``architectures[0]`` (as the engine sees them)."""

    name: str
    source: Source
    architectures: tuple[str, ...]


@dataclass(frozen=True)
class IdsKey:
    """A config key the engine reads target-layer ids from, in the order it tries them. ``capture``: what the engine
    adds to an id to get the index it captures at (vLLM captures before layer i: DFlash's "after layer i" ids get
    +1, EAGLE-3's aux ids are indices already)."""

    key: str
    capture: int = 0
    #: Whether an empty list there is read as unset (the next key, else the default) or passed on as given.
    empty_is_unset: bool = True
    #: Whether a null there is read as unset (the next key) or ends the lookup with no ids (``dict.get(key,
    #: fallback)`` returns a present null: the default ids, the later keys unread).
    null_is_unset: bool = True


@dataclass(frozen=True)
class ConfigCheck:
    """A config setting the engine parses before it builds anything, refusing the config (a ValueError at start-up)
    when its value breaks ``rule`` (a name in :data:`.replay.RULES`)."""

    #: Where it is read, in order: the first key present wins, a null included (``dict.get(key, fallback)``).
    keys: tuple[str, ...]
    rule: str
    event: Event  # {key}, {found}, {rule}; with ``together``: {pair_key}, {pair_found}
    #: The value taken when no key is present.
    default: Any = None
    #: The first key of another check's setting this one must be set with: both non-zero, or both zero or unset.
    together: str | None = None


@dataclass(frozen=True)
class Stacked:
    """A checkpoint name piece the loader stacks into a fused parameter (``q_proj`` → ``qkv_proj[q]``)."""

    piece: str
    param: str
    shard: str


@dataclass(frozen=True)
class Alias:
    """A checkpoint name (``re.sub`` pattern, on the name without ``model.``) the loader reads as another."""

    pattern: str
    replacement: str
    source: Source


@dataclass(frozen=True)
class Refusal:
    """A name piece the loader raises on (vLLM's ``mask_hidden`` assertion, SGLang's Domino weights)."""

    piece: str
    event: Event  # {name}


@dataclass(frozen=True)
class SinkBias:
    """The per-head attention sink biases (``layers.{i}.self_attn.attention_sink_bias``, one value per query head)
    every drafter layer builds when the config's flag is set (MiMo-style drafters)."""

    #: Where the flag is read, in order: the first key present wins, a null included (``dict.get(key, fallback)``);
    #: the layer builds the biases when that value is true (by truth value), else none.
    keys: tuple[str, ...]
    #: What a bias no checkpoint tensor fills keeps: "default" (vLLM's -inf: the layer attends as if it had no sink)
    #: or "random" (SGLang's uninitialised ``torch.empty``).
    fate_missing: str
    missing: Event  # {param}
    source: Source


@dataclass(frozen=True)
class Variant:
    """A drafter layout the engine recognises from its config and builds differently: the engine's rules with
    ``changes`` (``DFlashEngine`` fields) in their place (SGLang's Nemotron 3.5 draft)."""

    name: str
    source: Source
    applies: Callable[[Mapping[str, Any]], bool]
    changes: Mapping[str, Any]


@dataclass(frozen=True)
class MaskLookup:
    """Where the engine's runtime resolves the mask token id as it starts, in order: ``(key, null_is_unset)``; the
    first key present wins (a null there too, unless ``null_is_unset``)."""

    keys: tuple[tuple[str, bool], ...]
    #: None of the keys present: the runtime refuses to start ({keys}).
    missing: Event
    #: The key found holds null, which the default runner's ``int()`` refuses ({key}); under vLLM's V1 runner the
    #: proposer takes the null as it is (no ``int()``), so nothing is said there.
    null: Event


@dataclass(frozen=True)
class DFlashEngine:
    """One engine's DFlash loading, as data; :mod:`.replay` replays it."""

    name: str
    label: str
    classes: tuple[DFlashClass, ...]
    #: The architecture the engine looks up for the config's ``architectures[0]`` (vLLM's EAGLEConfig rewrite).
    looks_up: Callable[[str], str]
    registry: Source
    no_class: Event  # {architecture}, {looked_up}, {registered}
    #: The config settings the engine refuses before it builds anything, checked in this order; the first
    #: ``checks_before_ids`` of them before the target layer ids are parsed (``ids_malformed``), the rest after.
    config_checks: tuple[ConfigCheck, ...]
    checks_before_ids: int
    #: Refusals before anything is built: a required setting absent ({key}) or malformed ({key}, {value}).
    layers_required: Event | None
    ids_malformed: Event | None
    #: Where the ids are read, in order; the first present wins.
    ids_keys: tuple[IdsKey, ...]
    ids_source: Source
    #: The ids used when no key holds any, from the target's depth and the drafter's layers (None: unknown here).
    default_ids: Callable[[int | None, int | None], Ids | None]
    default_ids_words: str
    #: fc's input width: features x the first of these config keys present (vLLM: target_hidden_size first).
    fc_hidden_keys: tuple[str, ...]
    fc_source: Source
    #: A construction-time range check of the ids against ``num_target_layers`` ({ids}, {limit}, {key}).
    ids_vs_trained_depth: Event | None
    #: The start-up check of the ids against the runtime target's depth ({ids}, {layers}, {key}); None: not checked.
    ids_vs_target: Event | None
    #: Fewer (or more) captured states than fc takes: a capture index the target's forward never reaches, or the
    #: class default's three, found when the drafter first combines them ({ids}, {layers}, {captured}, {features}).
    not_captured: Event | None
    #: The drafter's parameters' prefix, and whether a ``model.``-prefixed checkpoint name is read as unprefixed.
    param_prefix: str
    strips_model_prefix: bool
    aliases: tuple[Alias, ...]
    stacked: tuple[Stacked, ...]
    stacked_source: Source
    refusals: tuple[Refusal, ...]
    #: Name pieces it discards without a word, each where that was read (vLLM: ``t2d``, a ``mask_embedding``
    #: without its .pt file, rotary caches).
    discards: tuple[tuple[str, Source], ...]
    #: Whether a carried embedding / head is loaded and used (vLLM), or the target's is used regardless (SGLang).
    own_embedding: bool
    own_head: bool
    from_target: Event  # {name}, {carried}
    carried_unused: Event  # {name}: a carried embedding/head the engine never reads
    #: Whether ``use_aux_hidden_state: false`` drops fc (vLLM) or is ignored (SGLang builds fc regardless).
    aux_flag_drops_fc: bool
    unknown: Event  # {name}, {candidate}
    shape_mismatch: Event  # {name}, {param}, {got}, {want}
    fc_mismatch: Event  # {name}, {got}, {want}, {features}
    param_missing: Event  # {param}
    #: Against the target (``--base``): a hidden size the target's embedding and head do not have; a mask token
    #: the target's vocabulary does not hold.
    hidden_vs_target: Event  # {hidden}, {target_hidden}
    mask_vs_target: Event  # {mask_token_id}, {vocab}, {key}
    #: Without --base: what the verdict assumes of the target.
    target_unknown: Event  # {needs}
    #: The target classes (``architectures[0]``) that can capture hidden states for a DFlash drafter, and those that
    #: cannot (start-up refuses: ``target_refused`` {architecture}); a class in neither is not guessed
    #: (``target_class_unknown``, info).
    capturing_targets: tuple[str, ...]
    refused_targets: tuple[str, ...]
    target_refused: Event
    target_class_unknown: Event  # {architecture}
    #: The capture indices another model runner reads (vLLM's V1, ``VLLM_USE_V2_MODEL_RUNNER=0``; None: the
    #: engine has one), and what is said when they differ from the default runner's ({v1}, {v2}, {fails}).
    v1_ids: Callable[[Mapping[str, Any]], Ids | None] | None = None
    v1_differs: Event | None = None
    #: ``not_captured`` under that runner, where it fails at another moment (vLLM's V1: the first draft).
    not_captured_v1: Event | None = None
    #: Against the target (``--base``): the drafter's attention (head_dim, KV heads) differing from the target's, and
    #: how the engine's KV cache takes it (neither pinned engine checks one against the other) ({head_dim},
    #: {kv_heads}, {layers}, {target_head_dim}, {target_kv_heads}, {target_mla}, {bytes_per_token}, {dtype}).
    draft_kv_cache: Event | None = None
    #: ``use_aux_hidden_state`` false where it drops fc (``aux_flag_drops_fc``): the target still captures (the
    #: runner decides that alone) and the captured states reach the drafter concatenated as they are. ``unprojected``:
    #: their width is not the drafter's hidden size, so the first forward fails ({captured}, {target_hidden},
    #: {width}, {hidden}, {outputs}, {assumed}); ``unprojected_v1``: the same under the V1 runner; ``as_is``: one
    #: state of the drafter's width, read without fc ({outputs}); ``fc_unused``: a shipped fc the load drops ({name}).
    unprojected: Event | None = None
    unprojected_v1: Event | None = None
    as_is: Event | None = None
    fc_unused: Event | None = None
    #: The attention sink biases the drafter's layers build when its config asks (None: the engine builds none).
    sink_bias: SinkBias | None = None
    #: How the runtime resolves the mask token at start-up (None: not modelled as a start-up check).
    mask_lookup: MaskLookup | None = None
    #: Whether the engine passes each id through ``int()`` as it parses them (SGLang: ``"3"`` is 3, ``"three"`` is
    #: ``ids_malformed``); else an id must be an int already.
    ids_int: bool = False
    #: Ids read at a key the engine shifts (``capture``) that are not ints: its ``i + 1`` raises TypeError as it
    #: builds the drafter (vLLM; {key}, {value}). None: not this engine's way.
    ids_not_int: Event | None = None
    #: Whether ``own_embedding`` comes with a ``mask_embedding`` parameter (vLLM's) or not (SGLang's Nemotron 3.5),
    #: and whether an own embedding no tensor fills is kept as built (SGLang's Nemotron 3.5: random) rather than
    #: replaced by the target's (vLLM).
    mask_embedding: bool = True
    own_embedding_kept: bool = False
    #: A config key whose true value makes the layers refuse to build under the default draft attention backend
    #: ({key}; SGLang's Nemotron 3.5 sinks: trtllm_mha only). None: no such key.
    sink_backend: tuple[str, Event] | None = None
    #: Layouts built differently, the first that applies replacing these rules' fields.
    variants: tuple[Variant, ...] = ()
