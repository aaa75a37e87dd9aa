"""SGLang's EAGLE-3 drafter loading, as data (llama_eagle3.py, kimi_k25_eagle3.py, the aux-state set-up)."""

from __future__ import annotations

from ...rules import (
    AuxIds,
    Case,
    Drop,
    Engine,
    Event,
    Loader,
    Param,
    Rename,
    Source,
    SpeculatorsAdapter,
    target_hidden_check,
)
from .capture import ClassCapture, Ids, as_given, plus_one, vllm_default
from .llama_layer import Biases, decoder_layers, fc_block
from .settings import Draft
from .stacking import stacked

REPO = "sgl-project/sglang"
VERSION = "v0.5.23"
LLAMA = Source(REPO, VERSION, "python/sglang/srt/models/llama_eagle3.py")
KIMI = Source(REPO, VERSION, "python/sglang/srt/models/kimi_k25_eagle3.py")
TARGET_LLAMA = Source(REPO, VERSION, "python/sglang/srt/models/llama.py (set_embed, set_eagle3_layers_to_capture)")
AUX_SETUP = Source(REPO, VERSION, "python/sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py")
LOADER_UTILS = Source(REPO, VERSION, "python/sglang/srt/model_loader/weight_utils.py (default_weight_loader)")
HF_CONFIG = Source(REPO, VERSION, "python/sglang/srt/utils/hf_transformers/config.py (get_config)", inferred=True)

RANDOM = Case(
    lambda d: True,
    Event(
        "warning",
        "random_init",
        "eagle3.sglang.random_init",
        LLAMA,
    ),
)


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


def _replaced(d: Draft) -> bool:
    """set_embed swaps in the target's embedding unless target_hidden_size is set and differs from hidden_size."""
    return not (d.target_hidden_set and d.target_hidden != d.hidden)


def _too_narrow(d: Draft) -> bool:
    """The target's embedding replaces the drafter's, but is another width than the drafter's layers read."""
    return _replaced(d) and d.target is not None and d.target.hidden is not None and d.target.hidden != d.hidden


def _rows(d: Draft) -> int | None:
    """The draft head's rows: the embedding's (vocab_size) when tied, else draft_vocab_size or vocab_size."""
    return d.vocab if d.tied else d.head_rows


def _d2t_against_rows(d: Draft) -> int:
    """d2t's length minus the head's rows (0 when either is unknown)."""
    rows, length = _rows(d), d.d2t_length
    return length - rows if rows is not None and length is not None else 0


EMBED_WIDTH = Event(
    "error",
    "embed_width_mismatch",
    "eagle3.sglang.embed_width_mismatch",
    TARGET_LLAMA.inferring(),
)

EMBED = Param(
    "model.embed_tokens.weight",
    lambda d: d.shape("embed_tokens.weight"),
    TARGET_LLAMA,
    absent=(
        Case(_too_narrow, EMBED_WIDTH),
        Case(
            _replaced,
            Event("info", "from_target", "eagle3.sglang.from_target.embedding", LLAMA),
        ),
        Case(
            lambda d: True,
            Event(
                "warning",
                "random_init",
                "eagle3.sglang.random_init.own_embedding",
                TARGET_LLAMA,
            ),
        ),
    ),
    loaded=(
        Case(_too_narrow, EMBED_WIDTH),
        Case(
            _replaced,
            Event(
                "info",
                "embed_tokens_overridden",
                "eagle3.sglang.embed_tokens_overridden",
                TARGET_LLAMA,
            ),
        ),
    ),
)

LM_HEAD = Param(
    "lm_head.weight",
    lambda d: d.shape("lm_head.weight"),
    LLAMA,
    exists=lambda d: not d.tied,
    absent=(
        Case(
            lambda d: d.draft_vocab is None,
            Event(
                "info",
                "from_target",
                "eagle3.sglang.from_target.lm_head",
                LLAMA,
            ),
        ),
        Case(
            lambda d: True,
            Event(
                "warning",
                "lm_head_random",
                "eagle3.sglang.lm_head_random",
                LLAMA,
            ),
        ),
    ),
)

#: load_weights consumes any d2t into hot_token_id = d2t + arange(len(d2t)), whatever the vocabularies; not a
#: parameter, so nothing checks its length or dtype at load time.
HOT_TOKENS = Param(
    "hot_token_id",
    lambda d: None,
    LLAMA,
    exists=lambda d: d.d2t_length is not None or (d.draft_vocab is not None and d.draft_vocab != d.vocab),
    dtypes=("I64", "I32", "I16", "I8", "U8", "U16", "U32"),
    dtype_event=Event(
        "warning",
        "d2t_dtype",
        "eagle3.sglang.d2t_dtype",
        LLAMA.inferring(),
    ),
    loaded=(
        Case(
            lambda d: _d2t_against_rows(d) < 0,
            Event(
                "error",
                "d2t_length",
                "eagle3.sglang.d2t_length.short",
                LLAMA.inferring(),
            ),
        ),
        Case(
            lambda d: _d2t_against_rows(d) > 0,
            Event(
                "warning",
                "d2t_length",
                "eagle3.sglang.d2t_length.long",
                LLAMA.inferring(),
            ),
        ),
        Case(
            lambda d: True,
            Event("info", "d2t_consumed", "eagle3.sglang.d2t_consumed", LLAMA),
        ),
    ),
    absent=(
        Case(
            lambda d: d.draft_vocab is not None and d.draft_vocab != d.vocab,
            Event(
                "warning",
                "d2t_missing",
                "eagle3.sglang.d2t_missing",
                LLAMA.inferring(),
            ),
        ),
        Case(lambda d: True, Event("info", "not_needed", "eagle3.sglang.not_needed", LLAMA)),
    ),
)

NORM = Param("model.norm.weight", lambda d: d.shape("norm.weight"), LLAMA, absent=(RANDOM,))

UNKNOWN = Event(
    "warning",
    "skipped_unknown_name",
    "eagle3.sglang.skipped_unknown_name",
    LLAMA,
)
SHAPE = Event(
    "error",
    "shape_mismatch",
    "eagle3.sglang.shape_mismatch",
    LOADER_UTILS,
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
NESTED_IDS = ("eagle_config.eagle_aux_hidden_state_layer_ids",)

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
        *decoder_layers(lambda i: f"model.layers.{i}.", LLAMA, RANDOM, biases=BIASES),
        NORM,
        LM_HEAD,
        HOT_TOKENS,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    checks=(
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
    # The draft's quant config is --speculative-draft-model-quantization (default: the target's --quantization),
    # not the drafter's quantization_config.
    quantization=lambda d: False,
    quantization_refused=(
        Case(
            _stores_quantized,
            Event(
                "warning",
                "quantization_ignored",
                "eagle3.sglang.quantization_ignored",
                Source(REPO, VERSION, "python/sglang/srt/arg_groups/serving_hook.py", inferred=True),
            ),
        ),
    ),
)

MLA_LOADER = Loader(
    architectures=("Eagle3DeepseekV2ForCausalLM",),
    source=KIMI,
    renames=(
        Rename(r"^layers\.0\.", "midlayer.", KIMI),
        Rename(r"^(d2t|.*\.d2t)$", "hot_token_id", KIMI),
        Rename(r"^(?!lm_head\.|hot_token_id)", "model.", KIMI),
        Rename(r"\.gate_proj\.", ".gate_up_proj.", KIMI, shard="0"),
        Rename(r"\.up_proj\.", ".gate_up_proj.", KIMI, shard="1"),
        Rename(r"\.q_a_proj\.", ".fused_qkv_a_proj_with_mqa.", KIMI, shard="0"),
        Rename(r"\.kv_a_proj_with_mqa\.", ".fused_qkv_a_proj_with_mqa.", KIMI, shard="1"),
    ),
    drops=(
        Drop(r"(^|\.)t2d$", Event("info", "dropped", "eagle3.sglang.dropped.mla", KIMI)),
        # q_a_proj and kv_a_proj_with_mqa are cached until both arrive, then fused: one alone is never loaded
        Drop(
            r"\.kv_a_proj_with_mqa\.weight$",
            Event("warning", "unfused_weight", "eagle3.sglang.unfused_weight.q_a_missing", KIMI),
            when=lambda d: not any(n.endswith("q_a_proj.weight") for n in d.names),
        ),
        Drop(
            r"\.q_a_proj\.weight$",
            Event("warning", "unfused_weight", "eagle3.sglang.unfused_weight.kv_a_missing", KIMI),
            when=lambda d: not any(n.endswith("kv_a_proj_with_mqa.weight") for n in d.names),
        ),
    ),
    lookups=("{name}",),
    params=(
        EMBED,
        *fc_block("model.fc", KIMI, RANDOM, bias=lambda d: d.spec.bias, fc_norm="model.fc_norm", needs_aux=False),
        *decoder_layers(
            lambda i: "model.midlayer.",
            KIMI,
            RANDOM,
            attention="mla",
            layers=1,
            fused_qkv_a="fused_qkv_a_proj_with_mqa",
        ),
        NORM,
        LM_HEAD,
        HOT_TOKENS,
    ),
    unknown=Event("warning", "skipped_unknown_name", "eagle3.sglang.skipped_unknown_name.mla", KIMI),
    shape_error=SHAPE,
    checks=(
        Case(
            lambda d: d.layers != 1,
            Event(
                "error",
                "layers_unsupported",
                "eagle3.sglang.layers_unsupported",
                KIMI,
            ),
        ),
        Case(
            lambda d: d.spec.mla is not None and d.spec.mla.q_lora_rank is None,
            Event(
                "error",
                "mla_needs_q_lora_rank",
                "eagle3.sglang.mla_needs_q_lora_rank",
                KIMI,
            ),
        ),
    ),
    # _get_eagle_aux_layer_count: eagle_config's ids, then the top-level ones, else 3.
    fc_aux_keys=(*NESTED_IDS, "eagle_aux_hidden_state_layer_ids"),
    # Eagle3DeepseekV2ForCausalLM drops a modelopt_fp4 quant config: its layers are built unquantized.
    quantization=lambda d: d.spec.quantization is None or d.spec.quantization.weight_format != "nvfp4",
    quantization_refused=(
        Case(
            lambda d: d.spec.quantization is not None and d.spec.quantization.weight_format == "nvfp4",
            Event(
                "warning",
                "quantization_ignored",
                "eagle3.sglang.quantization_ignored.mla_nvfp4",
                KIMI,
            ),
        ),
    ),
)

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
        ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"),
        ("deepseek_v2", "deepseek_v3", "kimi_k2"),
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
