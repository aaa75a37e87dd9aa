"""Qwen3-Next's ``mtp.*`` MTP block as each engine loads it: the rules (:class:`PrefixLoad`, data in vllm.py and
sglang.py) and their replay on a checkpoint's names, shapes and config.json.

The block: ``mtp.fc`` over [embedding; hidden], ``mtp.pre_fc_norm_{embedding,hidden}``, ``mtp.norm`` and
``mtp.layers.{i}.*`` full-attention decoder layers (gated attention: q_proj holds the output gate's half too; q/k
norms; a MoE MLP with a gated shared expert). Each tensor is renamed to its parameter, q/k/v are stacked into
``qkv_proj``, gate/up into ``gate_up_proj`` and the routed experts into the fused ``w13``/``w2`` weights, each
shard checked against the shape the target's config implies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...rules import Event, Source
from ..spec import MtpSpec
from .prefix_quant import PLAIN_WHY, PrefixQuant, QuantPlan, is_scale

Shape = tuple[int, ...]
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.(\w+)$")
_LAYER = re.compile(r"^layers\.(\d+)\.")
#: Stacked pieces (after ``mtp.``) → (fused piece, shard), as both engines stack them.
STACKED = (
    ("self_attn.q_proj.", "self_attn.qkv_proj.", "q"),
    ("self_attn.k_proj.", "self_attn.qkv_proj.", "k"),
    ("self_attn.v_proj.", "self_attn.qkv_proj.", "v"),
    ("shared_expert.gate_proj.", "shared_expert.gate_up_proj.", "0"),
    ("shared_expert.up_proj.", "shared_expert.gate_up_proj.", "1"),
    ("mlp.gate_proj.", "mlp.gate_up_proj.", "0"),
    ("mlp.up_proj.", "mlp.gate_up_proj.", "1"),
)


@dataclass(frozen=True)
class PrefixLoad:
    """How one engine's class loads the ``mtp.*`` block of a Qwen3-Next checkpoint, as data."""

    source: Source
    #: Whether it reads a checkpoint name at all (vLLM: ``mtp.*`` and any name with embed_tokens or lm_head;
    #: SGLang: any name containing ``mtp``); the others are the target's own, skipped.
    reads: Callable[[str], bool]
    #: A read name outside ``mtp.`` → the parameter it fills (vLLM's embed_tokens and lm_head), else None.
    top_level: Callable[[str], str | None]
    #: The drafter's name for a ``mtp.`` tensor, before stacking: ``rest`` is the name after ``mtp.``.
    rename: Callable[[str], str]
    #: The MTP decoder layers it builds from the config (vLLM: num_nextn_predict_layers, 1 when absent; SGLang: 1).
    layers_built: Callable[[MtpSpec], int]
    #: Whether layer ``i``'s MLP is a MoE (vLLM: as Qwen3NextDecoderLayer decides; SGLang: always).
    moe_layer: Callable[[MtpSpec, int], bool]
    #: The routed experts' fused parameters' module, after ``mlp.`` (``experts.routed_experts``, ``experts``).
    experts: str
    #: The parameters its set-up replaces by the target's (embedding and head).
    taken: tuple[str, ...]
    #: Of the parameters no tensor fills, those its strict check names (the rest keep their initial values).
    strict: Callable[[str], bool]
    param_missing: Event  # {param}: strict
    param_missing_exempt: Event  # {param}: not strict
    block_missing: Event  # no mtp.* tensor at all ({cls})
    #: A routed expert past num_experts ({name}, {experts}).
    extra_expert: Event
    #: A name it reads that no parameter takes (an unknown weight, a layer past those built) ({name}, {candidate}).
    unknown: Event
    shape_error: Event  # {name}, {param}, {got}, {want}
    #: A q/k/v or gate/up shard with fewer rows than its slot: the copy raises ({name}, {param}, {got}, {want}).
    shard_short: Event
    #: A q/k/v or gate/up shard with more rows than its slot: the first rows are copied, silently.
    shard_long: Event
    #: A routed expert's tensor with fewer rows than its slot ({name}, {param}, {got}, {want}); the parameter's
    #: fate as the engine leaves it (vLLM: partly written; SGLang: ``altered``).
    expert_short: Event
    expert_short_fate: str
    #: Tensors it skips as the target's own ({count}).
    outside: Event
    #: How it builds the block's linears under an FP8 quantization_config (None: not modelled).
    quant: PrefixQuant | None = None


def _int(text: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    value = text.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def vllm_moe_layer(spec: MtpSpec, index: int) -> bool:
    """Qwen3NextDecoderLayer: a MoE layer unless listed in mlp_only_layers, when num_experts > 0 and
    (index + 1) % decoder_sparse_step == 0 (index: the MTP layer's own, from its prefix)."""
    text = spec.text
    only = text.get("mlp_only_layers") or []
    step = _int(text, "decoder_sparse_step", 1) or 1
    return index not in only and (_int(text, "num_experts", 0) or 0) > 0 and (index + 1) % step == 0


def expected(spec: MtpSpec, layers: int, moe: Callable[[MtpSpec, int], bool]) -> dict[str, Shape | None]:
    """Name after ``mtp.`` → the shape the target's config implies (None: not derivable), for the block an engine
    builds with ``layers`` decoder layers."""
    text = spec.text
    h = spec.hidden
    heads, kv = _int(text, "num_attention_heads"), _int(text, "num_key_value_heads")
    head_dim = _int(text, "head_dim") or (h // heads if h and heads else None)
    gated = text.get("attn_output_gate", True) is not False
    experts, moe_inter = _int(text, "num_experts", 0) or 0, _int(text, "moe_intermediate_size")
    shared, inter = _int(text, "shared_expert_intermediate_size", 0) or 0, _int(text, "intermediate_size")

    def shape(*dims: int | None) -> Shape | None:
        return None if any(d is None for d in dims) else tuple(d for d in dims if d is not None)

    q_rows = heads * head_dim * (2 if gated else 1) if heads and head_dim else None
    kv_rows = kv * head_dim if kv and head_dim else None
    out: dict[str, Shape | None] = {
        "fc.weight": shape(h, 2 * h if h else None),
        "pre_fc_norm_embedding.weight": shape(h),
        "pre_fc_norm_hidden.weight": shape(h),
        "norm.weight": shape(h),
    }
    for i in range(layers):
        p = f"layers.{i}."
        out |= {
            p + "input_layernorm.weight": shape(h),
            p + "post_attention_layernorm.weight": shape(h),
            p + "self_attn.q_proj.weight": shape(q_rows, h),
            p + "self_attn.k_proj.weight": shape(kv_rows, h),
            p + "self_attn.v_proj.weight": shape(kv_rows, h),
            p + "self_attn.o_proj.weight": shape(h, heads * head_dim if heads and head_dim else None),
            p + "self_attn.q_norm.weight": shape(head_dim),
            p + "self_attn.k_norm.weight": shape(head_dim),
        }
        m = p + "mlp."
        if moe(spec, i):
            out |= {m + "gate.weight": shape(experts, h), m + "shared_expert_gate.weight": shape(1, h)}
            if shared:
                out |= {m + f"shared_expert.{w}_proj.weight": shape(shared, h) for w in ("gate", "up")}
                out[m + "shared_expert.down_proj.weight"] = shape(h, shared)
            for e in range(experts):
                out |= {m + f"experts.{e}.{w}_proj.weight": shape(moe_inter, h) for w in ("gate", "up")}
                out[m + f"experts.{e}.down_proj.weight"] = shape(h, moe_inter)
        else:
            out |= {m + f"{w}_proj.weight": shape(inter, h) for w in ("gate", "up")}
            out[m + "down_proj.weight"] = shape(h, inter)
    return out


def parameter_of(load: PrefixLoad, rest: str) -> tuple[str, str | None]:
    """The parameter a ``mtp.`` tensor fills and its shard (``q``, ``0``, ``{expert}_gate``), or no shard."""
    expert = _EXPERT.search(rest)
    if expert is not None:
        index, piece, suffix = expert.groups()
        which = "w2" if piece == "down_proj" else "w13"
        module = rest[: expert.start()] + ("." if expert.start() else "")
        shard = index if which == "w2" else f"{index}_{piece.removesuffix('_proj')}"
        name = load.rename(f"{module}{load.experts}.{which}_{suffix}")
        return name, shard
    for piece, fused, shard in STACKED:
        if piece in rest:
            return load.rename(rest.replace(piece, fused, 1)), shard
    return load.rename(rest), None


def linears(spec: MtpSpec, layers: int, moe: Callable[[MtpSpec, int], bool]) -> dict[str, tuple[int, int] | None]:
    """The block's linear layers an engine may quantize, by checkpoint name after ``mtp.`` (unfused) → (rows,
    columns) of their weight: mtp.fc, q/k/v/o_proj, the shared expert's and the routed experts' projections (the
    router and the shared expert's gate are never quantized: both engines build them without a quant config)."""
    out: dict[str, tuple[int, int] | None] = {}
    for rest, shape in expected(spec, layers, moe).items():
        module = rest.removesuffix(".weight")
        if module == rest or shape is None or len(shape) != 2 or module.endswith(("mlp.gate", "shared_expert_gate")):
            continue
        out[module] = (shape[0], shape[1])
    return out


def replay(
    load: PrefixLoad,
    cls: str,
    spec: MtpSpec,
    shapes: Mapping[str, tuple[int, ...]],
    add: Any,
    dtypes: Mapping[str, str] | None = None,
    quant: QuantPlan | None = None,
) -> Any:
    """Replay ``load`` over the checkpoint (``shapes``: name → shape, ``dtypes``: name → dtype); ``add(event, tensor,
    **params)`` records an event; ``quant``: the block's FP8 plan when the checkpoint is quantized. Returns (tensor
    fates, parameter fates)."""
    built = load.layers_built(spec)
    want = expected(spec, built, load.moe_layer)
    if quant is not None:
        if quant.refused:
            event, refusal = quant.refused[0]
            add(event, **refusal)
            return [], []
        want |= quant.scales
        quantized = [f"mtp.{m}" for m, linear in quant.linears.items() if linear.quantized]
        plain = [f"mtp.{m} ({linear.why})" for m, linear in quant.linears.items() if not linear.quantized]
        add(
            quant.rules.built,
            quantized=", ".join(quantized) or "none",
            plain=", ".join(plain) or "none",
            scheme=quant.scheme.describe,
        )
    experts = _int(spec.text, "num_experts", 0) or 0
    params: dict[str, str] = {}  # parameter (with its shard) → fate
    slot: dict[str, tuple[str, Shape | None]] = {}  # rest → (parameter with shard, shape)
    for rest, shape in want.items():
        base, shard = parameter_of(load, rest)
        key = f"{base}[{shard}]" if shard is not None else base
        slot[rest] = (key, shape)
        params[key] = "missing"
    for name in load.taken:
        params[name] = "from_target"
    tensors: list[tuple[str, str, str | None]] = []
    outside = 0
    stored = sorted(name for name in shapes if name.startswith("mtp."))
    misfits: dict[tuple[Event, str, str, str], list[str]] = {}  # (event, module, dtype, because) → weights
    raised = False
    for name in sorted(shapes):
        got = tuple(shapes[name])
        if not load.reads(name):
            outside += 1
            tensors.append((name, "skipped", None))
            continue
        if not name.startswith("mtp."):
            top = load.top_level(name)
            if top is not None and top in params:
                tensors.append((name, "from_target", top))
            else:
                add(load.unknown, name, name=name, candidate=name)
                tensors.append((name, "error", None))
                raised = True
            continue
        rest = name[len("mtp.") :]
        expert = _EXPERT.search(rest)
        if expert is not None and int(expert.group(1)) >= experts and _LAYER.match(rest):
            layer = int(_LAYER.match(rest).group(1))  # type: ignore[union-attr]
            if layer < built:
                add(load.extra_expert, name, name=name, experts=experts, candidate=parameter_of(load, rest)[0])
                fate = "error" if load.extra_expert.severity == "error" else "skipped"
                raised |= fate == "error"
                tensors.append((name, fate, None))
                continue
        if rest not in slot:
            base = parameter_of(load, rest)[0]
            if quant is not None and is_scale(rest):
                linear = quant.linear_of(rest)
                module = f"mtp.{linear.module}" if linear else name.rpartition(".")[0]
                why = linear.why if linear else PLAIN_WHY
                add(quant.rules.scale_unexpected, name, name=name, module=module, because=why, candidate=base)
            else:
                add(load.unknown, name, name=name, candidate=base)
            tensors.append((name, "error", None))
            raised = True
            continue
        key, shape = slot[rest]
        base = re.sub(r"\[\w+\]$", "", key)
        if shape is not None and got != shape:
            stacked = key != base
            rows_only = len(got) == len(shape) and got[1:] == shape[1:]
            if stacked and expert is None and rows_only and got[0] > shape[0]:
                add(load.shard_long, name, name=name, param=base, got=list(got), want=list(shape))
                params[key] = "loaded"
                tensors.append((name, "loaded", key))
                continue
            narrower = len(got) == len(shape) and all(g <= w for g, w in zip(got, shape, strict=True))
            if expert is not None and narrower:  # w13's rows or w2's columns: moe_intermediate_size
                add(load.expert_short, name, name=name, param=base, got=list(got), want=list(shape))
                params[key] = load.expert_short_fate
                tensors.append((name, "loaded", key))
                continue
            event = load.shard_short if stacked and rows_only and got[0] < shape[0] else load.shape_error
            add(event, name, name=name, param=base, got=list(got), want=list(shape))
            tensors.append((name, "error", key))
            raised = True
            continue
        params[key] = "loaded"
        tensors.append((name, "loaded", key))
        if quant is not None and dtypes is not None and rest.endswith(".weight"):
            _misfit(quant, name, rest, dtypes.get(name), misfits)
    for (event, module, dtype, because), names in misfits.items():
        add(event, None, module=module, dtype=dtype, because=because, count=len(names), name=names[0])
    if outside:
        add(load.outside, count=outside)
    # a quantized target: vLLM's strict check is off, so nothing it leaves unfilled is named
    lax = quant is not None and quant.rules.param_missing is not None
    if not stored:
        quiet = quant.rules.block_missing if quant is not None else None
        add(quiet or load.block_missing, cls=cls, layer="mtp.*")
        for key, fate in params.items():
            if fate == "missing":
                params[key] = "missing" if load.strict(key) and not lax else "random"
    elif not raised:
        _missing(load, params, add, quant)
    return tensors, sorted(params.items())


def _misfit(quant: QuantPlan, name: str, rest: str, dtype: str | None, misfits: dict[Any, list[str]]) -> None:
    """A weight whose dtype does not fit the parameter the engine built (cast to FP8 without a scale, or FP8 read
    without its scale), gathered per module: one event each."""
    linear = quant.linear_of(rest)
    if linear is None or dtype is None:
        return
    fp8 = dtype.startswith("F8_")
    if linear.quantized == fp8:
        return
    event = quant.rules.weight_cast if linear.quantized else quant.rules.weight_unscaled
    misfits.setdefault((event, f"mtp.{linear.module}", dtype, linear.why), []).append(name)


def _missing(load: PrefixLoad, params: dict[str, str], add: Any, quant: QuantPlan | None = None) -> None:
    """Parameters (or shards) no tensor filled: the strict check names them, or they keep their initial values;
    a quantized linear's scales keep theirs."""
    reported: set[str] = set()
    lax = quant.rules.param_missing if quant is not None else None
    for key, fate in params.items():
        if fate != "missing":
            continue
        base = re.sub(r"\[\w+\]$", "", key)
        strict = load.strict(base) and lax is None
        params[key] = "missing" if strict else "random"
        if base in reported:
            continue
        reported.add(base)
        if quant is not None and is_scale(base):
            add(quant.rules.scale_missing, param=base, scheme=quant.scheme.describe)
        elif lax is not None:
            add(lax, param=base)
        else:
            add(load.param_missing if strict else load.param_missing_exempt, param=base)
