"""The oracle's generated drafter checkpoints: each case is data (a few edits to one small drafter), written on demand.

A case starts from a one-layer Llama-style EAGLE-3 drafter with SpecForge names (``midlayer.*``, ``fc``,
``norm``, ``lm_head``, ``d2t``, ``t2d``), hidden size 64, a 256-token vocabulary and a 128-token draft
vocabulary, and a tiny 32-layer Llama target. Each ``Case`` says what differs. Files hold real (zero) data, a
few KB each; the worker rewrites them with markers.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, VOCAB, DRAFT_VOCAB = 64, 128, 4, 2, 256, 128
TARGET_LAYERS = 32
#: MLA attention sizes (a scaled-down Kimi/DeepSeek drafter).
Q_LORA, KV_LORA, NOPE, ROPE, V_DIM = 32, 32, 16, 8, 16
AUX_KEY = "eagle_aux_hidden_state_layer_ids"
#: Kimi-K2's long-context rope, on every MLA case (SGLang's CPU rope factory also requires one for MLA).
KIMI_ROPE = {
    "type": "yarn",
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 1.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I8": 1, "BOOL": 1, "F8_E4M3": 1, "U8": 1}
TARGET_NAME = "_target"

Tensors = dict[str, tuple[str, list[int]]]


@dataclass(frozen=True)
class Case:
    """One generated drafter: how it differs from the base drafter.

    ``config``: keys merged into config.json (dotted keys reach into sections; the value None removes a key).
    ``layers``: decoder layers stored; ``layer_names``: how layer i is named ("midlayer": ``midlayer.*`` then
    ``midlayer.{i}.*``; "layers": ``layers.{i}.*``; "additional_layers": ``midlayer.*`` then
    ``additional_layers.{i-1}.*``). ``drop``: names to leave out (exact); ``add``: tensors added or replaced
    (name → (dtype, shape)); ``prefix``: put before every name but d2t/t2d. ``not_comparable``: engine →
    why that engine cannot be asked about this case here (an environment limit, not the drafter).
    """

    name: str
    about: str
    config: Mapping[str, Any] = field(default_factory=dict)
    attention: str = "llama"  # "llama" or "mla"
    layers: int = 1
    hidden: int = HIDDEN  # the drafter's hidden size (the target's is HIDDEN; fc reads 3 x HIDDEN)
    layer_names: str = "midlayer"
    dtype: str = "BF16"
    drop: tuple[str, ...] = ()
    add: Mapping[str, tuple[str, list[int]]] = field(default_factory=dict)
    prefix: str = ""
    #: The target-layer outputs the drafter was trained on (-1: the embeddings), as the case's story goes;
    #: None: nothing says (the engine's default capture is then taken as what it was trained on).
    trained_outputs: tuple[int, ...] | None = (1, 15, 28)
    speculators: bool = False  # the speculators format: settings under transformer_layer_config
    not_comparable: Mapping[str, str] = field(default_factory=dict)
    target: Target = field(default_factory=lambda: Target())
    #: Which split the case belongs to: "main" (the job), or "held-out" (written before the rules it checks
    #: were fixed; scored separately by run.py --split held-out).
    split: str = "main"
    #: The oracle family that runs it (oracle_families.py): "eagle3", or "eagle3_k25" against a Kimi-K2.5 target,
    #: "eagle3_llama4" against a Llama-4 one.
    family: str = "eagle3"


def base_config(case: Case) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": case.hidden,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "num_hidden_layers": case.layers,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "eagle_config": {AUX_KEY: [1, 15, 28], "use_aux_hidden_state": True},
    }
    if case.hidden != HIDDEN:
        config["target_hidden_size"] = HIDDEN
    if case.attention == "mla":
        config.update(
            architectures=["Eagle3DeepseekV2ForCausalLM"],
            model_type="deepseek_v3",
            q_lora_rank=Q_LORA,
            kv_lora_rank=KV_LORA,
            qk_nope_head_dim=NOPE,
            qk_rope_head_dim=ROPE,
            v_head_dim=V_DIM,
            rope_scaling=KIMI_ROPE,
            num_key_value_heads=HEADS,
        )
    if case.speculators:
        layer = {k: config.pop(k) for k in list(config) if k not in ("tie_word_embeddings", "torch_dtype")}
        layer.pop("eagle_config")
        layer.pop("draft_vocab_size")
        layer["architectures"] = ["LlamaForCausalLM"]
        config = {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "speculators_version": "0.2.0",
            "draft_vocab_size": DRAFT_VOCAB,
            "norm_before_residual": False,
            "target_hidden_size": None,
            "eagle_aux_hidden_state_layer_ids": [2, 16, 29],
            "transformer_layer_config": layer,
            "speculators_config": {
                "algorithm": "eagle3",
                "default_proposal_method": "greedy",
                "proposal_methods": [
                    {"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1, "accept_tolerance": 0}
                ],
                "verifier": {"name_or_path": "target", "architectures": ["LlamaForCausalLM"]},
            },
            **config,
        }
    for key, value in case.config.items():
        _set(config, key, value)
    return config


#: A ``Case.config`` value written as JSON ``null`` (None removes the key).
JSON_NULL = object()


def _set(config: dict[str, Any], dotted: str, value: Any) -> None:
    *sections, last = dotted.split(".")
    holder = config
    for section in sections:
        holder = holder.setdefault(section, {})
    if value is None:
        holder.pop(last, None)
    else:
        holder[last] = None if value is JSON_NULL else value


def _layer(prefix: str, first: bool, dtype: str, attention: str, hidden: int) -> Tensors:
    width = 2 * hidden if first else hidden
    head_dim = hidden // HEADS
    attn = f"{prefix}.self_attn."
    if attention == "mla":
        tensors: Tensors = {
            f"{attn}q_a_proj.weight": (dtype, [Q_LORA, width]),
            f"{attn}q_a_layernorm.weight": (dtype, [Q_LORA]),
            f"{attn}q_b_proj.weight": (dtype, [HEADS * (NOPE + ROPE), Q_LORA]),
            f"{attn}kv_a_proj_with_mqa.weight": (dtype, [KV_LORA + ROPE, width]),
            f"{attn}kv_a_layernorm.weight": (dtype, [KV_LORA]),
            f"{attn}kv_b_proj.weight": (dtype, [HEADS * (NOPE + V_DIM), KV_LORA]),
            f"{attn}o_proj.weight": (dtype, [hidden, HEADS * V_DIM]),
        }
    else:
        tensors = {
            f"{attn}q_proj.weight": (dtype, [HEADS * head_dim, width]),
            f"{attn}k_proj.weight": (dtype, [KV_HEADS * head_dim, width]),
            f"{attn}v_proj.weight": (dtype, [KV_HEADS * head_dim, width]),
            f"{attn}o_proj.weight": (dtype, [hidden, HEADS * head_dim]),
        }
    tensors.update(
        {
            f"{prefix}.mlp.gate_proj.weight": (dtype, [INTERMEDIATE, hidden]),
            f"{prefix}.mlp.up_proj.weight": (dtype, [INTERMEDIATE, hidden]),
            f"{prefix}.mlp.down_proj.weight": (dtype, [hidden, INTERMEDIATE]),
            f"{prefix}.input_layernorm.weight": (dtype, [hidden]),
            f"{prefix}.post_attention_layernorm.weight": (dtype, [hidden]),
            f"{prefix}.hidden_norm.weight": (dtype, [hidden]),
        }
    )
    return tensors


def _layer_prefix(case: Case, i: int) -> str:
    if case.layer_names == "layers":
        return f"layers.{i}"
    if i == 0:
        return "midlayer"
    return f"midlayer.{i}" if case.layer_names == "midlayer" else f"additional_layers.{i - 1}"


def tensors_of(case: Case) -> Tensors:
    tensors: Tensors = {}
    for i in range(case.layers):
        tensors.update(_layer(_layer_prefix(case, i), i == 0, case.dtype, case.attention, case.hidden))
    tensors["fc.weight"] = (case.dtype, [case.hidden, 3 * HIDDEN])
    tensors["norm.weight"] = (case.dtype, [case.hidden])
    tensors["lm_head.weight"] = (case.dtype, [DRAFT_VOCAB, case.hidden])
    tensors["d2t"] = ("I64", [DRAFT_VOCAB])
    tensors["t2d"] = ("BOOL", [VOCAB])
    for name in case.drop:
        if name not in tensors:
            raise ValueError(f"case {case.name}: drop names {name}, which the base drafter does not have")
        del tensors[name]
    tensors.update({name: (dtype, list(shape)) for name, (dtype, shape) in case.add.items()})
    if case.prefix:
        tensors = {(n if n in ("d2t", "t2d") else case.prefix + n): spec for n, spec in tensors.items()}
    return dict(sorted(tensors.items()))


def write_safetensors(path: Path, tensors: Tensors) -> None:
    """A real safetensors file of zeros (t2d: the first DRAFT_VOCAB ids in the draft vocabulary)."""
    header: dict[str, Any] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    data = bytearray(offset)
    if "t2d" in header:
        start = header["t2d"]["data_offsets"][0]
        data[start : start + DRAFT_VOCAB] = b"\1" * DRAFT_VOCAB
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + bytes(data))


#: The target model classes a case can name: class → (architecture, model_type, config keys of that class).
#: Sizes are tiny; what matters is the class the engines pick for it and its depth.
TARGET_CLASSES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaForCausalLM", "llama", {}),
    "qwen2": ("Qwen2ForCausalLM", "qwen2", {}),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", {"head_dim": HIDDEN // HEADS}),
    "qwen3_moe": (
        "Qwen3MoeForCausalLM",
        "qwen3_moe",
        {"head_dim": HIDDEN // HEADS, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    ),
    "deepseek_v3": (
        "DeepseekV3ForCausalLM",
        "deepseek_v3",
        {
            "q_lora_rank": Q_LORA,
            "kv_lora_rank": KV_LORA,
            "qk_nope_head_dim": NOPE,
            "qk_rope_head_dim": ROPE,
            "v_head_dim": V_DIM,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "rope_scaling": KIMI_ROPE,
            "num_key_value_heads": HEADS,
        },
    ),
    "gpt_oss": (
        "GptOssForCausalLM",
        "gpt_oss",
        {"head_dim": HIDDEN // HEADS, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 128},
    ),
    # Classes an engine refuses EAGLE-3 for (no SupportsEagle3 in vLLM; no set_eagle3_layers_to_capture in SGLang
    # for Gemma-2 and Mixtral; SGLang's Glm4Moe has one): the refusal is what these targets test.
    "gemma2": (
        "Gemma2ForCausalLM",
        "gemma2",
        {"head_dim": HIDDEN // HEADS, "query_pre_attn_scalar": HIDDEN // HEADS, "sliding_window": 128},
    ),
    "mixtral": ("MixtralForCausalLM", "mixtral", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    # Llama-4's text model (Llama4TextConfig): every layer MoE, as Maverick's interleave of 1 in Scout
    "llama4_text": (
        "Llama4ForCausalLM",
        "llama4_text",
        {
            "head_dim": HIDDEN // HEADS,
            "intermediate_size_mlp": INTERMEDIATE,
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 1,
        },
    ),
    "glm4_moe": (
        "Glm4MoeForCausalLM",
        "glm4_moe",
        {
            "head_dim": HIDDEN // HEADS,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
}


#: Multimodal wrappers around a text model of TARGET_CLASSES: class → (architecture, model_type, the text model's
#: class). Kimi-K2.5: KimiK25ForConditionalGeneration over a DeepSeek-V3-class text model (model_type kimi_k2);
#: Llama-4: Llama4ForConditionalGeneration over Llama4ForCausalLM (llama4_text); each in text_config, beside a
#: vision tower; the workers read such a target through worker_k25_<engine>.py.
WRAPPED_TARGETS: dict[str, tuple[str, str, str]] = {
    "kimi_k25": ("KimiK25ForConditionalGeneration", "kimi_k25", "deepseek_v3"),
    "llama4": ("Llama4ForConditionalGeneration", "llama4", "llama4_text"),
}
#: Kimi-K2.5's vision tower, scaled down (moonshotai/Kimi-K2.5 config.json: moonvit3d, patch 14, merge 2 x 2).
K25_VISION = {
    "model_type": "moonvit3d",
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "patch_size": 14,
    "merge_kernel_size": [2, 2],
    "text_hidden_size": HIDDEN,
}
#: Llama-4's vision tower, scaled down (Llama4VisionConfig's keys: patch 14, pixel shuffle 0.5).
LLAMA4_VISION = {
    "model_type": "llama4_vision_model",
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "image_size": 28,
    "patch_size": 14,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 64,
    "projector_output_dim": 64,
    "vision_output_dim": 64,
}
#: Each wrapper's own keys: its text model's model_type, the keys beside text_config, its vision tower.
WRAPPED_KEYS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "kimi_k25": (
        "kimi_k2",
        {"media_placeholder_token_id": VOCAB - 6, "pad_token_id": VOCAB - 1, "tie_word_embeddings": False},
        K25_VISION,
    ),
    "llama4": ("llama4_text", {"image_token_index": VOCAB - 6, "tie_word_embeddings": False}, LLAMA4_VISION),
}


@dataclass(frozen=True)
class Target:
    """The target (base) model a case is checked against: its model class and depth."""

    model_class: str = "llama"
    layers: int = TARGET_LAYERS

    @property
    def name(self) -> str:
        default = self.model_class == "llama" and self.layers == TARGET_LAYERS
        return TARGET_NAME if default else f"{TARGET_NAME}_{self.model_class}_{self.layers}"

    @property
    def architecture(self) -> str:
        return (WRAPPED_TARGETS.get(self.model_class) or TARGET_CLASSES[self.model_class])[0]


def target_config(target: Target | None = None) -> dict[str, Any]:
    target = target or Target()
    if target.model_class in WRAPPED_TARGETS:
        architecture, model_type, text_class = WRAPPED_TARGETS[target.model_class]
        text = target_config(Target(text_class, target.layers))
        text_type, keys, vision = WRAPPED_KEYS[target.model_class]
        return {
            "architectures": [architecture],
            "model_type": model_type,
            **keys,
            "text_config": {**text, "model_type": text_type},
            "vision_config": vision,
        }
    architecture, model_type, extra = TARGET_CLASSES[target.model_class]
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "num_hidden_layers": target.layers,
        "vocab_size": VOCAB,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        **extra,
    }


def write_target(root: Path, target: Target | None = None) -> Path:
    target = target or Target()
    directory = root / target.name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(target_config(target), indent=1))
    prefix = "language_model." if target.model_class in WRAPPED_TARGETS else ""
    write_safetensors(
        directory / "model.safetensors",
        {
            f"{prefix}model.embed_tokens.weight": ("BF16", [VOCAB, HIDDEN]),
            f"{prefix}model.norm.weight": ("BF16", [HIDDEN]),
            f"{prefix}lm_head.weight": ("BF16", [VOCAB, HIDDEN]),
        },
    )
    return directory


def write_case(root: Path, case: Case) -> Path:
    directory = root / case.name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(base_config(case), indent=1))
    write_safetensors(directory / "model.safetensors", tensors_of(case))
    return directory


def digest(directory: Path) -> str:
    """What a case is, as bytes: every file's name and content (the cache key's case part)."""
    sha = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        sha.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()


def write_all(root: Path, cases: list[Case]) -> dict[str, Path]:
    """Every case (and each target a case names) under ``root``; returns case name → directory."""
    names = [case.name for case in cases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates or any(name.startswith(TARGET_NAME) for name in names):
        raise ValueError(f"case names must be unique and not start with {TARGET_NAME}: {duplicates}")
    root.mkdir(parents=True, exist_ok=True)
    write_target(root)
    for target in {case.target for case in cases}:
        write_target(root, target)
    return {case.name: write_case(root, case) for case in cases}


def target_dir(root: Path, case: Case) -> Path:
    return root / case.target.name


if __name__ == "__main__":  # python tests/oracle/cases.py DIR: write them for a look
    import sys

    from catalogue import CASES

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "oracle-cases")
    written = write_all(out, CASES)
    print(f"{len(written)} cases and {TARGET_NAME} in {os.fspath(out)}")
