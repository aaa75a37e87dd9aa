"""The tensors of one MTP layer (DeepSeek-V3/GLM layout), as the names after ``model.layers.{L}.`` and the shapes
the config implies (None: not checked), as the engines build them from the target's config."""

from __future__ import annotations

from typing import Any

from ..spec import MtpSpec

Shape = tuple[int, ...] | None


def _int(text: Any, key: str) -> int | None:
    value = text.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def expected_layer(spec: MtpSpec, moe: bool | None = None) -> dict[str, Shape]:
    """``rest`` → shape for every tensor an MTP layer's parameters take (the spec weights, attention, MLP);
    ``moe``: whether the engine builds this layer's MLP with experts (None: whenever the config has experts)."""
    text = spec.text
    h, v = spec.hidden, spec.vocab
    out: dict[str, Shape] = {
        "embed_tokens.weight": (v, h) if v and h else None,
        "enorm.weight": (h,) if h else None,
        "hnorm.weight": (h,) if h else None,
        "eh_proj.weight": (h, 2 * h) if h else None,
        "shared_head.norm.weight": (h,) if h else None,
        "shared_head.head.weight": (v, h) if v and h else None,
        "input_layernorm.weight": (h,) if h else None,
        "post_attention_layernorm.weight": (h,) if h else None,
    }
    kv_lora = _int(text, "kv_lora_rank")
    if kv_lora is not None:  # MLA (DeepSeek-V2/V3, Kimi, GLM-MoE-DSA)
        q_lora = _int(text, "q_lora_rank")
        if q_lora is not None:
            out |= {
                "self_attn.q_a_proj.weight": None,
                "self_attn.q_a_layernorm.weight": (q_lora,),
                "self_attn.q_b_proj.weight": None,
            }
        else:
            out["self_attn.q_proj.weight"] = None
        out |= {
            "self_attn.kv_a_proj_with_mqa.weight": None,
            "self_attn.kv_a_layernorm.weight": (kv_lora,),
            "self_attn.kv_b_proj.weight": None,
            "self_attn.o_proj.weight": None,
        }
    else:
        out |= {f"self_attn.{p}_proj.weight": None for p in ("q", "k", "v", "o")}
        if text.get("attention_bias") is True:  # GLM-4.5: biases on q/k/v
            out |= {f"self_attn.{p}_proj.bias": None for p in ("q", "k", "v")}
    experts = _int(text, "n_routed_experts") or _int(text, "num_experts")
    if experts is not None and moe is not False:
        out["mlp.gate.weight"] = (experts, h) if h else None
        # DeepSeek-V3's router has the bias with noaux_tc routing; GLM-4.5's always does
        if text.get("topk_method") == "noaux_tc" or spec.model_type == "glm4_moe":
            out["mlp.gate.e_score_correction_bias"] = (experts,)
        for e in range(experts):
            out |= {f"mlp.experts.{e}.{p}_proj.weight": None for p in ("gate", "up", "down")}
        if _int(text, "n_shared_experts"):
            out |= {f"mlp.shared_experts.{p}_proj.weight": None for p in ("gate", "up", "down")}
    else:
        out |= {f"mlp.{p}_proj.weight": None for p in ("gate", "up", "down")}
    return out
