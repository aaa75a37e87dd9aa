"""SGLang's EAGLE-3 drafter loading, as data (llama_eagle3.py, the aux-state set-up; kimi_k25_eagle3.py's MLA
drafter in sglang_mla.py, what they share in sglang_common.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...rules import (
    AuxIds,
    Case,
    Drop,
    Engine,
    Event,
    Loader,
    Rename,
    Source,
    SpeculatorsAdapter,
    target_hidden_check,
)
from .capture import ClassCapture, Ids, as_given, plus_one, vllm_default
from .llama_layer import Biases, Unread, decoder_layers, fc_block
from .settings import Draft
from .sglang_common import (
    AUX_SETUP,
    EMBED,
    HF_CONFIG,
    HOT_TOKENS,
    LLAMA,
    LM_HEAD,
    NESTED_IDS,
    NORM,
    RANDOM,
    REPO,
    SHAPE,
    TARGET_LLAMA,
    VERSION,
)
from .sglang_mla import MLA_LOADER
from .stacking import stacked
from .target_classes import SGLANG_REFUSED

#: Dtypes of quantized weights; scales and zero points stored beside them.
QUANTIZED_DTYPES = frozenset({"F8_E4M3", "F8_E5M2", "I8", "U8", "I4", "U4", "F4", "F8_E8M0"})
SCALE_NAME = ("_scale", "_scale_2", "_zero_point", "_scale_inv", ".k_scale", ".v_scale")


def _stores_quantized(d: Draft) -> bool:
    """Whether a weight is stored quantized (a quantized dtype, or a scale beside it): a quantization_config over
    16-bit weights alone loads them as they are, unquantized layers and all (the warning would cry wolf)."""
    return any(
        (dtype in QUANTIZED_DTYPES and not name.endswith(("d2t", "t2d"))) or name.endswith(SCALE_NAME)
        for name, dtype in d.dtypes.items()
    )


UNKNOWN = Event(
    "warning",
    "skipped_unknown_name",
    "eagle3.sglang.skipped_unknown_name",
    LLAMA,
)

DROPS = (
    Drop(r"t2d", Event("info", "dropped", "eagle3.sglang.dropped", LLAMA)),
    # no parameter answers to these: skipped like any unknown name, but no trained weight is lost
    Drop(
        r"(^|\.)(mask_hidden|rotary_emb\.inv_freq)$",
        Event("info", "dropped", "eagle3.sglang.dropped.not_trained", LLAMA),
    ),
)
#: legacy_name_map, then d2t → hot_token_id, then the stacked q/k/v and gate/up.
RENAMES = (
    Rename(r"midlayer", "layers.0", LLAMA),
    Rename(r"aux_norm_low", "fc_norm.0", LLAMA),
    Rename(r"aux_norm_mid", "fc_norm.1", LLAMA),
    Rename(r"aux_norm_high", "fc_norm.2", LLAMA),
    Rename(r"^.*d2t.*$", "hot_token_id", LLAMA),
    *stacked(LLAMA),
)

#: llama_eagle3 overrides qkv_proj with bias=False; o_proj keeps LlamaAttention's bias=attention_bias or bias;
#: LlamaMLP has no bias.
BIASES = Biases(o_proj=lambda d: d.spec.attention_bias or d.spec.bias)

#: LlamaDecoderLayer.forward: layer 0 normalises the embedding with input_layernorm and the target's state with
#: hidden_norm; every later layer calls hidden_norm(hidden_states, residual) and never input_layernorm, which it
#: still builds and loads.
LATER_LAYERS_READ = Source(REPO, VERSION, "python/sglang/srt/models/llama_eagle3.py (LlamaDecoderLayer.forward)")
LATER_LAYERS_UNREAD = Unread(
    "input_layernorm",
    absent=Case(lambda d: True, Event("info", "unread", "eagle3.sglang.unread", LATER_LAYERS_READ)),
    loaded=Case(lambda d: True, Event("info", "loaded_unread", "eagle3.sglang.loaded_unread", LATER_LAYERS_READ)),
)

LLAMA_LOADER = Loader(
    architectures=("LlamaForCausalLMEagle3",),
    source=LLAMA,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}", "model.{name}"),
    params=(
        EMBED,
        *fc_block(
            "model.fc",
            LLAMA,
            RANDOM,
            bias=lambda d: d.spec.bias,
            fc_norm="model.fc_norm",
            input_norm="model.input_norm",
            quantizable=False,  # fc is a plain torch.nn.Linear
            needs_aux=False,  # built whatever use_aux_hidden_state says
        ),
        *decoder_layers(lambda i: f"model.layers.{i}.", LLAMA, RANDOM, biases=BIASES, unread=LATER_LAYERS_UNREAD),
        NORM,
        LM_HEAD,
        HOT_TOKENS,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    checks=(
        Case(
            lambda d: _wna16_unsupported(d.config),
            Event(
                "error",
                "quantization_scheme_unsupported",
                "eagle3.sglang.quantization_scheme_unsupported",
                Source(
                    REPO,
                    VERSION,
                    "python/sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py:733-751",
                ),
            ),
        ),
        Case(
            lambda d: "draft_vocab_size" not in d.config,
            Event(
                "error",
                "draft_vocab_size_absent",
                "eagle3.sglang.draft_vocab_size_absent",
                LLAMA,
            ),
        ),
    ),
    fc_aux_keys=NESTED_IDS,
    # The draft is built with its own quantization_config: --speculative-draft-model-quantization defaults to the
    # target's --quantization, and a draft whose checkpoint names another method takes the checkpoint's
    # (configs/model_config.py _verify_quantization; observed with the loader's quant config, loader.py:837-843).
    quantization=lambda d: True,
)

#: Weight bit widths SGLang's compressed-tensors WNA16 scheme takes (compressed_tensors_wNa16.py:60).
WNA16_BITS = (4, 8)


def _wna16_unsupported(config: Mapping[str, Any]) -> bool:
    """A compressed-tensors group of static int weights per channel or group with no input activations is the
    WNA16 path, which SGLang builds only from the pack-quantized format at 4 or 8 bits; any other raises
    ImportError "Other method (CompressedTensorsW4A16Sparse24) is not supported now" when the layer is built."""
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping) or quant.get("quant_method") not in ("compressed-tensors", "compressed_tensors"):
        return False
    groups = quant.get("config_groups")
    for group in groups.values() if isinstance(groups, Mapping) else ():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping) or group.get("input_activations"):
            continue
        wna16 = (
            weights.get("type") == "int"
            and weights.get("strategy") in ("channel", "group")
            and not weights.get("dynamic", False)
        )
        packed = group.get("format", quant.get("format")) == "pack-quantized" and weights.get("num_bits") in WNA16_BITS
        if wna16 and not packed:
            return True
    return False


MODELS = "python/sglang/srt/models/"


def _deepseek_indices(ids: Ids, n: int) -> Ids:
    """deepseek_v2.py: 1 is added only when the first id is 1 (ids written as layer outputs), else the ids are
    taken as the indices themselves."""
    return plus_one(ids, n) if ids and ids[0] == 1 else as_given(ids, n)


def _gpt_oss_indices(ids: Ids, n: int) -> Ids:
    """gpt_oss.py: the ids are kept when their maximum is the layer count, else 1 is added to each."""
    return as_given(ids, n) if ids and max(ids) == n else plus_one(ids, n)


def _sglang_family(
    label: str,
    architectures: tuple[str, ...],
    model_types: tuple[str, ...],
    path: str,
    forward: str,
    example: str,
    indices: object = plus_one,
    reached_last: bool = False,
    rule: str = "id + 1",
) -> ClassCapture:
    return ClassCapture(
        label,
        architectures,
        model_types,
        indices=indices,  # type: ignore[arg-type]
        default=vllm_default,  # [2, n//2, n-3] in every set_eagle3_layers_to_capture read
        takes="input",
        reached=(lambda n: range(0, n + 1)) if reached_last else (lambda n: range(0, n)),
        setup=Source(REPO, VERSION, f"{MODELS}{path} (set_eagle3_layers_to_capture)"),
        forward=Source(REPO, VERSION, f"{MODELS}{forward}"),
        example=example,
        rule=rule,
    )


#: The EAGLE-3 worker calls the target's set_eagle3_layers_to_capture with eagle_config's ids (or None); each
#: class turns them into loop indices its forward captures at, taking the input of the layer at that index.
CAPTURES = (
    _sglang_family(
        "Llama",
        ("LlamaForCausalLM", "MistralForCausalLM"),
        ("llama", "mistral"),
        "llama.py",
        "llama.py (LlamaModel.forward: if i in layers_to_capture, before layer i)",
        "Llama-3.1-8B",
    ),
    _sglang_family(
        "Llama-4",
        # Llama4ForConditionalGeneration hands the ids to its language_model (mllama4.py:971-973), a
        # Llama4ForCausalLM of text_config (mllama4.py:496-500) that keeps LlamaForCausalLM's set-up (llama.py:929-941:
        # id + 1; no ids: [2, n//2, n-3], n = text_config.num_hidden_layers)
        ("Llama4ForConditionalGeneration", "Llama4ForCausalLM"),
        ("llama4", "llama4_text"),
        "mllama4.py:971, llama.py:929",
        "llama4.py:522-531 (Llama4Model.forward: if i in layers_to_capture, before layer i; i < n)",
        "Llama-4-Maverick",
    ),
    _sglang_family(
        "Qwen2/Qwen3",
        ("Qwen2ForCausalLM", "Qwen3ForCausalLM"),
        ("qwen2", "qwen3"),
        "qwen3.py",
        "qwen2.py (Qwen2Model.forward, which Qwen3Model inherits)",
        "Qwen3-8B",
    ),
    _sglang_family(
        "Qwen3-MoE",
        ("Qwen3MoeForCausalLM",),
        ("qwen3_moe",),
        "qwen3_moe.py",
        "qwen2_moe.py (Qwen2MoeModel.forward, which Qwen3MoeModel inherits)",
        "Qwen3-235B-A22B",
    ),
    _sglang_family(
        "DeepSeek-V2/V3",
        # KimiK25ForConditionalGeneration hands the ids to its language_model (kimi_k25.py
        # set_eagle3_layers_to_capture), a DeepseekV3ForCausalLM
        ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"),
        ("deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25"),
        "deepseek_v2.py",
        "deepseek_v2.py (DeepseekV2Model.forward: the layer at a captured index captures its own input)",
        "Kimi-K2",
        indices=_deepseek_indices,
        rule="id + 1 when the first id is 1, else as given",
    ),
    _sglang_family(
        "GPT-OSS",
        ("GptOssForCausalLM",),
        ("gpt_oss",),
        "gpt_oss.py",
        "gpt_oss.py (GptOssModel.forward)",
        "gpt-oss-120b",
        indices=_gpt_oss_indices,
        reached_last=True,
        rule="as given when the largest id is the depth, else id + 1",
    ),
)

ENGINE = Engine(
    name="sglang",
    label="SGLang",
    version="0.5.23 (installed source)",
    architecture_mapping=(),
    refused_targets=SGLANG_REFUSED,
    target_class_refused=Event(
        "error",
        "target_class_not_eagle3",
        "eagle3.sglang.target_class_not_eagle3",
        Source(
            REPO,
            VERSION,
            "python/sglang/srt/model_executor/model_runner_components/attention_backend_setup.py "
            "(configure_aux_hidden_state_capture)",
        ),
    ),
    loaders=(LLAMA_LOADER, MLA_LOADER),
    unregistered=Event(
        "error",
        "architecture_not_eagle3",
        "eagle3.sglang.architecture_not_eagle3",
        LLAMA,
    ),
    aux_ids=AuxIds(
        keys=NESTED_IDS,
        offset=0,
        default_outputs=lambda n: (1, n // 2 - 1, n - 4),
        default_event=Event(
            "warning",
            "aux_ids_default",
            "eagle3.sglang.aux_ids_default",
            AUX_SETUP,
        ),
        source=TARGET_LLAMA,
        # layers_to_capture = [id + 1]: captured before layer id+1, so the last layer's output (id n-1) never is.
        valid=lambda n: range(-1, n - 1),
        off_without_aux=Event(
            "info",
            "aux_capture_off",
            "eagle3.aux_capture_off",
            Source(
                REPO,
                VERSION,
                "python/sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py:189 "
                "(eagle_use_aux_hidden_state), attention_backend_setup.py:54 (the capture set up only when it is "
                "true)",
            ),
        ),
        empty_captures_nothing=Source(
            REPO,
            VERSION,
            "python/sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py:192 (eagle_config's "
            "ids taken as given), python/sglang/srt/models/llama.py:933 (set_eagle3_layers_to_capture: only None "
            "means the default; [] captures no layer, as in every target class)",
        ),
        classes=CAPTURES,
    ),
    config_checks=(
        # ModelConfig reads config.json through transformers' AutoConfig, which needs the model_type key (seen by
        # the oracle: gen_config_without_model_type raises at the config step).
        Case(
            lambda d: d.spec.model_type is None and d.spec.speculators is None,
            Event("error", "config_unrecognized", "eagle3.sglang.config_unrecognized", HF_CONFIG),
        ),
        Case(
            lambda d: d.spec.norm_before_residual is not None and d.spec.norm_before_residual.value is True,
            Event(
                "warning",
                "config_ignored",
                "eagle3.sglang.config_ignored",
                LLAMA,
            ),
        ),
    ),
    target_checks=(target_hidden_check(LLAMA.inferring(), "eagle3.sglang.target_hidden_mismatch"),),
    # No adapter: config.json goes to transformers' AutoConfig, which has no "speculators" model_type.
    speculators=SpeculatorsAdapter(
        architectures=(),
        types=(),
        source=HF_CONFIG,
        invalid=Event(
            "error",
            "speculators_format_unsupported",
            "eagle3.sglang.speculators_format_unsupported",
            HF_CONFIG,
        ),
    ),
)
