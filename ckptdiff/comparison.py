"""Two checkpoints (+ profile, policy, optional base) → a Report. Pure: decides, never prints or fetches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .checkpoint import Checkpoint, TensorInfo
from .policy import Policy, apply_event_policy, apply_policy
from .profiles import AUTO, Profile, detect_profile, get_profile
from .profiles.base_layouts import recognise, wanted_groups
from .profiles.naming import RenameRule, convention_findings, name_side, parse_rename, suggest_counterparts
from .report import (
    ConfigDiff,
    EngineResult,
    Finding,
    Report,
    SideSummary,
    Status,
    TensorRow,
    TensorSide,
    make_rows,
)

#: config.json keys that record who wrote the file, not what the model is.
PROVENANCE_KEYS = frozenset({"transformers_version", "_name_or_path", "_commit_hash"})


def compare_specs(
    a: str,
    b: str | None,
    *,
    profile: str = AUTO,
    policy: Policy | None = None,
    base: str | None = None,
    source_options: Any = None,
    values: bool = False,
    notify: Callable[[str], None] | None = None,
    renames: Sequence[str | RenameRule] = (),
    engines: Sequence[str] = (),
    values_options: Any = None,
) -> Report:
    """Resolve two specs (and an optional base) through the sources, then compare them.

    With ``values``, tensor contents are compared too (:mod:`ckptdiff.values`, needs torch); ``notify``
    receives its announcements (downloads); ``values_options`` (a :class:`ckptdiff.values.ValuesOptions`) where
    the value pass runs and its progress hook. ``engines`` (``--engine``) replays those engines' drafter loaders on
    each side; with ``b`` None the one checkpoint is checked on its own against them.
    """
    from .sources import resolve, resolve_both
    from .sources.wanted import Wanted

    if b is None:
        side = resolve(a, source_options)
        base_checkpoint = resolve(base, source_options, wanted=set()) if base is not None else None
        return check_checkpoint(side, engines=engines, policy=policy, base=base_checkpoint)
    side_a, side_b = resolve_both(a, b, source_options)
    chosen = choose_profile(profile, side_a, side_b)
    base_checkpoint = None
    if base is not None:
        roles = chosen.base_roles(side_a.config, side_b.config) if chosen else None
        wanted = Wanted(wanted_groups(roles)) if roles else None
        base_checkpoint = resolve(base, source_options, wanted=wanted)
    report = compare_checkpoints(
        side_a, side_b, profile=chosen, policy=policy, base=base_checkpoint, renames=renames, engines=engines
    )
    if values:
        from .values import attach_values

        report = attach_values(
            report,
            side_a,
            side_b,
            base=base_checkpoint,
            profile=chosen,
            offline=getattr(source_options, "offline", False),
            progress=getattr(source_options, "progress", False),
            notify=notify,
            options=values_options,
        )
    return report


def simulate_engines(
    engines: Sequence[str], sides: Sequence[tuple[str, Checkpoint]], base: Checkpoint | None, policy: Policy
) -> tuple[EngineResult, ...]:
    """Each requested engine's loader replayed on each side (in that order), with the policy's --allow-event."""
    if not engines:
        return ()
    from .engines import engine_names, get_engine
    from .engines.simulate import simulate

    base_config = base.config if base is not None else None
    results = [
        simulate(get_engine(name), checkpoint, label, base_config)
        for name in engine_names(engines)
        for label, checkpoint in sides
    ]
    return apply_event_policy(policy, results)


def check_checkpoint(
    checkpoint: Checkpoint, *, engines: Sequence[str], policy: Policy | None = None, base: Checkpoint | None = None
) -> Report:
    """One checkpoint on its own (no B): what each engine's loader does with it."""
    policy = policy or Policy()
    return Report(
        a=SideSummary.of(checkpoint),
        b=None,
        tensors=(),
        base=SideSummary.of(base) if base is not None else None,
        policy=policy,
        engines=simulate_engines(engines, [("A", checkpoint)], base, policy),
    )


def choose_profile(name: str, a: Checkpoint, b: Checkpoint) -> Profile | None:
    if name == AUTO:
        return detect_profile(a.config, b.config)
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
) -> Report:
    """Compare two checkpoints. ``renames`` (``--rename REGEX=REPLACEMENT``) and the profile's canonical naming
    apply to both sides before tensors are matched; rows keep each side's own name."""
    policy = policy or Policy()
    rules = [r if isinstance(r, RenameRule) else parse_rename(r) for r in renames]
    named_a, named_b = name_side(a, "A", profile, rules), name_side(b, "B", profile, rules)
    rows = suggest_counterparts(_tensor_rows(named_a.tensors, named_b.tensors, profile, a.config, b.config))
    findings = list(_config_findings(a, b)) + convention_findings(named_a, named_b)
    if profile is not None:
        rows, profile_findings = profile.findings(a, b, rows, base)
        # with --engine, what engines do is told by their events, not in the findings' prose
        findings += profile.engine_view(profile_findings) if engines and profile.engine_view else profile_findings
    rows, ignored = apply_policy(policy, rows)
    config_diffs = tuple(diff_configs(a.config, b.config)) if a.config is not None and b.config is not None else ()
    return Report(
        a=SideSummary.of(a),
        b=SideSummary.of(b),
        tensors=rows,
        config=config_diffs,
        findings=tuple(findings),
        profile=profile.name if profile else None,
        base=SideSummary.of(base, layout=recognise(base.config, base.tensors.keys())) if base is not None else None,
        policy=policy,
        ignored=ignored,
        engines=simulate_engines(engines, [("A", a), ("B", b)], base, policy),
    )


def _tensor_rows(
    a: Mapping[str, TensorInfo],
    b: Mapping[str, TensorInfo],
    profile: Profile | None,
    config_a: Mapping[str, Any] | None = None,
    config_b: Mapping[str, Any] | None = None,
) -> list[TensorRow]:
    """One row per name of either side, sorted by name. One pass that touches each tensor once (a Kimi-K2 pair
    has 140 k rows: memory traffic, not the interpreter, is the cost), the rows then built column-wise."""
    names = sorted(a) if a.keys() == b.keys() else sorted(a.keys() | b.keys())  # the sort is cheaper on dict order
    shared: dict[tuple[tuple[int, ...], str], TensorSide] = {}  # immutable, so rows share them: ~30 in 140 k rows

    def side_of(info: TensorInfo | None, name: str) -> TensorSide | None:
        if info is None:
            return None
        if info.name != name:  # matched under another name: the side shows its own
            return TensorSide(info.shape, info.dtype, info.name)
        key = (info.shape, info.dtype)
        found = shared.get(key)
        if found is None:
            found = shared[key] = TensorSide(*key)
        return found

    sides_a: list[TensorSide | None] = []
    sides_b: list[TensorSide | None] = []
    statuses: list[Status] = []
    notes: list[str | None] = []
    for name, ta, tb in zip(names, map(a.get, names), map(b.get, names)):
        status: Status = "match"
        note = None
        if ta is not None and tb is not None and ta.shape == tb.shape and ta.dtype == tb.dtype:  # the common case
            if ta.name == name == tb.name:
                side_a = side_b = shared.get((ta.shape, ta.dtype)) or side_of(ta, name)
            else:
                side_a, side_b = side_of(ta, name), side_of(tb, name)
        else:
            side_a, side_b = side_of(ta, name), side_of(tb, name)
            if ta is not None and tb is not None:
                status, note = _pair_status(ta, tb)
            else:
                injected = profile.injected_weight(name, config_b if ta else config_a) if profile else None
                if injected is not None:
                    status, note = "injected", injected.note
                else:
                    status = "only_in_a" if ta else "only_in_b"
        sides_a.append(side_a)
        sides_b.append(side_b)
        statuses.append(status)
        notes.append(note)
    return make_rows(names, statuses, sides_a, sides_b, notes)


def _pair_status(a: TensorInfo, b: TensorInfo) -> tuple[Status, str | None]:
    if a.shape != b.shape:
        if len(a.shape) != len(b.shape):
            note = f"rank {len(a.shape)} vs {len(b.shape)}"
        else:
            dims = [f"dim {i}: {x} vs {y}" for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
            note = "; ".join(dims)
        if a.dtype != b.dtype:
            note += f"; dtype {a.dtype} vs {b.dtype}"
        return "shape_mismatch", note
    if a.dtype != b.dtype:
        return "dtype_mismatch", f"dtype {a.dtype} vs {b.dtype}"
    return "match", None


def _config_findings(a: Checkpoint, b: Checkpoint) -> Iterator[Finding]:
    for label, side in (("A", a), ("B", b)):
        if side.config is None:
            yield Finding("info", "config_missing", f"{label} ({side.spec}) has no config.json; configs not compared")


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
