"""Two checkpoints (+ profile, policy, optional base) → a Report. Pure: decides, never prints or reads sources."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec

from .checkpoint import Checkpoint, HeaderTensors, TensorInfo
from .families import AUTO, NONE, detect_family, get_profile
from .naming import RenameRule, convention_findings, name_side, parse_rename, suggest_counterparts
from .policy import Policy, apply_event_policy, apply_policy, idle_rule_findings
from .report import (
    ConfigDiff,
    EngineResult,
    Finding,
    Layout,
    NotePart,
    Report,
    SideSummary,
    Status,
    TensorRow,
    TensorSide,
)
from .safetensors_header import TensorEntry

if TYPE_CHECKING:
    from .families.model import Profile

#: What a row is built from: a header entry as decoded, or a tensor (whose own name may differ from its key).
Record = TensorEntry | TensorInfo
#: config.json keys that record who wrote the file, not what the model is.
PROVENANCE_KEYS = frozenset({"transformers_version", "_name_or_path", "_commit_hash"})


#: The family whose loaders replay a checkpoint no family claims (they say why it is not one of theirs).
FALLBACK_FAMILY = "eagle3"


def simulate_engines(
    engines: Sequence[str],
    sides: Sequence[tuple[str, Checkpoint]],
    base: Checkpoint | None,
    policy: Policy,
    family: str | None = None,
) -> tuple[EngineResult, ...]:
    """Each requested engine's loader replayed on each side (in that order), with the policy's --allow-event.
    ``family``: the drafter family to replay (None: each side's detected family)."""
    if not engines:
        return ()
    from .families import simulate
    from .families.engines import engine_names

    base_config = base.config if base is not None else None
    served = [
        (label, checkpoint, chosen, engine_names(tuple(engines), chosen))
        for label, checkpoint in sides
        for chosen in [family or detect_family(checkpoint.config) or FALLBACK_FAMILY]
    ]
    order = list(dict.fromkeys(name for *_, names in served for name in names))
    results = [
        simulate(chosen, name, checkpoint, label, base_config)
        for name in order
        for label, checkpoint, chosen, names in served
        if name in names
    ]
    return apply_event_policy(policy, results)


def check_checkpoint(
    checkpoint: Checkpoint,
    *,
    engines: Sequence[str],
    policy: Policy | None = None,
    base: Checkpoint | None = None,
    command: str | None = None,
    tool_version: str = "",
    profile: str = AUTO,
) -> Report:
    """One checkpoint on its own (no B): what each engine's loader does with it, served as a drafter of its
    detected family (``profile``: a family's name forces it)."""
    policy = policy or Policy(flags=True)  # none given: the CLI's default (compare() passes a Policy of its own)
    family = None if profile in (AUTO, NONE) else profile
    results = simulate_engines(engines, [("A", checkpoint)], base, policy, family)
    served = family or (detect_family(checkpoint.config) if profile == AUTO else None)
    chosen = get_profile(served) if served is not None else None
    variants = chosen.variants_of(checkpoint.config, checkpoint.tensors.keys()) if chosen is not None else ()
    alone = chosen.review_alone if chosen is not None else None
    report = Report(
        a=SideSummary.of(checkpoint, variants=variants),
        b=None,
        tensors=(),
        findings=tuple(alone(checkpoint, base)) if alone is not None else (),
        base=SideSummary.of(base) if base is not None else None,
        engines=results,
        **_policy_fields(policy),
        command=command,
        tool_version=tool_version,
    )
    idle = idle_rule_findings(policy, (), report.rule_hits, engines_run=bool(results))
    return replace(report, findings=(*report.findings, *idle)) if idle else report


def _policy_fields(policy: Policy) -> dict[str, Any]:
    """The policy as a report records it: its rules by reference, and what fails the gate."""
    return {
        "rules": policy.rules,
        "fail_on": policy.fail_on,
        "fail_on_origin": policy.origin("fail_on"),
        "fail_on_conditional": policy.fail_on_conditional,
        "policy_in_python": not policy.flags,
    }


def choose_profile(name: str, a: Checkpoint, b: Checkpoint) -> Profile | None:
    if name == AUTO:
        detected = detect_family(a.config, b.config)
        return get_profile(detected) if detected is not None else None
    return get_profile(name)


def compare_checkpoints(
    a: Checkpoint,
    b: Checkpoint,
    *,
    profile: Profile | None = None,
    policy: Policy | None = None,
    base: Checkpoint | None = None,
    renames: Sequence[str | RenameRule] = (),
    engines: Sequence[str] = (),
    command: str | None = None,
    tool_version: str = "",
) -> Report:
    """Compare two checkpoints. ``renames`` (``--rename REGEX=REPLACEMENT``) and the profile's canonical naming
    apply to both sides before tensors are matched; rows keep each side's own name."""
    policy = policy or Policy(flags=True)  # none given: the CLI's default (compare() passes a Policy of its own)
    rules = [r if isinstance(r, RenameRule) else parse_rename(r) for r in renames]
    named_a, named_b = name_side(a, "A", profile, rules), name_side(b, "B", profile, rules)
    rows = suggest_counterparts(_tensor_rows(named_a.tensors, named_b.tensors, profile, a.config, b.config))
    findings = list(_config_findings(a, b)) + convention_findings(named_a, named_b)
    if profile is not None:
        rows, profile_findings = profile.findings(a, b, rows, base)
        # with --engine, what engines do is told by their events, not in the findings' prose
        findings += profile.engine_view(profile_findings) if engines and profile.engine_view else profile_findings
    rows, ignored = apply_policy(policy, rows)
    if not policy.allow_empty and not any(row.compared for row in rows):
        params = {"tensors_a": len(a.tensors), "tensors_b": len(b.tensors), "ignored": sum(n for _, n in ignored)}
        findings.append(Finding("error", "nothing_compared", params=params))
    config_diffs = tuple(diff_configs(a.config, b.config)) if a.config is not None and b.config is not None else ()
    layout = None
    if base is not None:
        from .base_layouts import recognise  # base layouts load only for a run with a base

        resolved = recognise(base.config, base.tensors.keys())
        layout = msgspec.convert(resolved.to_dict(), Layout) if resolved is not None else None
    results = simulate_engines(engines, [("A", a), ("B", b)], base, policy, profile.name if profile else None)
    report = Report(
        a=SideSummary.of(a, variants=profile.variants_of(a.config, a.tensors.keys()) if profile else ()),
        b=SideSummary.of(b, variants=profile.variants_of(b.config, b.tensors.keys()) if profile else ()),
        tensors=rows,
        config=config_diffs,
        findings=tuple(findings),
        profile=profile.name if profile else None,
        base=SideSummary.of(base, layout=layout) if base is not None else None,
        ignored=ignored,
        engines=results,
        **_policy_fields(policy),
        command=command,
        tool_version=tool_version,
    )
    idle = idle_rule_findings(policy, rows, report.rule_hits, engines_run=bool(results))
    return replace(report, findings=(*report.findings, *idle)) if idle else report


def _tensor_rows(
    a: Mapping[str, TensorInfo],
    b: Mapping[str, TensorInfo],
    profile: Profile | None,
    config_a: Mapping[str, Any] | None = None,
    config_b: Mapping[str, Any] | None = None,
) -> list[TensorRow]:
    """One row per name of either side, sorted by name, in one pass that touches each tensor once (a Kimi-K2
    pair has 140 k rows: memory traffic, not the interpreter, is the cost).

    A side read from safetensors headers is compared on its header entries as decoded (no object is built per
    tensor); a matched pair whose shape and dtype agree shares one :class:`TensorSide`.
    """
    records_a, named_a = _records(a)
    records_b, named_b = _records(b)
    if records_a is records_b:  # B's tensors are A's very entries (sources.shared_shards): every row matches
        return _matching_rows(records_a, sorted(records_a))
    # A's entries shard by shard, in their own (memory) order, each looked up first in B's same-named shard (a
    # pair of one layout stores its names alike; a small map is a cache's): lookups in sorted order over the
    # merged maps cost three times as much. The rows are sorted by name after.
    rows: list[TensorRow] = []
    append = rows.append
    get_b = records_b.get
    only_in_a = 0
    for records, near_b in _shard_pairs(a, b, records_a):
        get_near = get_b if near_b is None else near_b.get
        for name, ta in records.items():
            tb = get_near(name)
            if tb is None and near_b is not None:
                tb = get_b(name)
            if tb is not None:
                own_a = ta.name if named_a and ta.name != name else None  # type: ignore[union-attr]
                own_b = tb.name if named_b and tb.name != name else None  # type: ignore[union-attr]
                # one object on both sides: B's shard header was byte-identical to A's (sources.shared_shards)
                if (ta is tb or (ta.shape == tb.shape and ta.dtype == tb.dtype)) and own_a == own_b:  # common case
                    side = TensorSide(ta.shape, ta.dtype, own_a)
                    append(TensorRow(name, "match", side, side))
                    continue
                side_a, side_b = TensorSide(ta.shape, ta.dtype, own_a), TensorSide(tb.shape, tb.dtype, own_b)
                status, notes = _pair_status(ta, tb)
                append(TensorRow(name, status, side_a, side_b, notes))
                continue
            only_in_a += 1
            append(_one_side_row(name, _side(ta, name, named_a), None, profile, config_b))
    if len(rows) - only_in_a != len(records_b):  # B has names A has not
        for name, tb in records_b.items():
            if name not in records_a:
                append(_one_side_row(name, None, _side(tb, name, named_b), profile, config_a))
    rows.sort(key=_ROW_NAME)
    return rows


_ROW_NAME = attrgetter("name")


def _shard_pairs(
    a: Mapping[str, TensorInfo], b: Mapping[str, TensorInfo], records_a: Mapping[str, Record]
) -> list[tuple[Mapping[str, Record], Mapping[str, Record] | None]]:
    """A's records in groups, each with the map of B's where its names are likeliest (None: B's whole map): per
    shard and B's same-named shard when both sides are read from headers, else all of A with none."""
    if isinstance(a, HeaderTensors) and isinstance(b, HeaderTensors):
        near = {file: header.tensors for file, header in b.shards}
        return [(header.tensors, near.get(file)) for file, header in a.shards]
    return [(records_a, None)]


def _one_side_row(
    name: str,
    only_a: TensorSide | None,
    only_b: TensorSide | None,
    profile: Profile | None,
    other_config: Mapping[str, Any] | None,
) -> TensorRow:
    """The row of a name only one side stores: injected (from the base, by the profile), or only on that side.
    ``other_config`` is the config of the side that lacks it."""
    injected = profile.injected_weight(name, other_config) if profile else None
    if injected is not None:
        note = NotePart("injected", how=injected.how, name=injected.base_name)
        return TensorRow(name, "injected", only_a, only_b, (note,))
    return TensorRow(name, "only_in_a" if only_a is not None else "only_in_b", only_a, only_b)


def _matching_rows(records: Mapping[str, Record], names: list[str]) -> list[TensorRow]:
    """A matching row per name, one side shared by A and B, built by C-level passes (no interpreted loop)."""
    found = list(map(records.__getitem__, names))
    sides = list(map(TensorSide, map(attrgetter("shape"), found), map(attrgetter("dtype"), found)))
    match: Status = "match"
    return list(map(TensorRow, names, repeat(match), sides, sides))


def _records(tensors: Mapping[str, TensorInfo]) -> tuple[Mapping[str, Record], bool]:
    """What rows are built from: a header-read side's entries as decoded (stored under their own names), or
    the tensors (whose ``name`` may differ from the key they are matched under); and whether names may differ."""
    if isinstance(tensors, HeaderTensors):
        return tensors.entries, False
    return tensors, True


def _side(record: Record, name: str, named: bool) -> TensorSide:
    own = record.name if named and record.name != name else None  # type: ignore[union-attr]
    return TensorSide(record.shape, record.dtype, own)


def _pair_status(a: Record, b: Record) -> tuple[Status, tuple[NotePart, ...]]:
    dtype = (NotePart("dtype", a=a.dtype, b=b.dtype),) if a.dtype != b.dtype else ()
    if a.shape != b.shape:
        if len(a.shape) != len(b.shape):
            return "shape_mismatch", (NotePart("rank", a=len(a.shape), b=len(b.shape)), *dtype)
        dims = tuple(NotePart("dim", a=x, b=y, index=i) for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y)
        return "shape_mismatch", (*dims, *dtype)
    if dtype:
        return "dtype_mismatch", dtype
    return "match", ()


def _config_findings(a: Checkpoint, b: Checkpoint) -> Iterator[Finding]:
    for label, side in (("A", a), ("B", b)):
        if side.config is None:
            yield Finding("info", "config_missing", params={"side": label})


#: A key in a nested config.json: one component per level, so ``{"a.b": 1}`` and ``{"a": {"b": 1}}`` differ.
ConfigPath = tuple[str, ...]


def flatten_config(config: Mapping[str, Any], prefix: ConfigPath = ()) -> dict[ConfigPath, Any]:
    """Nested dicts become key paths; lists, scalars and empty dicts are leaf values."""
    flat: dict[ConfigPath, Any] = {}
    for key, value in config.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, path))
        else:
            flat[path] = value
    return flat


def same_config_value(a: Any, b: Any) -> bool:
    """JSON equality with types: ``true`` is not ``1``, ``1`` is ``1.0``, NaN is NaN (the same literal)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (a != a and b != b)  # NaN != NaN, but the same config value
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_config_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_config_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def diff_configs(a: Mapping[str, Any], b: Mapping[str, Any]) -> Iterator[ConfigDiff]:
    flat_a, flat_b = flatten_config(a), flatten_config(b)
    for path in sorted(flat_a.keys() | flat_b.keys()):
        if path[-1] in PROVENANCE_KEYS:
            continue
        if path not in flat_b:
            yield ConfigDiff(path, flat_a[path], None, "only_in_a")
        elif path not in flat_a:
            yield ConfigDiff(path, None, flat_b[path], "only_in_b")
        elif not same_config_value(flat_a[path], flat_b[path]):
            yield ConfigDiff(path, flat_a[path], flat_b[path], "differs")
