"""The MTP family's oracle cases: small checkpoints carrying MTP layers, as the engines' MTP loaders read them.

A case is either a target that carries its MTP layers (DeepSeek-V3/Kimi-K2/GLM-4.5 ``model.layers.{N+i}.*`` after
its ``num_hidden_layers`` main layers; Qwen3-Next ``mtp.*``), checked as ckptdiff's users check it, with no
``--base`` (``ckptdiff TARGET --engine ...``); or a standalone NextN export beside the target it serves (``target``
set: checked with ``--base TARGET``, loaded as ``speculative_draft_model_path`` / the speculative ``model``).
Sizes are tiny (hidden 64, vocabulary 256, two routed experts); what matters is the names, the shapes the configs
imply and the config keys the loaders read. The cases themselves are in mtp_catalogue.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cases import HIDDEN, VOCAB, write_safetensors

H, V = HIDDEN, VOCAB
E, MOE, Q, KV, INTER = 2, 32, 32, 32, 128
NOPE, ROPE_DIM, V_DIM, HEADS = 16, 8, 16, 4
YARN = {
    "type": "yarn",
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 1.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
#: FP8 block size of the quantized cases (DeepSeek-V3's 128 x 128, scaled down to the tiny shapes).
BLOCK = 16
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]}

Tensor = tuple[str, str, tuple[int, ...]]


@dataclass(frozen=True)
class MtpCase:
    """One checkpoint with MTP layers: its config.json and tensors; ``target``: the config of the target a
    standalone export is served beside (None: the checkpoint is the target)."""

    name: str
    about: str
    config: Mapping[str, Any]
    tensors: tuple[Tensor, ...]
    target: Mapping[str, Any] | None = None
    split: str = "main"
    not_comparable: Mapping[str, str] = field(default_factory=dict)
    family: str = "mtp"
    #: Not an EAGLE-3 drafter: no target-layer outputs it was trained on (compare.py reads this field).
    trained_outputs: tuple[int, ...] | None = None

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.tensors]

    @property
    def drafter_names(self) -> set[str]:
        """The tensors of its MTP layers, as the case's story goes (the rest are the target's own)."""
        target = {name for name, _, _ in main_tensors()} if self.target is None else set()
        return {name for name in self.names if name not in target}


# ---- configs


def deepseek_config(**overrides: Any) -> dict[str, Any]:
    """A DeepSeek-V3-class target (MLA, MoE from layer 1) with ``num_hidden_layers`` 2 and one MTP layer."""
    config: dict[str, Any] = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": H,
        "intermediate_size": INTER,
        "moe_intermediate_size": MOE,
        "num_hidden_layers": 2,
        "num_nextn_predict_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "q_lora_rank": Q,
        "kv_lora_rank": KV,
        "qk_nope_head_dim": NOPE,
        "qk_rope_head_dim": ROPE_DIM,
        "v_head_dim": V_DIM,
        "n_routed_experts": E,
        "n_shared_experts": 1,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "routed_scaling_factor": 1.0,
        "norm_topk_prob": True,
        "vocab_size": V,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "rope_scaling": YARN,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    return _merged(config, overrides)


def glm_config(**overrides: Any) -> dict[str, Any]:
    """A GLM-4.5-class target (Glm4MoeForCausalLM: GQA with biases, partial rotary, MoE from layer 1)."""
    config: dict[str, Any] = {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "hidden_size": H,
        "intermediate_size": INTER,
        "moe_intermediate_size": MOE,
        "num_hidden_layers": 2,
        "num_nextn_predict_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "partial_rotary_factor": 0.5,
        "attention_bias": True,
        "use_qk_norm": False,
        "n_routed_experts": E,
        "n_shared_experts": 1,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "routed_scaling_factor": 1.0,
        "norm_topk_prob": True,
        "vocab_size": V,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    return _merged(config, overrides)


#: A scaled-down Qwen3-Next (Qwen3NextForCausalLM: gated delta-net layers with a full-attention layer every
#: full_attention_interval, gated attention (q_proj twice the heads), MoE with a gated shared expert), its MTP block
#: under ``mtp.*``. No num_nextn_predict_layers key, as Qwen/Qwen3-Next-80B-A3B's config.json.
QN_HEADS, QN_KV, QN_HEAD_DIM, QN_SHARED = 4, 2, 16, 32


def qwen3_next_config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "hidden_size": H,
        "intermediate_size": INTER,
        "moe_intermediate_size": MOE,
        "shared_expert_intermediate_size": QN_SHARED,
        "num_hidden_layers": 4,
        "full_attention_interval": 4,
        "num_attention_heads": QN_HEADS,
        "num_key_value_heads": QN_KV,
        "head_dim": QN_HEAD_DIM,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "num_experts": E,
        "num_experts_per_tok": 1,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "partial_rotary_factor": 0.25,
        "vocab_size": V,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    return _merged(config, overrides)


def qwen3_next_fp8_ignored(layers: int = 4, interval: int = 4) -> list[str]:
    """modules_to_not_convert as Qwen/Qwen3-Next-80B-A3B-Instruct-FP8's config.json lists it, for a target of
    ``layers`` layers: the head, every layer's norms, router and shared-expert gate, the gated delta-net layers'
    small pieces, the full-attention layers' q/k norms, and in the MTP block mtp.fc, its norms and gates."""
    out = ["lm_head"]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [p + "input_layernorm", p + "mlp.gate", p + "mlp.shared_expert_gate", p + "post_attention_layernorm"]
        if (i + 1) % interval:
            out += [p + f"linear_attn.{n}" for n in ("A_log", "conv1d", "dt_bias", "in_proj_ba", "norm")]
        else:
            out += [p + "self_attn.k_norm", p + "self_attn.q_norm"]
    m = "mtp.layers.0."
    out += ["mtp.fc", m + "input_layernorm", m + "mlp.gate", m + "mlp.shared_expert_gate"]
    out += [m + "post_attention_layernorm", m + "self_attn.k_norm", m + "self_attn.q_norm"]
    return out + ["mtp.norm", "mtp.pre_fc_norm_embedding", "mtp.pre_fc_norm_hidden"]


#: Qwen/Qwen3-Next-80B-A3B-Instruct-FP8's quantization_config (block 128 scaled down to the tiny shapes' 16).
QN_FP8_CONFIG = {**FP8_CONFIG, "modules_to_not_convert": qwen3_next_fp8_ignored()}


def _merged(config: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(config)
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


# ---- tensors


def _linear(name: str, shape: tuple[int, int], fp8: bool, block: int = BLOCK) -> list[Tensor]:
    if not fp8:
        return [(name + ".weight", "BF16", shape)]
    blocks = (-(-shape[0] // block), -(-shape[1] // block))
    return [(name + ".weight", "F8_E4M3", shape), (name + ".weight_scale_inv", "F32", blocks)]


def mtp_layer(
    layer: int,
    *,
    family: str = "deepseek",
    moe: bool = True,
    embed: bool = True,
    head: bool = True,
    drop: Iterable[str] = (),
    fp8: bool = False,
    experts: int = E,
) -> list[Tensor]:
    """The tensors of MTP layer ``layer`` (``model.layers.{layer}.``): its own (enorm, hnorm, eh_proj,
    shared_head, a copy of embed_tokens) and a decoder block (DeepSeek: MLA; GLM: GQA with biases), dense or MoE.
    ``drop``: pieces of names to leave out."""
    p = f"model.layers.{layer}."
    out: list[Tensor] = [
        (p + "enorm.weight", "BF16", (H,)),
        (p + "hnorm.weight", "BF16", (H,)),
        *_linear(p + "eh_proj", (H, 2 * H), fp8),
        (p + "shared_head.norm.weight", "BF16", (H,)),
        (p + "input_layernorm.weight", "BF16", (H,)),
        (p + "post_attention_layernorm.weight", "BF16", (H,)),
    ]
    if head:
        out.append((p + "shared_head.head.weight", "BF16", (V, H)))
    if embed:
        out.append((p + "embed_tokens.weight", "BF16", (V, H)))
    a = p + "self_attn."
    if family == "deepseek":
        out += [
            *_linear(a + "q_a_proj", (Q, H), fp8),
            (a + "q_a_layernorm.weight", "BF16", (Q,)),
            *_linear(a + "q_b_proj", (HEADS * (NOPE + ROPE_DIM), Q), fp8),
            *_linear(a + "kv_a_proj_with_mqa", (KV + ROPE_DIM, H), fp8),
            (a + "kv_a_layernorm.weight", "BF16", (KV,)),
            *_linear(a + "kv_b_proj", (HEADS * (NOPE + V_DIM), KV), fp8),
            *_linear(a + "o_proj", (H, HEADS * V_DIM), fp8),
        ]
    else:  # GLM-4.5: GQA, head_dim 16, two KV heads, biases on q/k/v
        out += [
            (a + "q_proj.weight", "BF16", (HEADS * 16, H)),
            (a + "q_proj.bias", "BF16", (HEADS * 16,)),
            (a + "k_proj.weight", "BF16", (2 * 16, H)),
            (a + "k_proj.bias", "BF16", (2 * 16,)),
            (a + "v_proj.weight", "BF16", (2 * 16, H)),
            (a + "v_proj.bias", "BF16", (2 * 16,)),
            (a + "o_proj.weight", "BF16", (H, HEADS * 16)),
        ]
    m = p + "mlp."
    if moe:
        out += [(m + "gate.weight", "BF16", (experts, H)), (m + "gate.e_score_correction_bias", "F32", (experts,))]
        for e in range(experts):
            out += _linear(m + f"experts.{e}.gate_proj", (MOE, H), fp8)
            out += _linear(m + f"experts.{e}.up_proj", (MOE, H), fp8)
            out += _linear(m + f"experts.{e}.down_proj", (H, MOE), fp8)
        out += _linear(m + "shared_experts.gate_proj", (MOE, H), fp8)
        out += _linear(m + "shared_experts.up_proj", (MOE, H), fp8)
        out += _linear(m + "shared_experts.down_proj", (H, MOE), fp8)
    else:
        out += _linear(m + "gate_proj", (INTER, H), fp8)
        out += _linear(m + "up_proj", (INTER, H), fp8)
        out += _linear(m + "down_proj", (H, INTER), fp8)
    dropped = tuple(drop)
    return [t for t in out if not any(piece in t[0] for piece in dropped)]


def qwen3_next_mtp(
    *,
    layers: int = 1,
    drop: Iterable[str] = (),
    experts: int = E,
    heads: int = QN_HEADS,
    kv: int = QN_KV,
    fp8: bool = False,
    fp8_fc: bool = False,
    block: int = BLOCK,
    moe: int = MOE,
) -> list[Tensor]:
    """Qwen3-Next's MTP block (``mtp.``): fc over [embedding; hidden], its two pre-fc norms, the final norm, and
    ``layers`` full-attention MoE decoder layers (gated q_proj, q/k norms, routed experts, a gated shared expert).
    ``drop``: pieces of names to leave out. ``fp8``: the linears Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 quantizes
    (q/k/v/o_proj, the shared expert, the routed experts) stored as FP8 blocks with their ``weight_scale_inv``;
    ``fp8_fc``: mtp.fc too (the published export keeps it BF16, in modules_to_not_convert); ``block``: their scale
    grid; ``moe``: the routed experts' width."""
    d = QN_HEAD_DIM
    out: list[Tensor] = [
        *_linear("mtp.fc", (H, 2 * H), fp8_fc, block),
        ("mtp.pre_fc_norm_embedding.weight", "BF16", (H,)),
        ("mtp.pre_fc_norm_hidden.weight", "BF16", (H,)),
        ("mtp.norm.weight", "BF16", (H,)),
    ]
    for layer in range(layers):
        p = f"mtp.layers.{layer}."
        out += [
            (p + "input_layernorm.weight", "BF16", (H,)),
            (p + "post_attention_layernorm.weight", "BF16", (H,)),
            *_linear(p + "self_attn.q_proj", (2 * heads * d, H), fp8, block),
            *_linear(p + "self_attn.k_proj", (kv * d, H), fp8, block),
            *_linear(p + "self_attn.v_proj", (kv * d, H), fp8, block),
            *_linear(p + "self_attn.o_proj", (H, heads * d), fp8, block),
            (p + "self_attn.q_norm.weight", "BF16", (d,)),
            (p + "self_attn.k_norm.weight", "BF16", (d,)),
            (p + "mlp.gate.weight", "BF16", (experts, H)),
            (p + "mlp.shared_expert_gate.weight", "BF16", (1, H)),
            *_linear(p + "mlp.shared_expert.gate_proj", (QN_SHARED, H), fp8, block),
            *_linear(p + "mlp.shared_expert.up_proj", (QN_SHARED, H), fp8, block),
            *_linear(p + "mlp.shared_expert.down_proj", (H, QN_SHARED), fp8, block),
        ]
        for e in range(experts):
            out += [
                *_linear(p + f"mlp.experts.{e}.gate_proj", (moe, H), fp8, block),
                *_linear(p + f"mlp.experts.{e}.up_proj", (moe, H), fp8, block),
                *_linear(p + f"mlp.experts.{e}.down_proj", (H, moe), fp8, block),
            ]
    dropped = tuple(drop)
    return [t for t in out if not any(piece in t[0] for piece in dropped)]


def main_tensors(*, embed: bool = True, head: bool = True) -> list[Tensor]:
    """The target's own tensors outside its MTP layers (a few: the MTP loaders skip the rest)."""
    out: list[Tensor] = [
        ("model.norm.weight", "BF16", (H,)),
        ("model.layers.0.input_layernorm.weight", "BF16", (H,)),
        ("model.layers.1.input_layernorm.weight", "BF16", (H,)),
    ]
    if embed:
        out.append(("model.embed_tokens.weight", "BF16", (V, H)))
    if head:
        out.append(("lm_head.weight", "BF16", (V, H)))
    return out


def mtp_case(
    name: str,
    about: str,
    config: Mapping[str, Any],
    tensors: Iterable[Tensor],
    *,
    target: Mapping[str, Any] | None = None,
    not_comparable: Mapping[str, str] | None = None,
) -> MtpCase:
    ordered = tuple(sorted({t[0]: t for t in tensors}.values()))
    return MtpCase(name, about, dict(config), ordered, target, not_comparable=dict(not_comparable or {}))


def inert(case: MtpCase, result: Mapping[str, Any]) -> Callable[[str], bool]:
    """Tensors whose going unused is no degradation: the target's own beside its MTP layers, and an MTP layer's
    copies of the embedding and head when the engine takes those from the target (SGLang skips them)."""
    taken = list(result.get("from_target") or [])
    embed = any(p.endswith("embed_tokens.weight") for p in taken)
    head = any(p.endswith(("lm_head.weight", "shared_head.head.weight")) for p in taken)
    mine = case.drafter_names

    def check(name: str) -> bool:
        if name not in mine:
            return True
        return (embed and name.endswith("embed_tokens.weight")) or (head and name.endswith("shared_head.head.weight"))

    return check


# ---- writing


TARGET_PREFIX = "_target_mtp_"


def write_mtp_cases(root: Path, cases: list[Any]) -> dict[str, tuple[Path, Path | None]]:
    """Every case under ``root``: name → (its folder, its target's folder, or None when it is the target)."""
    out: dict[str, tuple[Path, Path | None]] = {}
    for case in cases:
        folder = root / case.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(case.config, indent=1, sort_keys=True))
        write_safetensors(folder / "model.safetensors", {n: (d, list(s)) for n, d, s in case.tensors})
        base = None
        if case.target is not None:
            base = root / f"{TARGET_PREFIX}{case.name}"
            base.mkdir(parents=True, exist_ok=True)
            (base / "config.json").write_text(json.dumps(case.target, indent=1, sort_keys=True))
            hidden, vocab = int(case.target.get("hidden_size", H)), int(case.target.get("vocab_size", V))
            tensors = {n: (d, [vocab if x == V else hidden if x == H else x for x in s]) for n, d, s in main_tensors()}
            write_safetensors(base / "model.safetensors", tensors)
        out[case.name] = (folder, base)
    return out
