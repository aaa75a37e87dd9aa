"""One EAGLE-3 drafter's description (:class:`DrafterSpec`), computed once from its config.json wherever it nests.

The profile (expected shapes, findings) and every engine simulation read this one object; engines keep only
what differs per engine (which keys their code reads, names, renames, what they skip, raise or take from the
target). Each setting remembers the dotted key it was read from, so a message can say where a value came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...base_layouts import architecture as first_architecture
from ...checkpoint import config_at
from ...dtypes import FLOAT_DTYPES, DType, from_torch_name
from .detect import is_eagle3 as is_eagle3  # the profile's detector, light for detection

Config = Mapping[str, Any]
#: Where a drafter's config keeps its settings: top level (SpecForge/EAGLE), nested (speculators, EAGLE).
SCOPES = ("", "transformer_layer_config", "eagle_config")
#: EAGLE-3 fuses three target layers unless the config says otherwise.
DEFAULT_AUX_LAYERS = 3
AUX_KEY = "eagle_aux_hidden_state_layer_ids"
#: Every place a drafter's config can hold aux layer ids (an engine reads some of them, in its own order).
AUX_LOCATIONS = (AUX_KEY, f"eagle_config.{AUX_KEY}", "eagle_config.layer_ids", f"transformer_layer_config.{AUX_KEY}")
Attention = Literal["llama", "mla"]
Layout = Literal["plain", "eagle_config", "speculators"]


@dataclass(frozen=True)
class Setting:
    """A config value and the (dotted) key it came from."""

    value: Any
    key: str

    def __str__(self) -> str:
        return f"{self.key}={json.dumps(self.value)}"


def lookup(config: Config, dotted: str) -> Any:
    """The value at a dotted key ("eagle_config.eagle_aux_hidden_state_layer_ids"), or None."""
    return config_at(config, dotted.split("."))


def setting(config: Config, *keys: str) -> Setting | None:
    """The first of ``keys`` set (not null) at the top level, in ``transformer_layer_config`` or ``eagle_config``."""
    for key in keys:
        for scope in SCOPES:
            holder = config_at(config, (scope,) if scope else ())
            if isinstance(holder, Mapping) and holder.get(key) is not None:
                return Setting(holder[key], f"{scope}.{key}" if scope else key)
    return None


def _positive(found: Setting | None) -> Setting | None:
    ok = found is not None and isinstance(found.value, int) and not isinstance(found.value, bool) and found.value > 0
    return found if ok else None


def _flag(config: Config, *keys: str) -> bool:
    found = setting(config, *keys)
    return found is not None and found.value is True


def _norm_before_fc(config: Config) -> bool:
    """eagle_config's norm_before_fc when it has the key, else the top level's (llama_eagle3.py in both engines)."""
    eagle = config.get("eagle_config")
    if isinstance(eagle, Mapping) and "norm_before_fc" in eagle:
        return bool(eagle["norm_before_fc"])
    return bool(config.get("norm_before_fc"))


def _use_aux(config: Config, speculators: bool) -> bool:
    """``eagle_config.use_aux_hidden_state`` as the engines read it: absent, true; else its truth value (null and 0
    are false, any string true): ``.get("use_aux_hidden_state", True)`` then ``if`` in vLLM (eagle3_utils.py:15,
    llm_base_proposer.py:1686, llama_eagle3.py:180) and SGLang (spec_aux_hidden_state.py:189,
    attention_backend_setup.py:54). A speculators config's drafter config is its ``transformer_layer_config``
    (vLLM speculators/base.py, extract_transformers_pre_trained_config): the eagle_config there counts, never the
    top level's (the oracle's ``v2_speculators_use_aux_false_*`` cases)."""
    holder = config.get("transformer_layer_config") if speculators else config
    eagle = holder.get("eagle_config") if isinstance(holder, Mapping) else None
    if not isinstance(eagle, Mapping) or "use_aux_hidden_state" not in eagle:
        return True
    return bool(eagle["use_aux_hidden_state"])


def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and value and all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        return tuple(value)
    return None


def config_dtype(value: Any) -> DType | None:
    """The floating-point safetensors dtype a config's ``torch_dtype``/``dtype`` names (``bfloat16``), else None."""
    dtype = from_torch_name(str(value))
    return dtype if dtype in FLOAT_DTYPES else None


@dataclass(frozen=True)
class MlaDims:
    """Multi-head latent attention (DeepSeek-V2/V3 style) widths; q_lora_rank None: a plain q_proj."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Quantization:
    """``quantization_config``: the method, the weight format it implies and the modules it leaves alone."""

    method: str  # quant_method ("fp8", "modelopt", "compressed-tensors", ...)
    algorithm: str | None  # quant_algo ("FP8", "NVFP4") when the method names one
    ignore: tuple[str, ...]  # module names or patterns left unquantized ("lm_head", "*midlayer.self_attn*")
    key: str  # where it was read
    activation_scheme: str | None = None  # "static": input scales are stored; "dynamic": computed
    #: compressed-tensors: the scale and zero-point parameters its config_groups give a quantized linear layer
    #: (weight_scale; weight_zero_point when asymmetric; input_scale for static input activations).
    group_scales: tuple[str, ...] | None = None

    @property
    def scales(self) -> tuple[str, ...]:
        """The scale parameters a quantized linear layer has beside its weight."""
        if self.group_scales is not None:
            return self.group_scales
        if self.weight_format == "nvfp4":
            return ("weight_scale", "weight_scale_2", "input_scale")
        if self.weight_format == "fp8":
            # ModelOpt's FP8 stores static input scales; the fp8 method only with activation_scheme "static"
            static = self.method == "modelopt" or self.activation_scheme == "static"
            return ("weight_scale", "input_scale") if static else ("weight_scale",)
        return ()

    @property
    def weight_format(self) -> Literal["fp8", "nvfp4", "other"]:
        algo = (self.algorithm or "").upper()
        if "FP4" in algo:
            return "nvfp4"
        if self.method == "fp8" or algo.startswith("FP8"):
            return "fp8"
        return "other"

    def covers(self, module: str) -> bool:
        """Whether ``module`` ("midlayer.self_attn.q_proj", "fc") is quantized (not in the ignore list)."""
        import fnmatch

        for pattern in self.ignore:
            bare = pattern.removeprefix("re:")
            if fnmatch.fnmatch(module, bare) or module == bare or module.startswith(bare + "."):
                return False
            if module.endswith("." + bare) or fnmatch.fnmatch(module, "*." + bare):
                return False
        return True


#: transformers' DeepseekV2Config/DeepseekV3Config defaults: what the engines build when a key is absent.
MLA_DEFAULTS = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64}
MLA_DEFAULTS |= {"v_head_dim": 128}
MLA_KEYS = tuple(MLA_DEFAULTS)


def _present(config: Config, key: str) -> bool:
    """Whether ``key`` is set at all (even to null) at the top level or in a nested section."""
    return any(isinstance(h, Mapping) and key in h for h in (config, *(config.get(s) for s in SCOPES[1:])))


def _mla(config: Config) -> MlaDims | None:
    """MLA widths when the config sets any MLA key; an absent key takes the config class's default, an explicit
    null q_lora_rank means a plain q_proj."""
    if not any(_present(config, key) for key in ("kv_lora_rank", "q_lora_rank")):
        return None
    values: dict[str, int | None] = {}
    for key, default in MLA_DEFAULTS.items():
        found = _positive(setting(config, key))
        values[key] = found.value if found else (None if _present(config, key) else default)
    return MlaDims(
        values["q_lora_rank"],
        values["kv_lora_rank"] or 0,
        values["qk_nope_head_dim"] or 0,
        values["qk_rope_head_dim"] or 0,
        values["v_head_dim"] or 0,
    )


#: What transformers' LlamaConfig gives a key the config.json leaves out: the config class both engines read an
#: EAGLE-3 Llama drafter's config.json with (vLLM's and SGLang's AutoConfig for model_type llama), so a drafter
#: without intermediate_size is built 11008 wide and one without num_hidden_layers with 32 layers.
LLAMA_CONFIG_DEFAULTS = {"num_hidden_layers": 32, "intermediate_size": 11008}


def _llama_default(key: str) -> Setting:
    return Setting(LLAMA_CONFIG_DEFAULTS[key], f"{key} (absent: LlamaConfig's default)")


def _quantization(config: Config) -> Quantization | None:
    found = setting(config, "quantization_config")
    if found is None or not isinstance(found.value, Mapping):
        return None
    q = found.value
    held = q.get("quantization")
    nested: Mapping[str, Any] = held if isinstance(held, Mapping) else {}
    method = q.get("quant_method") or ("modelopt" if nested else None)
    algorithm = q.get("quant_algo") or nested.get("quant_algo")
    ignore: list[str] = []
    for key in ("ignore", "ignored_layers", "exclude_modules", "modules_to_not_convert"):
        listed = q.get(key) or nested.get(key)
        if isinstance(listed, list):
            ignore.extend(str(item) for item in listed)
    scheme = q.get("activation_scheme")
    return Quantization(
        str(method or "unknown"),
        str(algorithm) if algorithm else None,
        tuple(ignore),
        found.key,
        scheme if isinstance(scheme, str) else None,
        _group_scales(q) if method == "compressed-tensors" else None,
    )


def _group_scales(q: Mapping[str, Any]) -> tuple[str, ...]:
    """compressed-tensors: the parameters its schemes register beside a quantized weight (vLLM 0.33.0
    compressed_tensors/schemes: weight_scale always; weight_zero_point for asymmetric weights; input_scale for
    static input activations). Loaded from the checkpoint like any parameter."""
    found: list[str] = []
    groups = q.get("config_groups")
    for group in groups.values() if isinstance(groups, Mapping) else ():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        inputs = group.get("input_activations") if isinstance(group, Mapping) else None
        if isinstance(weights, Mapping):
            found.append("weight_scale")
            if weights.get("symmetric") is False:
                found.append("weight_zero_point")
        if isinstance(inputs, Mapping) and inputs.get("dynamic") is False:
            found.append("input_scale")
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class Speculators:
    """The speculators-format sections vLLM's adapter validates (configs/speculators/base.py)."""

    model_type: Any  # speculators_model_type
    layer_config: Any  # transformer_layer_config
    proposal_methods: Any  # speculators_config.proposal_methods
    verifier: Any  # speculators_config.verifier

    def defect(self) -> str | None:
        """What vLLM's validate_speculators_config raises on, in its words, or None."""
        methods = self.proposal_methods
        if not isinstance(methods, list) or not methods or not isinstance(methods[0], Mapping):
            return "speculators_config.proposal_methods[0] is missing: ValueError: Invalid speculators config structure"
        if "speculative_tokens" not in methods[0]:
            return (
                "speculators_config.proposal_methods[0] has no speculative_tokens: ValueError: Invalid speculators "
                "config structure"
            )
        if not isinstance(self.verifier, Mapping) or "name_or_path" not in self.verifier:
            return (
                "speculators_config.verifier.name_or_path is missing: ValueError: Invalid speculators config structure"
            )
        if self.layer_config is None:
            return "no transformer_layer_config: ValueError: Must provide transformer_layer_config"
        if not isinstance(self.layer_config, Mapping):
            return "transformer_layer_config is not an object: TypeError"
        return None


@dataclass(frozen=True)
class DrafterSpec:
    """An EAGLE-3 drafter as its config.json describes it: every fact the profile and the engines need, once."""

    config: Config
    layout: Layout
    architecture: str | None
    model_type: Setting | None
    hidden: Setting | None
    target_hidden: Setting | None  # target_hidden_size; None: the drafter's own hidden size
    layers: Setting | None  # num_hidden_layers
    vocab: Setting | None
    draft_vocab: Setting | None
    heads: Setting | None
    kv_heads: Setting | None
    head_dim: Setting | None
    intermediate: Setting | None
    max_positions: Setting | None
    dtype: Setting | None
    attention: Attention
    mla: MlaDims | None
    #: Aux layer ids at every location the config sets them (see AUX_LOCATIONS), in that order.
    aux_ids: tuple[Setting, ...]
    num_aux_hidden_states: Setting | None
    use_aux: bool  # eagle_config.use_aux_hidden_state's truth value (default true; _use_aux)
    #: eagle_config.norm_before_fc, else the top-level key: both engines read it so (EAGLE 3.1's input_norm).
    norm_before_fc: bool
    #: The top-level ``fc_norm`` or the legacy ``use_aux_norm`` (SGLang's reading; the engines read
    #: ``getattr(config, ...)``, so a key nested in eagle_config builds nothing).
    fc_norm: bool
    #: The top-level ``fc_norm`` alone (vLLM's reading: it knows no ``use_aux_norm``).
    fc_norm_key: bool
    #: The top-level ``norm_output`` (EAGLE 3.1: the post-norm state is the next step's aux output; no tensor).
    norm_output: bool
    norm_before_residual: Setting | None
    bias: bool  # config.bias: fc (and o_proj) biases
    attention_bias: bool
    mlp_bias: bool
    tied: bool
    quantization: Quantization | None
    speculators: Speculators | None

    @classmethod
    def of(cls, config: Config) -> DrafterSpec:
        arch = first_architecture(config)
        dtype = setting(config, "torch_dtype", "dtype")
        if dtype is not None and config_dtype(dtype.value) is None:
            dtype = None
        mla = _mla(config)
        aux = tuple(Setting(ids, key) for key in AUX_LOCATIONS if (ids := _ids(lookup(config, key))) is not None)
        speculators = None
        layout: Layout = "eagle_config" if isinstance(config.get("eagle_config"), Mapping) else "plain"
        if "speculators_model_type" in config or "speculators_config" in config:
            layout = "speculators"
            section = config.get("speculators_config")
            section = section if isinstance(section, Mapping) else {}
            speculators = Speculators(
                config.get("speculators_model_type"),
                config.get("transformer_layer_config"),
                section.get("proposal_methods"),
                section.get("verifier"),
            )
        return cls(
            config=config,
            layout=layout,
            architecture=arch,
            model_type=setting(config, "model_type"),
            hidden=_positive(setting(config, "hidden_size")),
            target_hidden=_positive(setting(config, "target_hidden_size")),
            layers=_positive(setting(config, "num_hidden_layers")),
            vocab=_positive(setting(config, "vocab_size")),
            draft_vocab=_positive(setting(config, "draft_vocab_size")),
            heads=_positive(setting(config, "num_attention_heads")),
            kv_heads=_positive(setting(config, "num_key_value_heads")),
            head_dim=_positive(setting(config, "head_dim")),
            intermediate=_positive(setting(config, "intermediate_size")) or _llama_default("intermediate_size"),
            max_positions=_positive(setting(config, "max_position_embeddings")),
            dtype=dtype,
            attention="mla" if mla is not None else "llama",
            mla=mla,
            aux_ids=aux,
            num_aux_hidden_states=_positive(setting(config, "num_aux_hidden_states")),
            use_aux=_use_aux(config, layout == "speculators"),
            norm_before_fc=_norm_before_fc(config),
            fc_norm=bool(config.get("fc_norm") or config.get("use_aux_norm")),
            fc_norm_key=bool(config.get("fc_norm")),
            norm_output=bool(config.get("norm_output")),
            norm_before_residual=setting(config, "norm_before_residual"),
            bias=_flag(config, "bias"),
            attention_bias=_flag(config, "attention_bias"),
            mlp_bias=_flag(config, "mlp_bias"),
            tied=_flag(config, "tie_word_embeddings"),
            quantization=_quantization(config),
            speculators=speculators,
        )

    # --- values the settings imply (each derived here only) ------------------------------------------------

    @property
    def hidden_size(self) -> int:
        return self.hidden.value if self.hidden else 0

    @property
    def target_hidden_size(self) -> int:
        """The width of the target hidden states fc takes: target_hidden_size, else hidden_size."""
        return self.target_hidden.value if self.target_hidden else self.hidden_size

    @property
    def layer_count(self) -> int:
        """num_hidden_layers; absent, the engines' config class (transformers' LlamaConfig) defaults it to 32."""
        return self.layers.value if self.layers else LLAMA_CONFIG_DEFAULTS["num_hidden_layers"]

    @property
    def variants(self) -> tuple[str, ...]:
        """The EAGLE-3 variants this drafter is (none: the plain one-layer Llama-attention EAGLE-3): ``mla``
        (DeepSeek-V2 attention), ``eagle3.1`` (fc_norm, norm_before_fc or norm_output set as the engines read
        them), ``multi-layer`` (num_hidden_layers above 1)."""
        found: tuple[str, ...] = ("mla",) if self.attention == "mla" else ()
        if self.fc_norm or self.norm_before_fc or self.norm_output:
            found += ("eagle3.1",)
        if self.layers is not None and self.layers.value > 1:
            found += ("multi-layer",)
        return found

    @property
    def head_dim_size(self) -> int | None:
        if self.head_dim:
            return int(self.head_dim.value)
        if self.heads and self.hidden and self.hidden.value % self.heads.value == 0:
            return int(self.hidden.value // self.heads.value)
        return None

    @property
    def kv_head_count(self) -> int | None:
        setting_ = self.kv_heads or self.heads
        return setting_.value if setting_ else None

    def q_out(self) -> int | None:
        hd = self.head_dim_size
        return self.heads.value * hd if self.heads and hd else None

    def kv_out(self) -> int | None:
        hd, kv = self.head_dim_size, self.kv_head_count
        return kv * hd if kv and hd else None

    @property
    def vocab_size(self) -> int | None:
        return self.vocab.value if self.vocab else None

    @property
    def draft_vocab_size(self) -> int | None:
        return self.draft_vocab.value if self.draft_vocab else None

    @property
    def head_rows(self) -> int | None:
        """Rows of the drafter's own lm_head: draft_vocab_size, else vocab_size."""
        return self.draft_vocab_size or self.vocab_size

    @property
    def needs_d2t(self) -> bool:
        return self.draft_vocab is not None and self.vocab is not None and self.draft_vocab.value != self.vocab.value

    @property
    def safetensors_dtype(self) -> str | None:
        return config_dtype(self.dtype.value) if self.dtype else None

    @property
    def aux_layer_ids(self) -> Setting | None:
        """The ids the drafter was trained with, as its config states them (first location found)."""
        return self.aux_ids[0] if self.aux_ids else None

    def aux_at(self, keys: tuple[str, ...]) -> Setting | None:
        """The ids at the first of ``keys`` (dotted) the config sets: what an engine reading those keys gets."""
        by_key = {found.key: found for found in self.aux_ids}
        return next((by_key[key] for key in keys if key in by_key), None)

    def empty_aux_key(self, keys: tuple[str, ...]) -> str | None:
        """The first of ``keys`` (dotted) the config sets (not null), when it holds an empty list of ids."""
        for key in keys:
            value = lookup(self.config, key)
            if value is not None:
                return key if value == [] else None
        return None

    def fc_aux_count(self, keys: tuple[str, ...]) -> int:
        """fc's number of target hidden states for an engine that sizes it from ``keys``: num_aux_hidden_states,
        else the length of the first of ``keys`` set, else 3."""
        if self.num_aux_hidden_states is not None:
            return int(self.num_aux_hidden_states.value)
        found = self.aux_at(keys)
        return len(found.value) if found else DEFAULT_AUX_LAYERS


def drafter_spec(config: Config | None) -> DrafterSpec | None:
    """The spec of an EAGLE-3 drafter's config, or None (no config, or not an EAGLE-3 drafter's)."""
    return DrafterSpec.of(config) if config is not None and is_eagle3(config) else None


def layer_prefix(index: int) -> str:
    """The canonical name prefix of decoder layer ``index``: SpecForge's ``midlayer.`` for the first."""
    return "midlayer." if index == 0 else f"layers.{index}."
