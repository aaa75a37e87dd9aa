"""The tensor shapes a drafter's settings imply, under canonical (SpecForge) names: every layer, Llama or MLA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .spec import AUX_KEY, Config, DrafterSpec, MlaDims, Setting, layer_prefix


@dataclass(frozen=True)
class Expected:
    """A tensor shape a config implies, and the settings it follows from."""

    shape: tuple[int, ...]
    because: str


def shapes_of(c: DrafterSpec) -> dict[str, Expected]:
    """Only tensors whose every dimension the config determines are listed."""
    out: dict[str, Expected] = {}
    if c.hidden is None:
        return out
    h = c.hidden.value

    def put(name: str, shape: tuple[int, ...], *why: Setting | str | None) -> None:
        out[name] = Expected(shape, ", ".join(str(w) for w in why if w is not None))

    put("norm.weight", (h,), c.hidden)
    target = c.target_hidden or c.hidden
    aux = c.num_aux_hidden_states or c.aux_layer_ids
    n_aux = c.fc_aux_count(tuple(found.key for found in c.aux_ids[:1]))
    if c.num_aux_hidden_states is not None:
        aux_why = f"{n_aux} aux layers ({c.num_aux_hidden_states})"
    elif aux is not None:
        aux_why = f"{n_aux} aux layers ({aux})"
    else:
        aux_why = f"{n_aux} aux layers (the default: no {AUX_KEY})"
    if c.use_aux:  # with use_aux_hidden_state false, engines skip fc
        put("fc.weight", (h, n_aux * target.value), c.hidden, f"{aux_why} × target hidden ({target})")
        put("fc.bias", (h,), c.hidden)
        put("input_norm.weight", (n_aux * target.value,), f"{aux_why} × target hidden ({target})")
        for i in range(n_aux):
            put(f"fc_norm.{i}.weight", (target.value,), target)
    for index in range(c.layer_count):
        prefix = layer_prefix(index)
        width, width_why = (2 * h, f"input 2 × {c.hidden}") if index == 0 else (h, f"input {c.hidden} (layer {index})")
        for norm in ("hidden_norm", "input_layernorm", "post_attention_layernorm"):
            put(f"{prefix}{norm}.weight", (h,), c.hidden)
        if c.mla is not None:
            _mla_shapes(c, c.mla, prefix, width, width_why, put)
        else:
            _llama_attention_shapes(c, prefix, width, width_why, put)
        if c.intermediate is not None:
            i = c.intermediate.value
            put(f"{prefix}mlp.gate_proj.weight", (i, h), c.intermediate, c.hidden)
            put(f"{prefix}mlp.up_proj.weight", (i, h), c.intermediate, c.hidden)
            put(f"{prefix}mlp.down_proj.weight", (h, i), c.hidden, c.intermediate)
            put(f"{prefix}mlp.gate_proj.bias", (i,), c.intermediate)
            put(f"{prefix}mlp.up_proj.bias", (i,), c.intermediate)
            put(f"{prefix}mlp.down_proj.bias", (h,), c.hidden)
    if c.vocab is not None:
        put("embed_tokens.weight", (c.vocab.value, h), c.vocab, c.hidden)
        put("t2d", (c.vocab.value,), c.vocab)
    head_rows = c.draft_vocab or c.vocab
    if head_rows is not None:
        put("lm_head.weight", (head_rows.value, h), head_rows, c.hidden)
    if c.draft_vocab is not None:
        put("d2t", (c.draft_vocab.value,), c.draft_vocab)
    return out


def _llama_attention_shapes(c: DrafterSpec, prefix: str, width: int, width_why: str, put: Any) -> None:
    if c.heads is None or c.hidden is None:
        return
    q_out, kv_out = c.q_out(), c.kv_out()
    if q_out is None or kv_out is None:
        return
    head_why: Setting | str = c.head_dim if c.head_dim else f"head_dim = {c.hidden} / {c.heads}"
    kv_heads = c.kv_heads or c.heads
    attn = f"{prefix}self_attn."
    put(f"{attn}q_proj.weight", (q_out, width), c.heads, head_why, width_why)
    put(f"{attn}k_proj.weight", (kv_out, width), kv_heads, head_why, width_why)
    put(f"{attn}v_proj.weight", (kv_out, width), kv_heads, head_why, width_why)
    put(f"{attn}o_proj.weight", (c.hidden.value, q_out), c.hidden, c.heads, head_why)
    put(f"{attn}q_proj.bias", (q_out,), c.heads, head_why)
    put(f"{attn}k_proj.bias", (kv_out,), kv_heads, head_why)
    put(f"{attn}v_proj.bias", (kv_out,), kv_heads, head_why)
    put(f"{attn}o_proj.bias", (c.hidden.value,), c.hidden)


def _mla_shapes(c: DrafterSpec, m: MlaDims, prefix: str, width: int, width_why: str, put: Any) -> None:
    """DeepSeek-V2 MLA projections (modeling_deepseek's names): low-rank q and a shared kv latent."""
    if c.heads is None or c.hidden is None:
        return
    heads, attn = c.heads.value, f"{prefix}self_attn."
    why = f"MLA: {c.heads}, kv_lora_rank={m.kv_lora_rank}, q_lora_rank={m.q_lora_rank}"
    q_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        put(f"{attn}q_a_proj.weight", (m.q_lora_rank, width), why, width_why)
        put(f"{attn}q_a_layernorm.weight", (m.q_lora_rank,), why)
        put(f"{attn}q_b_proj.weight", (heads * q_head, m.q_lora_rank), why)
    else:
        put(f"{attn}q_proj.weight", (heads * q_head, width), why, width_why)
    put(f"{attn}kv_a_proj_with_mqa.weight", (m.kv_lora_rank + m.qk_rope_head_dim, width), why, width_why)
    put(f"{attn}kv_a_layernorm.weight", (m.kv_lora_rank,), why)
    put(f"{attn}kv_b_proj.weight", (heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank), why)
    put(f"{attn}o_proj.weight", (c.hidden.value, heads * m.v_head_dim), c.hidden, why)


def expected_shapes(config: Config) -> dict[str, Expected]:
    """Canonical tensor name → the shape the drafter's own config.json implies (nn.Linear stores [out, in])."""
    return shapes_of(DrafterSpec.of(config))
