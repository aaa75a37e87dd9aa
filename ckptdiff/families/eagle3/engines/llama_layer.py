"""The parameters of an EAGLE-3 drafter's decoder layers and fc block (Llama-style or MLA attention), by index.

Shapes come from the drafter's :class:`DrafterSpec` under canonical (SpecForge) names, so an engine table only
says what its own loader names the parameter. Shapes are [out, in] like nn.Linear; the first layer's attention
reads 2 x hidden (embeddings and hidden states concatenated), later layers read hidden. Fused parameters are
listed per shard, named ``param[shard]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ...rules import Case, Param, Source, When
from ..spec import layer_prefix
from .settings import Draft

#: Decoder layers a table spells out; a config asking for more gets only these checked (32: LlamaConfig's default
#: num_hidden_layers, what a config without the key builds).
MAX_LAYERS = 32
#: fc_norm chunks a table spells out.
MAX_AUX = 8


def never(_: Draft) -> bool:
    return False


@dataclass(frozen=True)
class Biases:
    """Which of the layer's linear layers have a bias, as the engine builds them from the config."""

    qkv: When = never
    o_proj: When = never
    mlp: When = never


NO_BIASES = Biases()


def _param(name: str, canonical: str, source: Source, absent: tuple[Case, ...], exists: When, linear: bool) -> Param:
    module = canonical.rsplit(".", 1)[0] if linear else None
    return Param(name, lambda d: d.shape(canonical), source, exists=exists, absent=absent, module=module)


def _layer_exists(index: int, exists: When) -> When:
    return lambda d: d.layers > index and exists(d)


def layer_exists(index: int) -> When:
    """Layer ``index`` exists when num_hidden_layers is above it."""
    return lambda d: d.layers > index


def decoder_layers(
    name_of: Callable[[int], str],
    source: Source,
    *absent: Case,
    biases: Biases = NO_BIASES,
    attention: str = "llama",
    layers: int = MAX_LAYERS,
    fused_qkv_a: str = "fused_qkv_a_proj",
    when: When = lambda d: True,
    unread: Unread | None = None,
) -> tuple[Param, ...]:
    """Every layer's parameters; ``name_of(i)`` is the engine's prefix for layer i ("model.layers.0."); ``when``:
    a condition on the drafter for this naming to apply; ``unread``: the norm the engine's layers after the first
    build but never read."""
    out: tuple[Param, ...] = ()
    for index in range(layers):
        out += decoder_layer(
            name_of(index),
            source,
            *absent,
            biases=biases,
            attention=attention,
            index=index,
            fused_qkv_a=fused_qkv_a,
            when=when,
            unread=unread if index > 0 else None,
        )
    return out


@dataclass(frozen=True)
class Unread:
    """A norm every decoder layer builds and loads but that the layers after the first never read in their
    forward (vLLM: ``hidden_norm``, SGLang: ``input_layernorm``): left unfilled it costs nothing (``absent``),
    filled it is loaded for nothing (``loaded``)."""

    norm: str  # "hidden_norm" or "input_layernorm"
    absent: Case
    loaded: Case


def decoder_layer(
    prefix: str,
    source: Source,
    *absent: Case,
    biases: Biases = NO_BIASES,
    attention: str = "llama",
    index: int = 0,
    fused_qkv_a: str = "fused_qkv_a_proj",
    when: When = lambda d: True,
    unread: Unread | None = None,
) -> tuple[Param, ...]:
    """Layer ``index``'s parameters under ``prefix``; ``absent``: what an unfilled one becomes; ``unread``: a
    norm this layer builds and never reads."""
    canon = layer_prefix(index)

    def one(name: str, canonical: str, exists: When = lambda d: True, linear: bool = False) -> Param:
        both: When = lambda d: when(d) and exists(d)  # noqa: E731
        param = _param(prefix + name, canon + canonical, source, absent, _layer_exists(index, both), linear)
        if unread is not None and name == f"{unread.norm}.weight":
            return replace(param, absent=(unread.absent,), loaded=(unread.loaded,))
        return param

    if attention == "mla":
        attn = _mla_attention(one, fused_qkv_a)
    else:
        attn = (
            one("self_attn.qkv_proj.weight[q]", "self_attn.q_proj.weight", linear=True),
            one("self_attn.qkv_proj.weight[k]", "self_attn.k_proj.weight", linear=True),
            one("self_attn.qkv_proj.weight[v]", "self_attn.v_proj.weight", linear=True),
            one("self_attn.o_proj.weight", "self_attn.o_proj.weight", linear=True),
            one("self_attn.qkv_proj.bias[q]", "self_attn.q_proj.bias", biases.qkv),
            one("self_attn.qkv_proj.bias[k]", "self_attn.k_proj.bias", biases.qkv),
            one("self_attn.qkv_proj.bias[v]", "self_attn.v_proj.bias", biases.qkv),
            one("self_attn.o_proj.bias", "self_attn.o_proj.bias", biases.o_proj),
        )
    return attn + (
        one("mlp.gate_up_proj.weight[0]", "mlp.gate_proj.weight", linear=True),
        one("mlp.gate_up_proj.weight[1]", "mlp.up_proj.weight", linear=True),
        one("mlp.down_proj.weight", "mlp.down_proj.weight", linear=True),
        one("mlp.gate_up_proj.bias[0]", "mlp.gate_proj.bias", biases.mlp),
        one("mlp.gate_up_proj.bias[1]", "mlp.up_proj.bias", biases.mlp),
        one("mlp.down_proj.bias", "mlp.down_proj.bias", biases.mlp),
        one("input_layernorm.weight", "input_layernorm.weight"),
        one("hidden_norm.weight", "hidden_norm.weight"),
        one("post_attention_layernorm.weight", "post_attention_layernorm.weight"),
    )


def _mla_attention(one: Callable[..., Param], fused: str) -> tuple[Param, ...]:
    """DeepSeek-V2 MLA, fused the way vLLM and SGLang fuse it: q_a_proj and kv_a_proj_with_mqa stack into
    one down projection (shards 0 and 1), the rest keep their names."""
    with_q_lora: When = lambda d: d.spec.mla is not None and d.spec.mla.q_lora_rank is not None  # noqa: E731
    without_q_lora: When = lambda d: d.spec.mla is not None and d.spec.mla.q_lora_rank is None  # noqa: E731
    return (
        one(f"self_attn.{fused}.weight[0]", "self_attn.q_a_proj.weight", with_q_lora, linear=True),
        one(f"self_attn.{fused}.weight[1]", "self_attn.kv_a_proj_with_mqa.weight", with_q_lora, linear=True),
        one("self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight", without_q_lora, linear=True),
        one("self_attn.q_proj.weight", "self_attn.q_proj.weight", without_q_lora, linear=True),
        one("self_attn.q_a_layernorm.weight", "self_attn.q_a_layernorm.weight", with_q_lora),
        one("self_attn.q_b_proj.weight", "self_attn.q_b_proj.weight", with_q_lora, linear=True),
        one("self_attn.kv_a_layernorm.weight", "self_attn.kv_a_layernorm.weight"),
        one("self_attn.kv_b_proj.weight", "self_attn.kv_b_proj.weight", linear=True),
        one("self_attn.o_proj.weight", "self_attn.o_proj.weight", linear=True),
    )


def fc_block(
    fc: str,
    source: Source,
    *absent: Case,
    bias: When = never,
    fc_norm: str | None = None,
    input_norm: str | None = None,
    quantizable: bool = True,
    needs_aux: bool = True,
    fc_norm_read: When = lambda d: d.spec.fc_norm,
) -> tuple[Param, ...]:
    """fc (sized by the engine's aux count), its bias, the per-chunk fc_norm and the input_norm before it.
    ``quantizable``: fc is built with the drafter's quant config (False: a plain torch.nn.Linear); ``needs_aux``:
    only built when eagle_config.use_aux_hidden_state is not false; ``fc_norm_read``: whether the engine builds
    fc_norm (the config keys it reads)."""
    built: When = (lambda d: d.use_aux) if needs_aux else (lambda d: True)
    out: tuple[Param, ...] = (
        Param(
            f"{fc}.weight",
            lambda d: (d.hidden, d.fc_aux * d.target_hidden),
            source,
            exists=built,
            absent=absent,
            module="fc" if quantizable else None,
        ),
        Param(f"{fc}.bias", lambda d: d.shape("fc.bias"), source, exists=lambda d: built(d) and bias(d), absent=absent),
    )
    if input_norm is not None:
        out += (
            Param(
                f"{input_norm}.weight",
                lambda d: (d.fc_aux * d.target_hidden,),
                source,
                exists=lambda d: built(d) and d.spec.norm_before_fc,
                absent=absent,
            ),
        )
    if fc_norm is not None:
        out += tuple(
            Param(
                f"{fc_norm}.{i}.weight",
                lambda d: (d.target_hidden,),
                source,
                exists=_chunk(i, built, fc_norm_read),
                absent=absent,
            )
            for i in range(MAX_AUX)
        )
    return out


def _chunk(index: int, built: When, read: When) -> When:
    """fc_norm.{index} exists when fc_norm is configured and fc takes more than ``index`` hidden states."""
    return lambda d: built(d) and read(d) and d.fc_aux > index
