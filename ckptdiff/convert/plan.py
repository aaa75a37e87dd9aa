"""The conversion plan: every output tensor with the input tensor it comes from and how, and the config.json patch.

Built from SRC's headers and config alone (and BASE's, for ``--base``), before a byte is written. Nothing is
invented: each output tensor names one input tensor (SRC's, or BASE's embedding for ``--embed base``); a
parameter the target engine needs that no input tensor fills fails the plan, found by replaying the engine's
loader (:mod:`ckptdiff.families.eagle3.engines`) on the planned output, the same replay ``ckptdiff OUT --engine`` runs.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..base_layouts import Resolved, recognise, text_config
from ..checkpoint import Checkpoint, TensorInfo
from ..dtypes import DTYPE_BITS
from ..errors import CkptdiffError, printable_name, quoted_name
from ..families.eagle3.spec import DrafterSpec, lookup
from ..naming import RenameRule
from ..report import EngineResult
from .layout import ShardLayout, lay_out
from .targets import LLAMA, MLA, QWEN3, SOURCE_AUX_CONVENTIONS, TargetLayout, output_name, parse_name

Embed = Literal["base", "drop", "keep"]
#: The drafter family convert writes (its rules, :mod:`ckptdiff.families.eagle3`, are the ones replayed).
FAMILY = "eagle3"
#: The canonical name of the drafter's embedding.
EMBED = "embed_tokens.weight"
#: Parameter fates that mean "no tensor fills it and nothing else does": a needed tensor without a source.
UNFILLED = ("random", "missing")
#: Config keys of the speculators format that a flattened config no longer has.
SPECULATORS_KEYS = ("speculators_model_type", "speculators_version", "speculators_config", "transformer_layer_config")


#: numpy's spelling of the dtypes a d2t can come in (little-endian, as safetensors stores them).
NUMPY_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "bfloat16",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
}


class ConvertRefused(CkptdiffError):
    """A plan convert will not carry out (a rename that collides, OUT inside SRC, ...): one line, exit 2."""


@dataclass(frozen=True)
class Origin:
    """The input tensor an output tensor is made from."""

    side: Literal["source", "base"]
    tensor: TensorInfo


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str  # the output shard
    origin: Origin
    #: What is done on the way: "copy" (same name and bytes), "rename", "cast" (d2t to the engine's dtype).
    transforms: tuple[str, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BITS[self.dtype] // 8


@dataclass(frozen=True)
class ConfigChange:
    key: str  # dotted
    old: Any
    new: Any
    removed: bool
    why: str


@dataclass(frozen=True)
class Left:
    """An input tensor not written, and why."""

    name: str
    why: str


@dataclass
class Plan:
    engine: str
    label: str
    source: Checkpoint
    base: Checkpoint | None
    embed: Embed
    tensors: list[PlannedTensor]
    left: list[Left]
    config: dict[str, Any]
    changes: list[ConfigChange]
    shards: ShardLayout
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Engine warning codes --allow-event accepts.
    allowed_events: tuple[str, ...] = ()
    #: The engine's loader replayed on the planned output (None: the plan failed before it could be).
    check: EngineResult | None = None
    engine_proven: bool = True
    #: Why no engine has loaded this kind of output here, when none has.
    unproven_why: str = "no pinned loader here"
    tokenizer: Any = None  # a TokenizerCheck, when one ran
    #: The drafter family whose rules replay the engine on the output.
    family: str = FAMILY

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def layer_kind(spec: DrafterSpec, names: Sequence[str]) -> str:
    if spec.attention == "mla":
        return MLA
    if any(parse_name(n).rest.startswith("self_attn.q_norm.") for n in names):
        return QWEN3
    return LLAMA


def build_plan(
    source: Checkpoint,
    layout: TargetLayout,
    *,
    base: Checkpoint | None = None,
    embed: Embed | None = None,
    renames: Sequence[RenameRule] = (),
    max_shard_size: int | None = None,
    allow_tokenizer_change: bool = False,
    allowed_events: Sequence[str] = (),
) -> Plan:
    """The plan for converting ``source`` into ``layout``'s checkpoint (``base``: the model it will serve)."""
    if source.config is None:
        raise ConvertRefused(source.spec, "has no config.json: there is nothing to say which drafter this is")
    if any(not info.file.endswith(".safetensors") for info in source.tensors.values()):
        raise ConvertRefused(source.spec, "is not a safetensors checkpoint: convert reads and writes safetensors")
    names = [renamed(name, renames) for name in source.tensors]
    config, changes = _flattened(source.config)
    spec = DrafterSpec.of(config)
    kind = layer_kind(spec, names)
    layers = 1 + max((p.layer for p in map(parse_name, names) if p.layer is not None), default=0)
    problems: list[str] = []
    warnings: list[str] = []

    has_embed = any(parse_name(n) == parse_name(EMBED) for n in names)
    chosen: Embed = embed or ("keep" if has_embed else "drop")
    resolved = recognise(base.config, base.tensors.keys()) if base is not None else None
    if chosen == "base" and base is None:
        raise ConvertRefused("--embed base", "needs --base: the model whose embedding is grafted")
    if chosen == "keep" and not has_embed:
        raise ConvertRefused(source.spec, f"--embed keep: has no {EMBED} to keep (--embed drop, or base with --base)")

    planned: dict[str, PlannedTensor] = {}
    left: list[Left] = []
    original_of: dict[str, str] = {}
    for (original, info), name in zip(source.tensors.items(), names):
        parsed = parse_name(name)
        if parsed == parse_name(EMBED) and chosen != "keep":
            why = "replaced by the base's embedding" if chosen == "base" else "dropped: the engine injects the base's"
            left.append(Left(original, why))
            continue
        out = output_name(parsed, layout, layers)
        if out in planned:
            both = f"both {quoted_name(original_of[out])} and {quoted_name(original)}"
            raise ConvertRefused(source.spec, f"{both} would be written as {quoted_name(out)}: not converted")
        original_of[out] = original
        transforms: list[str] = [] if out == original else ["rename"]
        dtype = info.dtype
        if parsed.layer is None and parsed.rest == "d2t" and dtype not in layout.d2t_dtypes:
            if dtype not in NUMPY_DTYPES:  # BOOL, F8, F4: no offsets; refused before OUT.partial is made
                raise ConvertRefused(
                    source.spec, f"d2t is {dtype}: its offsets cannot be cast from it to {layout.d2t_cast}"
                )
            dtype = layout.d2t_cast
            transforms.append("cast")
        planned[out] = PlannedTensor(
            out, dtype, info.shape, info.file, Origin("source", info), tuple(transforms) or ("copy",)
        )

    if chosen == "base":
        assert base is not None and resolved is not None
        grafted = _base_embedding(source, base, resolved, spec)
        if grafted is not None:
            last = sorted({info.file for info in source.tensors.values()})[-1]
            planned[EMBED] = PlannedTensor(
                EMBED, grafted.dtype, grafted.shape, last, Origin("base", grafted), ("graft",)
            )
        else:
            problems.append(f"--embed base: {printable_name(base.spec)} stores no embedding ckptdiff knows the name of")

    _patch_config(config, changes, spec, layout, kind, planned, base, resolved, problems, warnings)
    if kind not in layout.architectures:
        problems.append(
            f"{layout.label} has no EAGLE-3 class for {kind} decoder layers ({layout.registry}): nothing would load"
            " this drafter"
        )
    if base is not None:
        _check_vocabulary(spec, base, resolved, allow_tokenizer_change, problems)

    tensors, shards = laid_out(list(planned.values()), max_shard_size)
    plan = Plan(
        engine=layout.engine,
        label=layout.label,
        source=source,
        base=base,
        embed=chosen,
        tensors=tensors,
        left=left,
        config=config,
        changes=changes,
        shards=shards,
        problems=problems,
        warnings=warnings,
        engine_proven=layout.engine_proven,
        allowed_events=tuple(allowed_events),
    )
    if not problems:
        plan.check = replay_engine(plan)
        judge(plan, allowed_events)
    return plan


def laid_out(tensors: Sequence[PlannedTensor], max_shard_size: int | None) -> tuple[list[PlannedTensor], ShardLayout]:
    """The planned tensors placed in their output shards (each tensor's ``file`` the one it is written to)."""
    shards = lay_out(tensors, max_shard_size)
    return [replace(t, file=shards.file_of[t.name]) for t in tensors], shards


def renamed(original: str, renames: Sequence[RenameRule]) -> str:
    name = original
    for rule in renames:
        name = rule.apply(name)
    if not name and original:
        raise ConvertRefused(renames[-1].where, "turns a tensor name into an empty one")
    return name


def _flattened(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[ConfigChange]]:
    """A copy of the config; a speculators-format config's layer settings moved to the top level, where every
    engine's plain EAGLE-3 loader reads them."""
    out = copy.deepcopy(dict(config))
    changes: list[ConfigChange] = []
    inner = out.get("transformer_layer_config")
    if "speculators_model_type" not in out or not isinstance(inner, Mapping):
        return out, changes
    for key, value in inner.items():
        if key == "architectures" or key in out:
            continue
        out[key] = copy.deepcopy(value)
        changes.append(ConfigChange(key, None, value, False, "from transformer_layer_config (speculators format)"))
    for key in SPECULATORS_KEYS:
        if key in out:
            changes.append(ConfigChange(key, out.pop(key), None, True, "the speculators format, flattened"))
    return out, changes


def set_key(config: dict[str, Any], changes: list[ConfigChange], key: str, value: Any, why: str) -> None:
    holder = config
    *parents, last = key.split(".")
    for part in parents:
        nested = holder.get(part)
        if not isinstance(nested, dict):
            nested = holder[part] = {}
        holder = nested
    old = holder.get(last)
    if old != value or last not in holder:
        holder[last] = value
        changes.append(ConfigChange(key, old, value, False, why))


def _remove(config: dict[str, Any], changes: list[ConfigChange], key: str, why: str) -> None:
    holder: Any = config
    *parents, last = key.split(".")
    for part in parents:
        holder = holder.get(part) if isinstance(holder, dict) else None
    if isinstance(holder, dict) and last in holder:
        changes.append(ConfigChange(key, holder.pop(last), None, True, why))


def trained_outputs(config: Mapping[str, Any]) -> tuple[tuple[int, ...] | None, list[str]]:
    """The target-layer outputs the drafter's fc was trained on, from wherever its config keeps aux ids (each
    location in the convention of the engine that reads it there); conflicting locations are a problem."""
    found: dict[str, tuple[int, ...]] = {}
    for convention in SOURCE_AUX_CONVENTIONS:
        ids = lookup(config, convention.key)
        if isinstance(ids, list) and ids and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            found[convention.key] = tuple(i + convention.offset for i in ids)
    if not found:
        return None, []
    first_key, first = next(iter(found.items()))
    problems = [
        f"config.json: {key} names target-layer outputs {list(outputs)}, but {first_key} names {list(first)}: "
        "which layers the drafter was trained on is unclear"
        for key, outputs in found.items()
        if outputs != first
    ]
    return first, problems


def _patch_config(
    config: dict[str, Any],
    changes: list[ConfigChange],
    spec: DrafterSpec,
    layout: TargetLayout,
    kind: str,
    planned: Mapping[str, PlannedTensor],
    base: Checkpoint | None,
    resolved: Resolved | None,
    problems: list[str],
    warnings: list[str],
) -> None:
    if kind in layout.architectures:
        set_key(config, changes, "architectures", [layout.architectures[kind]], f"{layout.label}'s EAGLE-3 class")
        set_key(config, changes, "model_type", layout.model_types[kind], f"what {layout.label}'s class is built from")
    d2t = planned.get("d2t")
    head = planned.get("lm_head.weight")
    draft_vocab = d2t.shape[0] if d2t is not None and d2t.shape else head.shape[0] if head is not None else None
    if draft_vocab is not None:
        set_key(config, changes, "draft_vocab_size", draft_vocab, "the draft vocabulary: d2t's length (lm_head's rows)")
    outputs, conflicts = trained_outputs(config)
    problems.extend(conflicts)
    if outputs is not None and layout.aux is not None:
        ids = [o - layout.aux.offset for o in outputs]
        why = f"the trained target-layer outputs {list(outputs)}, where and as {layout.label} reads them"
        set_key(config, changes, layout.aux.key, ids, why)
        for key in layout.foreign_aux_keys:
            if key != layout.aux.key:
                _remove(config, changes, key, f"another engine's convention; {layout.label} would misread it")
    elif outputs is not None:
        warnings.append(
            f"{layout.label} does not read aux-layer ids from the drafter's config: set the serving setting "
            f"eagle3_layers_to_capture to {list(outputs)} (the target-layer outputs the drafter was trained on)"
        )
    if base is not None:
        text = text_config(base.config, resolved.layout if resolved else None)
        hidden, positions = text.get("hidden_size"), text.get("max_position_embeddings")
        if isinstance(hidden, int):
            set_key(config, changes, "target_hidden_size", hidden, f"{printable_name(base.spec)}'s hidden size")
        if isinstance(positions, int):
            set_key(
                config, changes, "max_position_embeddings", positions, f"{printable_name(base.spec)}'s context length"
            )


def _base_embedding(source: Checkpoint, base: Checkpoint, resolved: Resolved, spec: DrafterSpec) -> TensorInfo | None:
    if resolved.embedding is None or resolved.embedding not in base.tensors:
        return None
    info = base.tensors[resolved.embedding]
    want = (spec.vocab_size, spec.hidden_size)
    if None not in want and info.shape != want:
        raise ConvertRefused(
            base.spec,
            f"{printable_name(resolved.embedding)} is {list(info.shape)} but the drafter takes "
            f"[vocab_size, hidden_size] = {list(want)}: not grafted",
        )
    return info


def _check_vocabulary(
    spec: DrafterSpec, base: Checkpoint, resolved: Resolved | None, allow: bool, problems: list[str]
) -> None:
    vocab = text_config(base.config, resolved.layout if resolved else None).get("vocab_size")
    if isinstance(vocab, int) and spec.vocab_size is not None and vocab != spec.vocab_size and not allow:
        problems.append(
            f"{printable_name(base.spec)} has vocab_size {vocab}, the drafter {spec.vocab_size}: its d2t maps into "
            "another vocabulary (--allow-tokenizer-change to convert anyway)"
        )


def virtual_checkpoint(plan: Plan) -> Checkpoint:
    """The planned output as ckptdiff would read it back: names, dtypes, shapes, files, offsets and config."""
    tensors = {t.name: TensorInfo(t.name, t.dtype, t.shape, t.file, plan.shards.offsets[t.name]) for t in plan.tensors}
    return Checkpoint(spec="OUT", kind="local", location="OUT", revision=None, tensors=tensors, config=plan.config)


def replay_engine(plan: Plan, checkpoint: Checkpoint | None = None) -> EngineResult:
    """The target engine's loader replayed on the planned output (or on ``checkpoint``, the written one)."""
    from ..families import simulate

    base_config = plan.base.config if plan.base is not None else None
    return simulate(plan.family, plan.engine, checkpoint or virtual_checkpoint(plan), "A", base_config)


def engine_problems(result: EngineResult, written: Sequence[str], allowed: Sequence[str] = ()) -> list[str]:
    """What keeps the engine from loading the output as trained: an error it raises, a parameter nothing fills
    (it would stay random or be missing), a written tensor it does not load, a warning (it loads, but not as
    trained) whose code ``allowed`` (``--allow-event``) does not name."""
    from ..formats.messages import event_message

    problems = [f"{result.engine}: {event_message(event)}" for event in result.events if event.severity == "error"]
    unfilled = [name for name, fate in result.parameters if fate in UNFILLED]
    if unfilled:
        problems.append(
            f"{result.engine} needs {', '.join(map(printable_name, unfilled))}, and no input tensor provides "
            f"{'it' if len(unfilled) == 1 else 'them'} (nothing is invented)"
        )
    fates = {name: fate for name, fate, _ in result.tensors}
    warned = {event.tensor for event in result.events if event.severity != "info" and event.tensor}
    lost = [n for n in written if fates.get(n) in ("skipped", "error") and n in warned]
    if lost:
        problems.append(
            f"{result.engine} would not load {', '.join(map(printable_name, lost))}: the weight would be lost"
        )
    problems += [
        f"{result.engine} [{event.code}]: {event_message(event)} (--allow-event {event.code} accepts it)"
        for event in result.events
        if event.severity == "warning" and event.code not in allowed and event.tensor not in lost
    ]
    return problems


def judge(plan: Plan, allowed: Sequence[str]) -> None:
    from ..formats.messages import event_message

    assert plan.check is not None
    plan.problems.extend(engine_problems(plan.check, [t.name for t in plan.tensors], allowed))
    for event in plan.check.events:
        if event.severity == "warning" and event.code in allowed:
            plan.warnings.append(f"{plan.engine} [{event.code}], accepted by --allow-event: {event_message(event)}")
    # an accepted code the check never raised allowed nothing: a typo of another, or a rule left from another run
    raised = {event.code for event in plan.check.events}
    for code in dict.fromkeys(allowed):
        if code not in raised:
            plan.warnings.append(f"--allow-event {code}: {plan.engine}'s check raised no such event (allowed nothing)")
