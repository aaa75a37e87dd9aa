"""EAGLE-3 drafters: one decoder layer on top of a frozen target model (SpecForge, EAGLE, speculators, vLLM, TRT-LLM).

What the serving engines do with a drafter checkpoint (facts from their loaders):

- names: SpecForge/EAGLE/ModelOpt write ``midlayer.*`` with no prefix; speculators writes ``layers.0.*``; vLLM
  renames ``midlayer.`` → ``layers.0.`` and prefixes ``model.`` to everything but ``lm_head``/``d2t``/``t2d``;
  TensorRT-LLM keeps ``midlayer.`` and prefixes ``model.``. The canonical naming here is SpecForge's.
- ``embed_tokens`` comes from the target's ``model.embed_tokens.weight`` when the drafter has none;
  ``lm_head`` comes from the target only when the drafter has no ``draft_vocab_size`` of its own (or from
  ``embed_tokens`` when embeddings are tied); ``d2t`` maps draft ids to target ids and is needed whenever the
  draft vocabulary is smaller than the target's.
- every other tensor's shape follows from the drafter's own config.json (:class:`.drafter.DrafterSpec`), for
  Llama-style and MLA attention and for every decoder layer.

Only what applies is checked: tensors this module has no rule for are compared generically.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from ...base_layouts import Found, Resolved, lookup, recognise
from ...checkpoint import Checkpoint
from ...dtypes import FLOAT_DTYPES
from ...report import Finding, NotePart, Severity, TensorRow, TensorSide
from ..model import Config, InjectedWeight, Profile
from .naming import canonical_name, naming_convention
from .shapes import shapes_of
from .spec import DrafterSpec, Setting, config_dtype, is_eagle3, layer_prefix
from .v1 import v1_checks, v1_engines, v1_problems

#: A max_position_embeddings at or below this clamps RoPE for ordinary prompts and collapses acceptance.
SMALL_MAX_POSITIONS = 4096


# --- Injected weights -------------------------------------------------------------------------------------

EMBED = InjectedWeight(
    name="embed_tokens.weight",
    base_name="model.embed_tokens.weight",
    how="embedding",
)
LM_HEAD = InjectedWeight(
    name="lm_head.weight",
    base_name="lm_head.weight",
    how="head",
    role="lm_head",
)
LM_HEAD_TIED = InjectedWeight(
    name="lm_head.weight",
    base_name="model.embed_tokens.weight",
    how="tied_head",
)


def injected_for(config: Config | None) -> tuple[InjectedWeight, ...]:
    """embed_tokens always; lm_head only when the drafter has no draft_vocab_size of its own."""
    if config is None or not is_eagle3(config):
        return (EMBED,)
    drafter = DrafterSpec.of(config)
    if drafter.draft_vocab is not None:
        return (EMBED,)
    return (EMBED, LM_HEAD_TIED if drafter.tied else LM_HEAD)


# --- The review -------------------------------------------------------------------------------------------


class _Findings:
    """Findings in order; the same finding for A and for B becomes one, with ``params["sides"]`` ["A", "B"].

    "The same" is decided by structure, (severity, code, subject, params): each finding's params hold everything
    its text is made of (the formats word it, :mod:`ckptdiff.families.eagle3.messages`).
    """

    def __init__(self) -> None:
        self._items: dict[tuple[Severity, str, str | None, str], tuple[list[str], dict[str, Any]]] = {}

    def add(
        self,
        severity: Severity,
        code: str,
        side: str | None = None,
        *,
        subject: str | None = None,
        params: dict[str, Any],
    ) -> None:
        key = (severity, code, subject, json.dumps(params, sort_keys=True))
        sides, _ = self._items.setdefault(key, ([], params))
        sides.extend([side] if side else [])

    def to_list(self) -> list[Finding]:
        """Errors first, then warnings, then information; otherwise in the order found."""
        rank = {"error": 0, "warning": 1, "info": 2}
        items = sorted(self._items.items(), key=lambda item: rank[item[0][0]])
        return [
            Finding(severity, code, subject=subject, params={**params, "sides": sides} if sides else params)
            for (severity, code, subject, _), (sides, params) in items
        ]


@dataclass(frozen=True)
class _Side:
    label: str
    checkpoint: Checkpoint
    tensors: dict[str, TensorSide]  # canonical name → as stored
    drafter: DrafterSpec | None  # None: no config.json, or not an EAGLE-3 one

    @property
    def dtype(self) -> str | None:
        """The drafter's dtype: config.json's torch_dtype, else its most common float dtype."""
        if self.drafter is not None and self.drafter.safetensors_dtype:
            return self.drafter.safetensors_dtype
        counts = Counter({d: p for d, (p, _) in self.checkpoint.dtype_totals().items() if d in FLOAT_DTYPES})
        return counts.most_common(1)[0][0] if counts else None


def review(
    a: Checkpoint, b: Checkpoint, rows: tuple[TensorRow, ...], base: Checkpoint | None
) -> tuple[tuple[TensorRow, ...], list[Finding]]:
    """EAGLE-3 findings for a comparison, and injected rows' notes completed with the base's verdict."""
    sides = tuple(
        _Side(
            label,
            checkpoint,
            {row.name: side for row in rows if (side := getattr(row, attr)) is not None},
            DrafterSpec.of(checkpoint.config) if checkpoint.config and is_eagle3(checkpoint.config) else None,
        )
        for label, attr, checkpoint in (("A", "a", a), ("B", "b", b))
    )
    found = _Findings()
    resolved = recognise(base.config, base.tensors.keys()) if base is not None else None
    base_embedding = (resolved.embedding if resolved else None) or EMBED.base_name
    for side in sides:
        _check_own_config(side, found, base_embedding)
    _check_between(sides[0], sides[1], found)
    verified: dict[str, tuple[NotePart, NotePart]] = {}  # row name → (its injected part for this base, the verdict)
    for side, other in (sides, sides[::-1]):
        _check_injected(side, other, base, resolved, found, verified)
    if base is not None and resolved is not None:
        if base.config is None and any(side.drafter is not None for side in sides):
            found.add("info", "base_config_missing", params={"base": base.spec})
        for side in sides:
            _check_against_base(side, base, resolved, found)
    if verified:
        rows = tuple(
            msgspec.structs.replace(row, notes=verified[row.name])
            if row.status == "injected" and row.name in verified
            else row
            for row in rows
        )
    return rows, found.to_list()


def review_alone(checkpoint: Checkpoint, base: Checkpoint | None) -> list[Finding]:
    """One drafter on its own (``ckptdiff SPEC --engine E --base BASE``) against the base's config, as each side
    of a pair is: a vocabulary or hidden size no engine checks is otherwise a drafter every engine "loads"."""
    if base is None or checkpoint.config is None or not is_eagle3(checkpoint.config):
        return []
    resolved = recognise(base.config, base.tensors.keys())
    found = _Findings()
    if base.config is None:
        found.add("info", "base_config_missing", params={"base": base.spec})
    elif resolved is not None:
        _check_against_base(_Side("A", checkpoint, {}, DrafterSpec.of(checkpoint.config)), base, resolved, found)
    return found.to_list()


def _check_own_config(side: _Side, found: _Findings, base_embedding: str) -> None:
    if side.drafter is None or side.checkpoint.config is None:
        return
    c = side.drafter
    expected = shapes_of(c)
    modules = [f"{layer_prefix(i)}{part}" for i in range(c.layer_count) for part in ("self_attn.", "mlp.")]
    for module in modules:
        # a module holding tensors this profile has no rule for (MLA attention, experts) is not the one it knows
        if any(name.startswith(module) and name not in expected for name in side.tensors):
            expected = {name: want for name, want in expected.items() if not name.startswith(module)}
    for name, stored in side.tensors.items():
        want = expected.get(name)
        if want is None or stored.shape == want.shape:
            continue
        params = {
            "stored_as": stored.name,
            "shape": list(stored.shape),
            "needs": list(want.shape),
            "because": want.because,
            "tensor": name,
        }
        if name == "t2d":
            found.add("warning", "t2d_length_mismatch", side.label, subject=name, params=params)
        else:
            found.add("error", "shape_vs_config", side.label, subject=name, params=params)
    if c.draft_vocab is not None and "lm_head.weight" not in side.tensors:
        found.add(
            "error",
            "lm_head_missing",
            side.label,
            subject="lm_head.weight",
            params={"draft_vocab": str(c.draft_vocab)},
        )
    if c.needs_d2t and "d2t" not in side.tensors:
        found.add(
            "error",
            "d2t_missing",
            side.label,
            subject="d2t",
            params={"draft_vocab": str(c.draft_vocab), "vocab": str(c.vocab)},
        )
    if EMBED.name in side.tensors:
        found.add(
            "info",
            "embed_tokens_carried",
            side.label,
            subject=EMBED.name,
            params={"base_name": base_embedding, "weight": EMBED.name},
        )
    if c.max_positions is not None and c.max_positions.value <= SMALL_MAX_POSITIONS:
        found.add("warning", "max_position_small", side.label, params={"setting": str(c.max_positions)})


def _check_between(a: _Side, b: _Side, found: _Findings) -> None:
    if a.drafter is None or b.drafter is None:
        return
    ids_a, ids_b = _aux_ids_to_compare(a.drafter, b.drafter)
    if ids_a is not None and ids_b is not None and ids_a.value != ids_b.value:
        shifted = len(ids_a.value) == len(ids_b.value) and len({y - x for x, y in zip(ids_a.value, ids_b.value)}) == 1
        shift = ids_b.value[0] - ids_a.value[0] if shifted else 0
        params = {"key": ids_a.key, "a": list(ids_a.value), "b": list(ids_b.value), "engines": v1_engines(shift)}
        if ids_b.key != ids_a.key:
            params["key_b"] = ids_b.key
        found.add("warning", "aux_layer_ids_differ", subject=ids_a.key, params={**params, "shift": shift})
    pos_a, pos_b = a.drafter.max_positions, b.drafter.max_positions
    if pos_a is not None and pos_b is not None and pos_a.value != pos_b.value:
        found.add(
            "info",
            "max_position_differs",
            subject=pos_a.key,
            params={"a": pos_a.value, "b": pos_b.value},
        )


def _aux_ids_to_compare(a: DrafterSpec, b: DrafterSpec) -> tuple[Setting | None, Setting | None]:
    """Each side's aux layer ids at the first key both set, else each side's first: a converted drafter keeps its
    source's eagle_config ids and adds the other engine's top-level key, and comparing the first key found on
    each side named one key with the other key's ids ("eagle_config...: A [2, 30, 58], B [3, 31, 59]" of two
    configs agreeing there)."""
    by_key_b = {found.key: found for found in b.aux_ids}
    shared = next((found for found in a.aux_ids if found.key in by_key_b), None)
    if shared is not None:
        return shared, by_key_b[shared.key]
    return a.aux_layer_ids, b.aux_layer_ids


def _check_injected(
    side: _Side,
    other: _Side,
    base: Checkpoint | None,
    resolved: Resolved | None,
    found: _Findings,
    verified: dict[str, tuple[NotePart, NotePart]],
) -> None:
    config = side.checkpoint.config
    if config is not None and side.drafter is None:
        return  # a config.json, but not an EAGLE-3 drafter's (e.g. a base model under --profile eagle3)
    for weight in injected_for(config):
        if weight.name in side.tensors:
            continue
        if base is None or resolved is None:
            found.add(
                "info",
                "injected_from_base",
                side=side.label,
                subject=weight.name,
                params={"weight": weight.name, "base_name": weight.base_name},
            )
            continue
        base_name = resolved.name(weight.role)
        source = base.tensors.get(base_name) if base_name else None
        if base_name is None or source is None:
            found.add(
                "error",
                "injected_missing_in_base",
                side.label,
                subject=weight.name,
                params={
                    "base": base.spec,
                    "looked_for": list(resolved.layout.names(weight.role)),
                    "weight": weight.name,
                },
            )
            continue
        problems: dict[str, Any] = {}
        want = shapes_of(side.drafter).get(weight.name) if side.drafter else None
        if want is not None and source.shape != want.shape:
            problems["config_needs"] = {"side": side.label, "shape": list(want.shape), "because": want.because}
        carried = other.tensors.get(weight.name)
        if carried is not None and carried.shape != source.shape:
            problems["other_stores"] = {"side": other.label, "shape": list(carried.shape)}
        if problems:
            found.add(
                "error",
                "injected_incompatible_with_base",
                side.label,
                subject=weight.name,
                params={
                    "base_name": base_name,
                    "base_shape": list(source.shape),
                    "base_dtype": source.dtype,
                    "problems": v1_problems(problems),
                    "weight": weight.name,
                    **problems,
                },
            )
            verified.setdefault(weight.name, _verdict(weight, base_name, "does_not_fit", source.shape, source.dtype))
            continue
        dtype = carried.dtype if carried is not None else side.dtype
        if dtype is not None and source.dtype != dtype:
            found.add(
                "warning",
                "dtype_differs_from_base",
                side.label,
                subject=weight.name,
                params={"base_name": base_name, "base_dtype": source.dtype, "dtype": dtype, "weight": weight.name},
            )
        found.add(
            "info",
            "injected_verified",
            side=side.label,
            subject=weight.name,
            params={
                "weight": weight.name,
                "base_name": base_name,
                "base_shape": list(source.shape),
                "base_dtype": source.dtype,
            },
        )
        verified.setdefault(weight.name, _verdict(weight, base_name, "verified", source.shape, source.dtype))


def _verdict(
    weight: InjectedWeight, base_name: str, how: str, shape: Iterable[int], dtype: str
) -> tuple[NotePart, NotePart]:
    """An injected row's note parts once its base is checked: where it comes from, then the verdict."""
    stores = TensorSide(tuple(shape), dtype)
    return NotePart("injected", how=weight.how, name=base_name), NotePart("base_verdict", how=how, stores=stores)


def _base_setting(
    resolved: Resolved, base: Checkpoint, key: str, drafter: Setting, side: _Side, found: _Findings
) -> Found | None:
    """A positive int the base's text config sets, or None and an info finding naming the keys looked for
    (``drafter``: the drafter's setting it would be checked against)."""
    value, looked = lookup(base.config, key, resolved.text_config_path)
    if value is not None and isinstance(value.value, int) and not isinstance(value.value, bool) and value.value > 0:
        return value
    found.add(
        "info",
        "base_setting_missing",
        side.label,
        subject=key,
        params={
            "looked_for": list(looked),
            "found": None if value is None else {value.key: value.value},
            "checks": v1_checks(key, drafter),
            "key": key,
            "setting": str(drafter),
        },
    )
    return None


def _check_against_base(side: _Side, base: Checkpoint, resolved: Resolved, found: _Findings) -> None:
    if side.drafter is None or base.config is None:
        return
    c = side.drafter

    def base_value(key: str, drafter: Setting) -> Found | None:
        return _base_setting(resolved, base, key, drafter, side, found)

    def mismatch(key: str, drafter: Setting, base_found: Found) -> None:
        params = {"drafter": str(drafter), "base": base_found.value, "key": key, "base_key": base_found.key}
        found.add("error", "base_config_mismatch", side.label, subject=base_found.key, params=params)

    if c.vocab is not None and (vocab := base_value("vocab_size", c.vocab)) is not None:
        if c.vocab.value != vocab.value:
            mismatch("vocab_size", c.vocab, vocab)
    target = c.target_hidden or c.hidden
    if target is not None and (hidden := base_value("hidden_size", target)):
        if target.value != hidden.value:
            mismatch("hidden_size", target, hidden)
    if c.aux_layer_ids is not None and (layers := base_value("num_hidden_layers", c.aux_layer_ids)):
        outside = [i for i in c.aux_layer_ids.value if not 0 <= i < layers.value]
        if outside:
            found.add(
                "error",
                "aux_layer_out_of_range",
                side.label,
                subject=c.aux_layer_ids.key,
                params={"setting": str(c.aux_layer_ids), "outside": outside, "base": {layers.key: layers.value}},
            )
    _check_dtype_against_base(side, base, resolved, found)
    if c.max_positions is not None:
        positions = base_value("max_position_embeddings", c.max_positions)
        if positions is not None and c.max_positions.value < positions.value:
            found.add(
                "warning",
                "max_position_small",
                side.label,
                subject=positions.key,
                params={"setting": str(c.max_positions), "base": positions.value},
            )


def _check_dtype_against_base(side: _Side, base: Checkpoint, resolved: Resolved, found: _Findings) -> None:
    path = resolved.text_config_path
    setting_found = lookup(base.config, "torch_dtype", path)[0] or lookup(base.config, "dtype", path)[0]
    base_dtype = config_dtype(setting_found.value) if setting_found else None
    if setting_found is not None and base_dtype is not None and side.dtype is not None and side.dtype != base_dtype:
        found.add(
            "warning",
            "dtype_differs_from_base",
            side.label,
            params={
                "dtype": side.dtype,
                "base_dtype": base_dtype,
                "base_setting": {setting_found.key: setting_found.value},
            },
        )


#: Findings that only describe what engines do; ``--engine`` reports that as each engine's events instead.
ENGINE_PROSE = frozenset({"embed_tokens_carried", "lm_head_missing", "injected_from_base"})


def engine_view(findings: list[Finding]) -> list[Finding]:
    """The findings without engine prose: those in ENGINE_PROSE go, aux_layer_ids_differ keeps only the difference
    (without ``shift``, it is worded without what each engine reads: the engines' own events say that)."""
    out = []
    for finding in findings:
        if finding.code in ENGINE_PROSE:
            continue
        if finding.code == "aux_layer_ids_differ":
            kept = {name: value for name, value in finding.params.items() if name not in ("engines", "shift")}
            finding = msgspec.structs.replace(finding, params=kept)
        out.append(finding)
    return out


def variants(config: Config | None, names: Collection[str]) -> tuple[str, ...]:
    """The EAGLE-3 variants a side's drafter is (words in messages.VARIANTS)."""
    return DrafterSpec.of(config).variants if config is not None else ()


PROFILE = Profile(
    name="eagle3",
    detect=is_eagle3,
    injected=(EMBED,),  # always; lm_head too for a drafter without draft_vocab_size (injected_for)
    injects=injected_for,
    canonical=canonical_name,
    convention=naming_convention,
    review=review,
    review_alone=review_alone,
    engine_view=engine_view,
    variants=variants,
)
