"""The oracle's DFlash cases: small DFlash drafters (z-lab's layout: ``layers.{i}.*``, ``fc``, ``hidden_norm``,
``norm``; hidden 64, 2 layers, vocab 256) with one edit each, against tiny targets of a named class and depth.

Each case names what it tests. Written as data; ``write_cases`` puts each drafter and its target in a folder.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import TensorSpec, write_safetensors

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 64, 4, 2, 16, 128, 256

TARGET_CLASSES = {
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "deepseek_v3": ("DeepseekV3ForCausalLM", "deepseek_v3"),
}
#: A class's own config keys: DeepSeek-V3's MLA attention (a 40-wide latent per token), every layer dense.
TARGET_KEYS: dict[str, dict[str, Any]] = {
    "deepseek_v3": {
        "head_dim": None,
        "num_key_value_heads": HEADS,
        "q_lora_rank": 32,
        "kv_lora_rank": 32,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "moe_intermediate_size": 32,
        "n_group": 1,
        "topk_group": 1,
    },
}


def base_config(layers: int = 2) -> dict[str, Any]:
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "num_hidden_layers": layers,
        "vocab_size": VOCAB,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "block_size": 16,
        "dflash_config": {"mask_token_id": 250, "target_layer_ids": [1, 2]},
    }


def layer(index: int) -> list[TensorSpec]:
    p = f"layers.{index}."
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return [
        (p + "input_layernorm.weight", "BF16", [HIDDEN]),
        (p + "post_attention_layernorm.weight", "BF16", [HIDDEN]),
        (p + "self_attn.q_proj.weight", "BF16", [q, HIDDEN]),
        (p + "self_attn.k_proj.weight", "BF16", [kv, HIDDEN]),
        (p + "self_attn.v_proj.weight", "BF16", [kv, HIDDEN]),
        (p + "self_attn.o_proj.weight", "BF16", [HIDDEN, q]),
        (p + "self_attn.q_norm.weight", "BF16", [HEAD_DIM]),
        (p + "self_attn.k_norm.weight", "BF16", [HEAD_DIM]),
        (p + "mlp.gate_proj.weight", "BF16", [INTER, HIDDEN]),
        (p + "mlp.up_proj.weight", "BF16", [INTER, HIDDEN]),
        (p + "mlp.down_proj.weight", "BF16", [HIDDEN, INTER]),
    ]


#: A config value written as JSON null (``None`` in ``DFlashCase.config`` removes the key).
NULL: Any = type("Null", (), {"__repr__": lambda self: "NULL"})()


@dataclass(frozen=True)
class Target:
    model_class: str = "qwen3"
    layers: int = 4
    #: (hidden, heads, kv heads, head_dim, intermediate, vocab) when not the cases' own small widths.
    widths: tuple[int, int, int, int, int, int] = (HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB)

    @property
    def name(self) -> str:
        suffix = "" if self.widths[0] == HIDDEN else f"_h{self.widths[0]}"
        return f"target_{self.model_class}_{self.layers}{suffix}"


@dataclass(frozen=True)
class DFlashCase:
    """One drafter: what differs from the base drafter, and the target it is checked against."""

    name: str
    about: str
    layers: int = 2
    #: Merged into config.json; dotted keys reach into sections; None removes a key, NULL writes a null.
    config: dict[str, Any] = field(default_factory=dict)
    features: int | None = None  # fc's stored width in target states (default: the config's ids, else layers)
    drop: tuple[str, ...] = ()  # regexes of names left out
    add: tuple[TensorSpec, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()  # (regex, replacement) on every name
    target: Target = Target()
    #: engine → why it cannot be asked about this case here (never dropped silently).
    not_comparable: dict[str, str] = field(default_factory=dict)
    #: A folder under fixtures/ taken as the drafter as it is (a published layout rebuilt), instead of the edits.
    fixture: str | None = None
    #: The oracle registry's fields (oracle_families.py): every DFlash case is in the job's main split.
    family: str = "dflash"
    split: str = "main"

    def config_json(self) -> dict[str, Any]:
        config = base_config(self.layers)
        for key, value in self.config.items():
            holder = config
            *path, last = key.split(".")
            for part in path:
                holder = holder.setdefault(part, {})
            if value is None:
                holder.pop(last, None)
            else:
                holder[last] = None if value is NULL else value
        return config

    def tensors(self) -> list[TensorSpec]:
        config = self.config_json()
        ids = (config.get("dflash_config") or {}).get("target_layer_ids") or config.get("target_layer_ids")
        features = self.features or (len(ids) if ids else self.layers)
        out = [spec for i in range(self.layers) for spec in layer(i)]
        out += [
            ("fc.weight", "BF16", [HIDDEN, features * HIDDEN]),
            ("hidden_norm.weight", "BF16", [HIDDEN]),
            ("norm.weight", "BF16", [HIDDEN]),
        ]
        out = [spec for spec in out if not any(re.search(pattern, spec[0]) for pattern in self.drop)]
        for pattern, replacement in self.rename:
            out = [(re.sub(pattern, replacement, name), dtype, shape) for name, dtype, shape in out]
        return sorted([*out, *self.add])


def attention(head_dim: int, kv_heads: int, layers: int = 2) -> tuple[TensorSpec, ...]:
    """Every drafter layer's attention stored for ``head_dim`` and ``kv_heads`` (HEADS query heads)."""
    out: list[TensorSpec] = []
    for i in range(layers):
        p = f"layers.{i}.self_attn."
        q, kv = HEADS * head_dim, kv_heads * head_dim
        out += [
            (p + "q_proj.weight", "BF16", [q, HIDDEN]),
            (p + "k_proj.weight", "BF16", [kv, HIDDEN]),
            (p + "v_proj.weight", "BF16", [kv, HIDDEN]),
            (p + "o_proj.weight", "BF16", [HIDDEN, q]),
            (p + "q_norm.weight", "BF16", [head_dim]),
            (p + "k_norm.weight", "BF16", [head_dim]),
        ]
    return tuple(out)


def names_of(case: DFlashCase) -> list[str]:
    """The drafter's tensor names (a rebuilt layout's, from its fixture's safetensors headers)."""
    if case.fixture is None:
        return [name for name, _, _ in case.tensors()]
    found: list[str] = []
    for path in sorted((FIXTURES / case.fixture).glob("*.safetensors")):
        with path.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            found += [name for name in json.loads(handle.read(size)) if name != "__metadata__"]
    return sorted(found)


def target_config(target: Target) -> dict[str, Any]:
    architecture, model_type = TARGET_CLASSES[target.model_class]
    hidden, heads, kv_heads, head_dim, inter, vocab = target.widths
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "num_hidden_layers": target.layers,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }
    keys = TARGET_KEYS.get(target.model_class, {})
    if target.model_class == "deepseek_v3":
        keys = {**keys, "first_k_dense_replace": target.layers}  # dense: no MoE kernel needed on the CPU
    config |= keys
    return {key: value for key, value in config.items() if value is not None}


CASES: tuple[DFlashCase, ...] = (
    DFlashCase("dflash_basic", "z-lab's layout as published: ids in dflash_config, block_size at the top level"),
    DFlashCase(
        "dflash_three_layers_spread_ids",
        "three drafter layers reading three target layers spread over an 8-layer target",
        layers=3,
        config={"dflash_config.target_layer_ids": [1, 4, 6]},
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "dflash_ids_at_top_level",
        "target_layer_ids at the top level (no dflash_config ids): both engines read it there",
        config={"dflash_config.target_layer_ids": None, "target_layer_ids": [1, 2]},
    ),
    DFlashCase(
        "dflash_eagle_config_ids_too",
        "an eagle_config section with aux ids beside the DFlash ids: the V1 runner captures at them, V2 at the "
        "DFlash ids + 1",
        config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3]}},
    ),
    DFlashCase(
        "dflash_no_ids_two_layers",
        "no target layer ids: SGLang builds one per drafter layer from the depth; vLLM captures its 3-state default",
        config={"dflash_config.target_layer_ids": None},
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "dflash_no_ids_three_layers",
        "no target layer ids with three drafter layers: vLLM's 3-state default capture fits fc",
        layers=3,
        config={"dflash_config.target_layer_ids": None},
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "dflash_ids_past_target_depth",
        "an id past the target's depth: SGLang refuses at start-up, vLLM captures one state too few",
        config={"dflash_config.target_layer_ids": [1, 5]},
    ),
    DFlashCase(
        "dflash_ids_at_last_layer",
        "an id naming the target's last layer: in range for both",
        config={"dflash_config.target_layer_ids": [1, 3]},
    ),
    DFlashCase(
        "dflash_ids_past_num_target_layers",
        "ids beyond num_target_layers (an 8-layer target): SGLang's DFlashDraftModel refuses while it is built",
        config={"dflash_config.target_layer_ids": [1, 5], "dflash_config.num_target_layers": 4},
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "dflash_eagle_aux_ids_too",
        "EAGLE-3 aux ids beside the DFlash ids: vLLM reads them first and builds a 3-wide fc, SGLang does not",
        config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3]},
    ),
    DFlashCase(
        "dflash_target_hidden_size",
        "target_hidden_size set: vLLM sizes fc's input with it, SGLang with hidden_size",
        config={"target_hidden_size": 32},
    ),
    DFlashCase(
        "dflash_stray_tensor",
        "a tensor neither loader has a parameter for: vLLM raises, SGLang skips it",
        add=(("extra_proj.weight", "BF16", [8, HIDDEN]),),
    ),
    DFlashCase(
        "dflash_rotary_cache",
        "a rotary cache (rotary_emb.inv_freq) some exporters write: both engines drop it",
        add=(("rotary_emb.inv_freq", "F32", [8]),),
    ),
    DFlashCase(
        "dflash_model_prefixed_names",
        "every name under model.: SGLang strips it, vLLM prefixes another",
        rename=((r"^", "model."),),
    ),
    DFlashCase(
        "dflash_midlayer_name",
        "the first layer named midlayer.* (speculators' naming): vLLM maps it to layers.0, SGLang skips it",
        rename=((r"^layers\.0\.", "midlayer."),),
    ),
    DFlashCase(
        "dflash_encoder_aliases",
        "fc and hidden_norm under the native export's encoder.* names: both engines alias them",
        rename=((r"^fc\.", "encoder.fc."), (r"^hidden_norm\.", "encoder.output_norm_enc.")),
    ),
    DFlashCase(
        "dflash_mask_hidden_shipped",
        "a mask_hidden weight: vLLM asserts it is not shipped, SGLang skips it",
        add=(("mask_hidden", "BF16", [1, HIDDEN]),),
    ),
    DFlashCase("dflash_missing_layer", "the second drafter layer left out of the export", drop=(r"^layers\.1\.",)),
    DFlashCase("dflash_missing_fc", "fc.weight left out of the export", drop=(r"^fc\.weight$",)),
    DFlashCase(
        "dflash_extra_layer",
        "a third layer's tensors past num_hidden_layers 2",
        add=tuple(layer(2)),
    ),
    DFlashCase("dflash_fc_wrong_width", "fc.weight three target states wide for two ids", features=3),
    DFlashCase(
        "dflash_q_proj_wrong_shape",
        "q_proj with another head count than the config",
        drop=(r"^layers\.0\.self_attn\.q_proj",),
        add=(("layers.0.self_attn.q_proj.weight", "BF16", [48, HIDDEN]),),
    ),
    DFlashCase(
        "dflash_carried_embed_and_head",
        "the drafter carries an embedding and a head: vLLM uses its own, SGLang the target's",
        add=(("embed_tokens.weight", "BF16", [VOCAB, HIDDEN]), ("lm_head.weight", "BF16", [VOCAB, HIDDEN])),
    ),
    DFlashCase(
        "dflash_use_aux_false",
        "dflash_config.use_aux_hidden_state false: vLLM builds no fc and drops it, yet captures two target states "
        "and hands them on unprojected (128 wide for hidden 64); SGLang loads fc and uses it",
        config={"dflash_config.use_aux_hidden_state": False},
    ),
    # use_aux_hidden_state false under vLLM: both runners capture for DFlash regardless; without fc the captured
    # states reach the drafter as they are, which fits only one state of the drafter's width.
    DFlashCase(
        "dflash_use_aux_false_one_id",
        "use_aux_hidden_state false with one target layer id: vLLM reads the one captured state without fc and "
        "drops the shipped fc",
        config={"dflash_config.use_aux_hidden_state": False, "dflash_config.target_layer_ids": [2]},
    ),
    DFlashCase(
        "dflash_use_aux_false_no_fc",
        "use_aux_hidden_state false, two ids, no fc shipped: vLLM still captures two states for a 64-wide drafter",
        config={"dflash_config.use_aux_hidden_state": False},
        drop=(r"^fc\.weight$",),
    ),
    DFlashCase(
        "dflash_use_aux_zero_one_id_no_fc",
        "use_aux_hidden_state 0 (false by truth value), one id, no fc shipped: vLLM runs on the one captured state",
        config={"dflash_config.use_aux_hidden_state": 0, "dflash_config.target_layer_ids": [2]},
        drop=(r"^fc\.weight$",),
    ),
    DFlashCase(
        "dflash_use_aux_false_no_ids",
        "use_aux_hidden_state false, no ids: vLLM captures its 3-state default from an 8-layer target, without fc",
        config={"dflash_config.use_aux_hidden_state": False, "dflash_config.target_layer_ids": None},
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "dflash_eagle_config_use_aux_false",
        "use_aux_hidden_state false in an eagle_config section: vLLM's drafter reads it under dflash_config's keys",
        config={"eagle_config": {"use_aux_hidden_state": False}},
    ),
    DFlashCase(
        "dflash_domino_weights",
        "Domino projector weights without projector_type domino",
        add=(("prefix_gru.weight_ih_l0", "BF16", [8, HIDDEN]),),
    ),
    DFlashCase(
        "dflash_mask_token_out_of_vocab",
        "a mask token id outside the target's vocabulary: SGLang's worker refuses it at start-up",
        config={"dflash_config.mask_token_id": 300},
        not_comparable={"vllm": "vLLM fails on the first forward's embedding lookup, which the worker does not run"},
    ),
    DFlashCase(
        "dflash_zlab_qwen3_8b_b16_rebuilt",
        "z-lab/Qwen3-8B-DFlash-b16's layout rebuilt from its published config (fixtures/dflash/), against a "
        "36-layer Qwen3 target of its scaled widths",
        fixture="dflash/qwen3-8b-dflash-b16",
        target=Target("qwen3", 36, (16, 2, 1, 8, 48, 151936)),
    ),
    DFlashCase(
        "dflash_qwen2_target",
        "a Qwen2-class target: vLLM captures from it (EAGLE-3 interface), SGLang's Qwen2 class has no DFlash capture",
        target=Target("qwen2", 4),
    ),
    # The drafter's attention against the target's (issue #27, KV-cache spec unification): neither engine checks one
    # against the other; vLLM groups the KV caches of both (observed: get_kv_cache_groups on the real layers), SGLang
    # gives the draft a pool of its own (observed: the bytes per token its start-up budgets for it).
    DFlashCase(
        "dflash_head_dim_32_kv_heads_1",
        "head_dim 32 and one KV head (attention stored for them) against a target of head_dim 16 and 2 KV heads",
        config={"head_dim": 32, "num_key_value_heads": 1},
        drop=(r"self_attn\.",),
        add=attention(32, 1),
    ),
    DFlashCase(
        "dflash_head_dim_24_kv_heads_1",
        "head_dim 24, one KV head: a KV page no multiple of the target's (1536 against 2048 bytes a block)",
        config={"head_dim": 24, "num_key_value_heads": 1},
        drop=(r"self_attn\.",),
        add=attention(24, 1),
    ),
    DFlashCase(
        "dflash_kv_heads_4",
        "4 KV heads (k/v stored for them) against a target with 2",
        config={"num_key_value_heads": 4},
        drop=(r"self_attn\.",),
        add=attention(HEAD_DIM, 4),
    ),
    DFlashCase(
        "dflash_head_dim_32_llama_target",
        "head_dim 32, one KV head, against an 8-layer Llama target (head_dim 16, 2 KV heads)",
        config={"head_dim": 32, "num_key_value_heads": 1, "dflash_config.target_layer_ids": [1, 6]},
        drop=(r"self_attn\.",),
        add=attention(32, 1),
        target=Target("llama", 8),
    ),
    DFlashCase(
        "dflash_mla_target",
        "the drafter (GQA attention) against a DeepSeek-V3-class target with MLA attention (dense layers)",
        target=Target("deepseek_v3", 4),
    ),
    DFlashCase(
        "dflash_llama_target",
        "the drafter against a Llama-class target of 8 layers",
        config={"dflash_config.target_layer_ids": [1, 6]},
        target=Target("llama", 8),
    ),
)


def write_cases(root: Path, cases: tuple[DFlashCase, ...] = CASES) -> dict[str, tuple[Path, Path]]:
    """Each case's drafter folder and its target's folder, under ``root``."""
    out: dict[str, tuple[Path, Path]] = {}
    for case in cases:
        target = root / case.target.name
        if not target.is_dir():
            target.mkdir(parents=True)
            config = target_config(case.target)
            (target / "config.json").write_text(json.dumps(config, indent=1))
            hidden, vocab = config["hidden_size"], config["vocab_size"]
            write_safetensors(
                target / "model.safetensors",
                [
                    ("lm_head.weight", "BF16", [vocab, hidden]),
                    ("model.embed_tokens.weight", "BF16", [vocab, hidden]),
                    ("model.norm.weight", "BF16", [hidden]),
                ],
            )
        folder = root / case.name
        if case.fixture is not None:
            shutil.copytree(FIXTURES / case.fixture, folder)
            out[case.name] = (folder, target)
            continue
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(case.config_json(), indent=1))
        write_safetensors(folder / "model.safetensors", case.tensors())
        out[case.name] = (folder, target)
    return out
