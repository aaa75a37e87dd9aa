"""The parameters of a Llama-style EAGLE-3 decoder layer (the layout every engine's llama_eagle3 builds).

Shapes are [out, in] like nn.Linear; the first layer's attention reads 2 x hidden (embeddings and hidden
states concatenated). Fused parameters are listed per shard, named ``param[shard]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rules import Case, Param, Source, When
from .settings import Draft


def never(_: Draft) -> bool:
    return False


@dataclass(frozen=True)
class Biases:
    """Which of the layer's linear layers have a bias, as the engine builds them from the config."""

    qkv: When = never
    o_proj: When = never
    mlp: When = never


NO_BIASES = Biases()


def _attn(d: Draft, out: int | None) -> tuple[int, ...] | None:
    return (out, 2 * d.hidden) if out else None


def decoder_layer(prefix: str, source: Source, *absent: Case, biases: Biases = NO_BIASES) -> tuple[Param, ...]:
    """The layer's parameters under ``prefix`` ("model.midlayer."); ``absent``: what an unfilled one becomes."""
    attn, mlp = f"{prefix}self_attn.", f"{prefix}mlp."
    return (
        _biases(attn, mlp, source, absent, biases)
        + (
            Param(f"{attn}qkv_proj.weight[q]", lambda d: _attn(d, d.q_out()), source, absent=absent),
            Param(f"{attn}qkv_proj.weight[k]", lambda d: _attn(d, d.kv_out()), source, absent=absent),
            Param(f"{attn}qkv_proj.weight[v]", lambda d: _attn(d, d.kv_out()), source, absent=absent),
            Param(
                f"{attn}o_proj.weight", lambda d: (d.hidden, d.q_out()) if d.q_out() else None, source, absent=absent
            ),
        )
        + _mlp_and_norms(prefix, source, absent)
    )


def mla_layer(prefix: str, source: Source, *absent: Case) -> tuple[Param, ...]:
    """An MLA (DeepSeek-style) EAGLE-3 layer: the norms and MLP are checked; attention is accepted by prefix."""
    return _mlp_and_norms(prefix, source, absent)


def _biases(attn: str, mlp: str, source: Source, absent: tuple[Case, ...], biases: Biases) -> tuple[Param, ...]:
    def one(name: str, size: str, when: When) -> Param:
        return Param(
            name, lambda d: (getattr(d, size)(),) if getattr(d, size)() else None, source, exists=when, absent=absent
        )

    return (
        one(f"{attn}qkv_proj.bias[q]", "q_out", biases.qkv),
        one(f"{attn}qkv_proj.bias[k]", "kv_out", biases.qkv),
        one(f"{attn}qkv_proj.bias[v]", "kv_out", biases.qkv),
        Param(f"{attn}o_proj.bias", lambda d: (d.hidden,), source, exists=biases.o_proj, absent=absent),
        Param(
            f"{mlp}gate_up_proj.bias[0]",
            lambda d: (d.intermediate,) if d.intermediate else None,
            source,
            exists=biases.mlp,
            absent=absent,
        ),
        Param(
            f"{mlp}gate_up_proj.bias[1]",
            lambda d: (d.intermediate,) if d.intermediate else None,
            source,
            exists=biases.mlp,
            absent=absent,
        ),
        Param(f"{mlp}down_proj.bias", lambda d: (d.hidden,), source, exists=biases.mlp, absent=absent),
    )


def _mlp_and_norms(prefix: str, source: Source, absent: tuple[Case, ...]) -> tuple[Param, ...]:
    """The parts every EAGLE-3 layer shares, whatever its attention: the gated MLP and the three norms."""
    mlp = f"{prefix}mlp."
    return (
        Param(
            f"{mlp}gate_up_proj.weight[0]",
            lambda d: (d.intermediate, d.hidden) if d.intermediate else None,
            source,
            absent=absent,
        ),
        Param(
            f"{mlp}gate_up_proj.weight[1]",
            lambda d: (d.intermediate, d.hidden) if d.intermediate else None,
            source,
            absent=absent,
        ),
        Param(
            f"{mlp}down_proj.weight",
            lambda d: (d.hidden, d.intermediate) if d.intermediate else None,
            source,
            absent=absent,
        ),
        Param(f"{prefix}input_layernorm.weight", lambda d: (d.hidden,), source, absent=absent),
        Param(f"{prefix}hidden_norm.weight", lambda d: (d.hidden,), source, absent=absent),
        Param(f"{prefix}post_attention_layernorm.weight", lambda d: (d.hidden,), source, absent=absent),
    )
