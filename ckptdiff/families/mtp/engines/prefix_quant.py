"""A quantized Qwen3-Next ``mtp.*`` block as each engine builds and loads it: which of the block's linears the
engine builds FP8-quantized (its own reading of the quantization_config's ignore list, asked about its own module
names), the scale tensors each of them then takes, and what happens to a weight or scale that does not fit.

The rules are data (:class:`PrefixQuant`, per engine in vllm.py and sglang.py); :func:`plan` turns them and a
checkpoint's config into what :func:`.prefix.replay` checks: the scales expected beside the weights (with their
shapes), which modules are built quantized, and why.

Only the ``fp8`` quant method is modelled (block-wise ``weight_scale_inv`` and per-tensor ``weight_scale``, with
``input_scale`` for static activations). Other methods (compressed-tensors, AWQ, GPTQ, ModelOpt) keep the
presence-only check (``mtp_composition_unchecked``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...rules import Event, Source

Shape = tuple[int, ...]
#: The scale suffixes a quantized linear's tensors can carry (after ``.{module}.``).
SCALES = ("weight_scale_inv", "weight_scale", "input_scale")
#: Why a scale of the router, the shared expert's gate or a norm has no parameter.
PLAIN_WHY = "both engines build it without a quantization method, whatever the config"
_SHARDS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


@dataclass(frozen=True)
class PrefixQuant:
    """How one engine builds the linears of the ``mtp.*`` block under an FP8 quantization_config, as data."""

    source: Source
    #: The quantization_config keys its FP8 config reads the ignore list from: the first one present wins.
    ignore_keys: tuple[str, ...]
    #: The ignore list as the engine holds it (SGLang adds a ``model.``-prefixed and an unprefixed copy of each).
    normalise: Callable[[list[str]], list[str]]
    #: A linear module of the block (its name after ``mtp.``, fused: ``layers.0.self_attn.qkv_proj``) → the name
    #: the engine asks its quantization config about; None: built unquantized whatever the config.
    module: Callable[[str], str | None]
    #: Whether the ignore list skips one (unfused) module name, as its ``is_layer_skipped`` matches.
    matches: Callable[[str, str], bool]
    #: Why a module is built unquantized whatever the config ({module}) (SGLang's mtp.fc: a plain nn.Linear).
    never_why: str
    #: A scale (weight_scale_inv, weight_scale, input_scale) of a quantized linear that no tensor fills ({param}).
    scale_missing: Event
    #: A non-FP8 weight copied into a parameter built FP8 ({name}, {dtype}, {module}): cast without a scale.
    weight_cast: Event
    #: An FP8 weight copied into a parameter built unquantized ({name}, {module}, {why}): read without its scale.
    weight_unscaled: Event
    #: A scale tensor of a module built unquantized: no parameter takes it ({name}, {module}, {why}).
    scale_unexpected: Event
    #: Which of the block's linears it builds FP8 and which unquantized ({quantized}, {plain}, {scheme}).
    built: Event
    #: Whether it refuses a fused layer (qkv, gate_up) whose shards are not whole blocks (vLLM lets a fused layer with
    #: such a shard through: allow_fp8_block_shape_mismatch); a routed expert's width is checked by both.
    checks_fused_shards: bool
    #: A quantized layer whose rows are not whole blocks: refused when it is built ({module}, {rows}, {block}).
    misaligned: Event
    #: Some but not all shards of a fused linear skipped: the config is refused at construction ({module}).
    mixed_shards: Event
    #: The block's parameters no tensor fills, quantized target (vLLM's strict check is off) ({param}); None: as
    #: unquantized.
    param_missing: Event | None = None
    #: No mtp.* tensor at all, quantized target ({cls}); None: as unquantized.
    block_missing: Event | None = None
    #: Whether an ignore entry naming a fused module itself (``qkv_proj``) skips it (vLLM: yes; SGLang: only its
    #: shards' names count).
    fused_name_skips: bool = True


@dataclass(frozen=True)
class Fp8Scheme:
    """The FP8 quantization_config as both engines read it: block size, static activations, the raw ignore list."""

    block: tuple[int, int] | None
    static: bool
    ignored: tuple[str, ...]
    key: str | None  # the config key the ignore list came from

    @property
    def describe(self) -> str:
        blocks = f"{self.block[0]}x{self.block[1]} blocks" if self.block else "per tensor"
        return f"fp8, {blocks}"


def fp8_scheme(config: Mapping[str, Any], keys: Sequence[str]) -> Fp8Scheme | None:
    """The FP8 scheme of a quantization_config, None when it is not ``quant_method: fp8``."""
    if not isinstance(config, Mapping) or config.get("quant_method") != "fp8":
        return None
    raw_block = config.get("weight_block_size")
    block = None
    if isinstance(raw_block, list) and len(raw_block) == 2 and all(isinstance(b, int) and b > 0 for b in raw_block):
        block = (raw_block[0], raw_block[1])
    key = next((k for k in keys if config.get(k)), None)
    raw = config.get(key) if key else None
    ignored = tuple(x for x in raw if isinstance(x, str)) if isinstance(raw, list) else ()
    return Fp8Scheme(block, config.get("activation_scheme") == "static", ignored, key)


@dataclass(frozen=True)
class Linear:
    """One linear of the block as an engine builds it: quantized or not, and why."""

    module: str  # after mtp., fused name (layers.0.self_attn.qkv_proj)
    quantized: bool
    why: str
    asked: str | None  # the name the engine asks its config about


@dataclass
class QuantPlan:
    """What :func:`.prefix.replay` checks of a quantized block: the linears, the scales expected (name after
    ``mtp.`` → shape, None: not checked), the construction error if any, and events to add before the replay."""

    scheme: Fp8Scheme
    rules: PrefixQuant
    linears: dict[str, Linear] = field(default_factory=dict)
    scales: dict[str, Shape | None] = field(default_factory=dict)
    #: Why the engine refuses to build the block (event, params), in the order it builds its layers: it raises at
    #: the first.
    refused: list[tuple[Event, dict[str, Any]]] = field(default_factory=list)

    def linear_of(self, rest: str) -> Linear | None:
        """The linear a checkpoint name (after ``mtp.``) belongs to, by its module (``q_proj`` → qkv_proj)."""
        return self.linears.get(module_of(rest.rpartition(".")[0]))


def _skipped(rules: PrefixQuant, ignored: list[str], name: str) -> bool:
    return any(rules.matches(entry, name) for entry in ignored)


def module_of(name: str) -> str:
    """A linear's checkpoint name (after ``mtp.``) → the module the engines build for it: q/k/v_proj → qkv_proj,
    gate/up_proj → gate_up_proj, a routed expert's projection → the fused ``experts``."""
    expert = re.sub(r"\.experts\.\d+\.(gate|up|down)_proj$", ".experts", name)
    if expert != name:
        return expert
    head, _, last = name.rpartition(".")
    for fused, shards in _SHARDS.items():
        if last in shards:
            return f"{head}.{fused}"
    return name


def plan(
    rules: PrefixQuant, config: Mapping[str, Any], linears: Mapping[str, tuple[int, int] | None]
) -> QuantPlan | None:
    """The plan for a block whose linears' checkpoint weights are ``linears`` (name after ``mtp.``, unfused:
    ``layers.0.self_attn.q_proj`` → (rows, columns), None: not derivable); None when the config is not FP8."""
    scheme = fp8_scheme(config, rules.ignore_keys)
    if scheme is None:
        return None
    out = QuantPlan(scheme, rules)
    ignored = rules.normalise(list(scheme.ignored))
    key = scheme.key or "modules_to_not_convert"
    grouped: dict[str, list[str]] = {}
    for name in linears:
        grouped.setdefault(module_of(name), []).append(name)
    for module, names in grouped.items():
        asked = rules.module(module)
        if asked is None:
            out.linears[module] = Linear(module, False, rules.never_why.format(module=f"mtp.{module}"), None)
            continue
        head = asked.rpartition(".")[0]
        if module.endswith(".experts"):
            skipped = _experts_skipped(rules, ignored, asked)
            unfused = [f"mtp.{module}"]
        else:
            votes = {_skipped(rules, ignored, f"{head}.{name.rpartition('.')[2]}") for name in names}
            if len(votes) > 1 and not (rules.fused_name_skips and _skipped(rules, ignored, asked)):
                out.refused.append((rules.mixed_shards, {"module": f"mtp.{module}"}))
            skipped = True in votes or (rules.fused_name_skips and _skipped(rules, ignored, asked))
            unfused = [f"mtp.{name}" for name in names]
        if skipped:
            out.linears[module] = Linear(module, False, f"{key} names it", asked)
            continue
        why = f"quantization_config {scheme.describe}; {key} does not name it"
        named = [e for e in scheme.ignored if any(rules.matches(e, n) for n in rules.normalise(unfused))]
        if named and asked != f"mtp.{module}":
            why = f"{key} names it as {named[0]}, but the engine asks about {asked}, which no entry names"
        out.linears[module] = Linear(module, True, why, asked)
        if scheme.block is not None:
            _check_blocks(out, module, [linears[name] for name in names], scheme.block[0])
        for name in names:
            dims = linears[name]
            if scheme.block is not None:
                bn, bk = scheme.block
                out.scales[f"{name}.weight_scale_inv"] = (-(-dims[0] // bn), -(-dims[1] // bk)) if dims else None
            else:
                out.scales[f"{name}.weight_scale"] = None
            if scheme.static:
                out.scales[f"{name}.input_scale"] = None
    return out


def _check_blocks(out: QuantPlan, module: str, dims: list[tuple[int, int] | None], block: int) -> None:
    """validate_fp8_block_shape(_moe): a routed expert's width (both engines) and a fused layer's shards (SGLang)
    must be whole blocks of rows, else the layer is refused when it is built."""
    rows = [d[0] for d in dims if d is not None]
    if module.endswith(".experts"):
        checked = rows[:1]  # gate_proj's rows: moe_intermediate_size
    elif len(rows) > 1 and out.rules.checks_fused_shards:
        checked = rows
    else:
        return
    bad = next((r for r in checked if r % block), None)
    if bad is not None:
        out.refused.append((out.rules.misaligned, {"module": f"mtp.{module}", "rows": bad, "block": block}))


def _experts_skipped(rules: PrefixQuant, ignored: list[str], asked: str) -> bool:
    """Both engines' expert rule: an entry naming experts that contains the module's name (SGLang: or one that
    matches it as a module path)."""
    return any(asked in entry for entry in ignored if "experts" in entry) or _skipped(rules, ignored, asked)


def is_scale(name: str) -> bool:
    """A scale tensor or parameter (``…weight_scale_inv``, ``…w13_weight_scale``, ``…input_scale``)."""
    return name.rpartition(".")[2].endswith(SCALES)
