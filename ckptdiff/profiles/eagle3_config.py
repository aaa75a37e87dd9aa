"""What an EAGLE-3 drafter's config.json says: its settings, wherever they nest, and the tensor shapes they imply."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..dtypes import FLOAT_DTYPES, DType, from_torch_name
from . import Config

#: Where a drafter's config keeps its settings: top level (SpecForge/EAGLE), or nested (speculators, EAGLE).
_SCOPES = ("", "transformer_layer_config", "eagle_config")
#: EAGLE-3 fuses three target layers unless the config lists others.
DEFAULT_AUX_LAYERS = 3


def is_eagle3(config: Config) -> bool:
    architectures = config.get("architectures") or []
    if isinstance(architectures, list) and any(isinstance(a, str) and "eagle3" in a.lower() for a in architectures):
        return True
    return "eagle_config" in config or config.get("speculators_model_type") == "eagle3"


@dataclass(frozen=True)
class Setting:
    """A config value and the (dotted) key it came from."""

    value: Any
    key: str

    def __str__(self) -> str:
        return f"{self.key}={json.dumps(self.value)}"


def setting(config: Config, *keys: str) -> Setting | None:
    """The first of ``keys`` set (not null) at the top level, in ``transformer_layer_config`` or ``eagle_config``."""
    for key in keys:
        for scope in _SCOPES:
            holder = config.get(scope) if scope else config
            if isinstance(holder, Mapping) and holder.get(key) is not None:
                return Setting(holder[key], f"{scope}.{key}" if scope else key)
    return None


def _positive(found: Setting | None) -> Setting | None:
    ok = found is not None and isinstance(found.value, int) and not isinstance(found.value, bool) and found.value > 0
    return found if ok else None


@dataclass(frozen=True)
class DrafterConfig:
    """The settings of an EAGLE-3 drafter's config.json that decide its tensors' shapes."""

    hidden: Setting | None
    target_hidden: Setting | None  # target_hidden_size, or None: the drafter's own hidden size
    aux_layer_ids: Setting | None
    vocab: Setting | None
    draft_vocab: Setting | None
    heads: Setting | None
    kv_heads: Setting | None
    head_dim: Setting | None
    intermediate: Setting | None
    tied: bool
    max_positions: Setting | None
    dtype: Setting | None
    mla: bool  # multi-head latent attention (DeepSeek-style): attention tensors this profile does not know

    @classmethod
    def of(cls, config: Config) -> DrafterConfig:
        aux = setting(config, "eagle_aux_hidden_state_layer_ids")
        if aux is not None and not (isinstance(aux.value, list) and all(isinstance(i, int) for i in aux.value)):
            aux = None
        dtype = setting(config, "torch_dtype", "dtype")
        if dtype is not None and config_dtype(dtype.value) is None:
            dtype = None
        tied = setting(config, "tie_word_embeddings")
        return cls(
            hidden=_positive(setting(config, "hidden_size")),
            target_hidden=_positive(setting(config, "target_hidden_size")),
            aux_layer_ids=aux,
            vocab=_positive(setting(config, "vocab_size")),
            draft_vocab=_positive(setting(config, "draft_vocab_size")),
            heads=_positive(setting(config, "num_attention_heads")),
            kv_heads=_positive(setting(config, "num_key_value_heads")),
            head_dim=_positive(setting(config, "head_dim")),
            intermediate=_positive(setting(config, "intermediate_size")),
            tied=bool(tied is not None and tied.value is True),
            max_positions=_positive(setting(config, "max_position_embeddings")),
            dtype=dtype,
            mla=setting(config, "kv_lora_rank") is not None or setting(config, "q_lora_rank") is not None,
        )

    @property
    def safetensors_dtype(self) -> str | None:
        return config_dtype(self.dtype.value) if self.dtype else None

    @property
    def needs_d2t(self) -> bool:
        return self.draft_vocab is not None and self.vocab is not None and self.draft_vocab.value != self.vocab.value


@dataclass(frozen=True)
class Expected:
    """A tensor shape a config implies, and the settings it follows from."""

    shape: tuple[int, ...]
    because: str


def expected_shapes(config: Config) -> dict[str, Expected]:
    """Canonical tensor name → the shape the drafter's own config.json implies (nn.Linear stores [out, in]).

    Only tensors whose every dimension the config determines are listed; attention and MLP are left out for
    an attention this profile does not know (MLA).
    """
    c = DrafterConfig.of(config)
    out: dict[str, Expected] = {}
    if c.hidden is None:
        return out
    h = c.hidden.value

    def put(name: str, shape: tuple[int, ...], *why: Setting | str) -> None:
        out[name] = Expected(shape, ", ".join(str(w) for w in why))

    for norm in (
        "midlayer.hidden_norm.weight",
        "midlayer.input_layernorm.weight",
        "midlayer.post_attention_layernorm.weight",
        "norm.weight",
    ):
        put(norm, (h,), c.hidden)
    target = c.target_hidden or c.hidden
    if c.aux_layer_ids is not None:
        n_aux, aux_why = len(c.aux_layer_ids.value), f"{len(c.aux_layer_ids.value)} aux layers ({c.aux_layer_ids})"
    else:
        n_aux = DEFAULT_AUX_LAYERS
        aux_why = f"{n_aux} aux layers (the default: no eagle_aux_hidden_state_layer_ids)"
    use_aux = setting(config, "use_aux_hidden_state")
    if use_aux is None or use_aux.value is not False:  # with use_aux_hidden_state false, engines skip fc
        put("fc.weight", (h, n_aux * target.value), c.hidden, f"{aux_why} × target hidden ({target})")
        put("fc.bias", (h,), c.hidden)
    if not c.mla and c.heads is not None:
        head_dim = c.head_dim.value if c.head_dim else h // c.heads.value
        head_why: Setting | str = c.head_dim if c.head_dim else f"head_dim = {c.hidden} / {c.heads}"
        kv_heads = c.kv_heads or c.heads
        q_out, kv_out = c.heads.value * head_dim, kv_heads.value * head_dim
        if c.head_dim or h % c.heads.value == 0:
            attn = "midlayer.self_attn."
            put(f"{attn}q_proj.weight", (q_out, 2 * h), c.heads, head_why, f"input 2 × {c.hidden}")
            put(f"{attn}k_proj.weight", (kv_out, 2 * h), kv_heads, head_why, f"input 2 × {c.hidden}")
            put(f"{attn}v_proj.weight", (kv_out, 2 * h), kv_heads, head_why, f"input 2 × {c.hidden}")
            put(f"{attn}o_proj.weight", (h, q_out), c.hidden, c.heads, head_why)
            put(f"{attn}q_proj.bias", (q_out,), c.heads, head_why)
            put(f"{attn}k_proj.bias", (kv_out,), kv_heads, head_why)
            put(f"{attn}v_proj.bias", (kv_out,), kv_heads, head_why)
            put(f"{attn}o_proj.bias", (h,), c.hidden)
    if not c.mla and c.intermediate is not None:
        i = c.intermediate.value
        put("midlayer.mlp.gate_proj.weight", (i, h), c.intermediate, c.hidden)
        put("midlayer.mlp.up_proj.weight", (i, h), c.intermediate, c.hidden)
        put("midlayer.mlp.down_proj.weight", (h, i), c.hidden, c.intermediate)
    if c.vocab is not None:
        put("embed_tokens.weight", (c.vocab.value, h), c.vocab, c.hidden)
        put("t2d", (c.vocab.value,), c.vocab)
    head_rows = c.draft_vocab or c.vocab
    if head_rows is not None:
        put("lm_head.weight", (head_rows.value, h), head_rows, c.hidden)
    if c.draft_vocab is not None:
        put("d2t", (c.draft_vocab.value,), c.draft_vocab)
    return out


def config_dtype(value: Any) -> DType | None:
    """The floating-point safetensors dtype a config's ``torch_dtype``/``dtype`` names (``bfloat16``), else None."""
    dtype = from_torch_name(str(value))
    return dtype if dtype in FLOAT_DTYPES else None
