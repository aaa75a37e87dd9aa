"""Sparse base models in the layouts real families publish (config.json nesting, tensor names, shard split).

Shapes and config keys follow the published config.json / model.safetensors.index.json of each family (see
ckptdiff/base_layouts.py for the sources). Only a few decoder layers are written; the config keeps
describing the real model. Files are sparse: header written, size set with truncate.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from fixtures.generate import KIMI_K2_BASE_CONFIG, TensorSpec, kimi_k2_base_layer, write_config, write_safetensors


def write_sharded(folder: Path, config: dict[str, Any] | None, shards: list[list[TensorSpec]]) -> Path:
    """``model-0000i-of-0000n.safetensors`` per list, an index mapping every tensor to its shard, config.json."""
    weight_map: dict[str, str] = {}
    total = 0
    for i, specs in enumerate(shards, 1):
        shard = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        total += write_safetensors(folder / shard, specs, metadata={"format": "pt"})
        weight_map.update({name: shard for name, _, _ in specs})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    if config is not None:
        write_config(folder, config)
    return folder


def llama_layer(prefix: str, layer: int, text: dict[str, Any]) -> list[TensorSpec]:
    """One Llama-style decoder layer (GQA attention, SwiGLU MLP) as transformers names it."""
    h, heads, kv = text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]
    head_dim = text.get("head_dim") or h // heads
    inter = text["intermediate_size"]
    p = f"{prefix}layers.{layer}"
    return [
        (f"{p}.input_layernorm.weight", "BF16", [h]),
        (f"{p}.self_attn.q_proj.weight", "BF16", [heads * head_dim, h]),
        (f"{p}.self_attn.k_proj.weight", "BF16", [kv * head_dim, h]),
        (f"{p}.self_attn.v_proj.weight", "BF16", [kv * head_dim, h]),
        (f"{p}.self_attn.o_proj.weight", "BF16", [h, heads * head_dim]),
        (f"{p}.post_attention_layernorm.weight", "BF16", [h]),
        (f"{p}.mlp.gate_proj.weight", "BF16", [inter, h]),
        (f"{p}.mlp.up_proj.weight", "BF16", [inter, h]),
        (f"{p}.mlp.down_proj.weight", "BF16", [h, inter]),
    ]


def vit_blocks(prefix: str, blocks: int, hidden: int, inter: int) -> list[TensorSpec]:
    """A vision tower's encoder blocks (enough of one to be a real-looking tower)."""
    specs: list[TensorSpec] = [(f"{prefix}patch_embed.proj.weight", "BF16", [hidden, 3, 14, 14])]
    for i in range(blocks):
        b = f"{prefix}blocks.{i}"
        specs += [
            (f"{b}.norm1.weight", "BF16", [hidden]),
            (f"{b}.attn.qkv.weight", "BF16", [3 * hidden, hidden]),
            (f"{b}.attn.proj.weight", "BF16", [hidden, hidden]),
            (f"{b}.norm2.weight", "BF16", [hidden]),
            (f"{b}.mlp.fc1.weight", "BF16", [inter, hidden]),
            (f"{b}.mlp.fc2.weight", "BF16", [hidden, inter]),
        ]
    return specs


# --- Kimi-K2.5: KimiK25ForConditionalGeneration, text_config, language_model.*, MoonViT + mm_projector ---------

KIMI_K25_TEXT_CONFIG: dict[str, Any] = dict(
    copy.deepcopy(KIMI_K2_BASE_CONFIG),
    max_position_embeddings=262144,
    quantization_config={
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}}},
    },
)
KIMI_K25_CONFIG: dict[str, Any] = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "media_placeholder_token_id": 163605,
    "pad_token_id": 163839,
    "tie_word_embeddings": False,
    "use_unified_vision_chunk": True,
    "text_config": KIMI_K25_TEXT_CONFIG,
    "vision_config": {
        "model_type": "moonvit3d",
        "hidden_size": 1152,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "intermediate_size": 4304,
        "patch_size": 14,
        "merge_kernel_size": [2, 2],
        "text_hidden_size": 7168,
    },
}


def _int4(specs: list[TensorSpec]) -> list[TensorSpec]:
    """Routed experts as K2.5 publishes them (compressed-tensors INT4, group 32): packed I32 + BF16 scales."""
    out: list[TensorSpec] = []
    for name, dtype, shape in specs:
        if ".experts." in name and name.endswith(".weight") and dtype == "F8_E4M3":
            base = name[: -len(".weight")]
            out += [
                (f"{base}.weight_packed", "I32", [shape[0], shape[1] // 8]),
                (f"{base}.weight_scale", "BF16", [shape[0], math.ceil(shape[1] / 32)]),
                (f"{base}.weight_shape", "I32", [2]),
            ]
        elif ".experts." in name and name.endswith(".weight_scale_inv"):
            continue
        else:
            out.append((name, dtype, shape))
    return out


def write_kimi_k25_base(folder: Path, *, embed_rows: int = 163840, experts: int = 2) -> Path:
    """64 shards as in moonshotai/Kimi-K2.5: the embedding with layer 0 in the first, one layer a shard, the head
    and final norm after the last layer, the vision tower and projector in the last two."""
    text = KIMI_K25_TEXT_CONFIG
    hidden = text["hidden_size"]
    shards: list[list[TensorSpec]] = []
    for layer in range(text["num_hidden_layers"]):
        specs = [
            (f"language_model.{name}", dtype, shape)
            for name, dtype, shape in _int4(kimi_k2_base_layer(text, layer, experts=experts))
        ]
        if layer == 0:
            specs.insert(0, ("language_model.model.embed_tokens.weight", "BF16", [embed_rows, hidden]))
        shards.append(specs)
    shards.append(
        [
            ("language_model.model.norm.weight", "BF16", [hidden]),
            ("language_model.lm_head.weight", "BF16", [text["vocab_size"], hidden]),
        ]
    )
    shards.append(vit_blocks("vision_tower.encoder.", 2, 1152, 4304))
    shards.append(
        [
            ("mm_projector.pre_norm.weight", "BF16", [1152]),
            ("mm_projector.proj.0.weight", "BF16", [4608, 4608]),
            ("mm_projector.proj.2.weight", "BF16", [hidden, 4608]),
        ]
    )
    assert len(shards) == 64
    return write_sharded(folder, KIMI_K25_CONFIG, shards)


# --- Other families ---------------------------------------------------------------------------------------

#: meta-llama/Llama-4-Scout-17B-16E-Instruct config.json (text_config; vision_model.*, multi_modal_projector.*).
LLAMA4_SCOUT_CONFIG: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 48,
        "vocab_size": 202048,
        "max_position_embeddings": 10485760,
        "torch_dtype": "bfloat16",
        "num_local_experts": 16,
    },
    "vision_config": {
        "model_type": "llama4_vision_model",
        "hidden_size": 1408,
        "num_hidden_layers": 34,
        "intermediate_size": 5632,
    },
}

#: mistralai/Mistral-Small-3.1-24B-Instruct-2503 config.json (text_config; vision_tower.*, multi_modal_projector.*).
MISTRAL3_CONFIG: dict[str, Any] = {
    "architectures": ["Mistral3ForConditionalGeneration"],
    "model_type": "mistral3",
    "text_config": {
        "model_type": "mistral",
        "hidden_size": 5120,
        "intermediate_size": 32768,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 40,
        "vocab_size": 131072,
        "max_position_embeddings": 131072,
    },
    "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096},
    "torch_dtype": "bfloat16",
}

#: google/gemma-3-4b-it config.json: its text_config sets neither vocab_size nor max_position_embeddings
#: (transformers' defaults, 262208 and 131072, apply) and the head is tied to the embedding (no lm_head tensor).
GEMMA3_CONFIG: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "num_hidden_layers": 34,
        "sliding_window": 1024,
    },
    "vision_config": {
        "model_type": "siglip_vision_model",
        "hidden_size": 1152,
        "num_hidden_layers": 27,
        "intermediate_size": 4304,
    },
    "torch_dtype": "bfloat16",
}

#: Qwen/Qwen3-VL-8B-Instruct config.json (text_config; model.language_model.*, lm_head.weight, model.visual.*).
QWEN3_VL_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "model_type": "qwen3_vl",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_vl_text",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 36,
        "vocab_size": 151936,
        "max_position_embeddings": 262144,
        "dtype": "bfloat16",
    },
    "vision_config": {"model_type": "qwen3_vl", "hidden_size": 1152, "depth": 27, "intermediate_size": 4304},
}

#: meta-llama/Llama-3.2-1B config.json: text-only, tied embeddings, one model.safetensors without lm_head.
LLAMA32_1B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 16,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def write_llava_style_base(
    folder: Path, config: dict[str, Any], *, tower: str, projector: str, tied: bool = False, vocab: int | None = None
) -> Path:
    """A ``language_model.model.*`` base (Llama-4, Mistral-3, Gemma-3 as published): embedding and two layers
    in the first shard, the head and norm in the second, the vision tower and projector in the third."""
    text = config["text_config"]
    h = text["hidden_size"]
    rows = vocab or text.get("vocab_size", 262208)
    first = [("language_model.model.embed_tokens.weight", "BF16", [rows, h])]
    first += llama_layer("language_model.model.", 0, text) + llama_layer("language_model.model.", 1, text)
    second = [("language_model.model.norm.weight", "BF16", [h])]
    if not tied:
        second.append(("language_model.lm_head.weight", "BF16", [rows, h]))
    vision = config["vision_config"]
    third = vit_blocks(tower, 1, vision["hidden_size"], vision["intermediate_size"])
    third.append((f"{projector}linear_1.weight", "BF16", [h, vision["hidden_size"]]))
    return write_sharded(folder, config, [first, second, third])


def write_qwen3_vl_base(folder: Path) -> Path:
    """Qwen3-VL as transformers >= 4.52 saves it: model.language_model.*, model.visual.*, lm_head.weight."""
    text = QWEN3_VL_CONFIG["text_config"]
    h = text["hidden_size"]
    first = [("model.language_model.embed_tokens.weight", "BF16", [text["vocab_size"], h])]
    first += llama_layer("model.language_model.", 0, text)
    second = [("model.language_model.norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [text["vocab_size"], h])]
    third = vit_blocks("model.visual.", 1, 1152, 4304)
    return write_sharded(folder, QWEN3_VL_CONFIG, [first, second, third])


def write_llama32_1b_base(folder: Path) -> Path:
    """A text-only, tied-embedding base in one model.safetensors (no lm_head tensor)."""
    c = LLAMA32_1B_CONFIG
    specs = [
        ("model.embed_tokens.weight", "BF16", [c["vocab_size"], c["hidden_size"]]),
        ("model.norm.weight", "BF16", [c["hidden_size"]]),
    ] + llama_layer("model.", 0, c)
    write_safetensors(folder / "model.safetensors", specs, metadata={"format": "pt"})
    write_config(folder, c)
    return folder


def drafter_config_for(text: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A SpecForge EAGLE-3 drafter config for a base whose text config is ``text``."""
    n = text["num_hidden_layers"]
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": text["hidden_size"],
        "intermediate_size": 4 * text["hidden_size"],
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 1,
        "vocab_size": text.get("vocab_size", 262208),
        "draft_vocab_size": 32000,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, n // 2 - 1, n - 4], "use_aux_hidden_state": True},
    }
    config.update(overrides)
    return config
