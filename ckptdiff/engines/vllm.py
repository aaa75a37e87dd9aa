"""vLLM's EAGLE-3 drafter loading, as data (llama_eagle3.py, qwen3_eagle3.py, deepseek_eagle3.py, configs)."""

from __future__ import annotations

from .capture import ClassCapture, vllm_default
from .llama_layer import MAX_LAYERS, Biases, decoder_layers, fc_block, layer_exists
from .quantized import vllm_ignores
from .rules import (
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
from .stacking import stacked

REPO = "vllm-project/vllm"
VERSION = "v0.33.0"
LLAMA = Source(REPO, VERSION, "vllm/model_executor/models/llama_eagle3.py")
QWEN3 = Source(REPO, VERSION, "vllm/model_executor/models/qwen3_eagle3.py")
DEEPSEEK = Source(REPO, VERSION, "vllm/model_executor/models/deepseek_eagle3.py")
PROPOSER = Source(REPO, VERSION, "vllm/v1/spec_decode/llm_base_proposer.py")
SHARE_EMBED = Source(REPO, VERSION, "vllm/v1/worker/gpu/spec_decode/eagle/utils.py (maybe_share_target_embed)")
AUX = Source(REPO, VERSION, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (get_eagle3_aux_layers_from_config)")
CAPTURE = Source(REPO, VERSION, "vllm/model_executor/models/interfaces.py (get_eagle3_default_aux_hidden_state_layers)")
REGISTRY = Source(REPO, VERSION, "vllm/model_executor/models/registry.py")
SPECULATORS = Source(REPO, VERSION, "vllm/transformers_utils/configs/speculators/base.py (validate_speculators_config)")
SPECULATORS_ALGOS = Source(REPO, VERSION, "vllm/transformers_utils/configs/speculators/algos.py (update_eagle3)")
AUTO_LOADER = Source(REPO, VERSION, "vllm/model_executor/models/utils.py (AutoWeightsLoader)")
LOADER_UTILS = Source(REPO, VERSION, "vllm/model_executor/model_loader/weight_utils.py (default_weight_loader)")
SPECULATIVE = Source(REPO, VERSION, "vllm/config/speculative.py")

#: Eagle3LlamaForCausalLM.load_weights returns None, so the model loader's "weights not initialized" check
#: does not run for the drafter: an unfilled parameter keeps its initial values.
UNCHECKED = Case(
    lambda d: True,
    Event(
        "warning",
        "random_init",
        "{param} is never loaded and vLLM does not check (the drafter's load_weights returns None): it keeps its "
        "initial values",
        LLAMA,
    ),
)

EMBED = Param(
    "model.embed_tokens.weight",
    lambda d: d.shape("embed_tokens.weight"),
    PROPOSER,
    absent=(
        Case(
            lambda d: d.target_width not in (None, d.hidden),
            Event(
                "error",
                "embed_width_mismatch",
                "{param}: the drafter has none, so vLLM shares the target's, which is {target_width} wide, with no "
                "width check, but the drafter's layers take hidden_size={hidden}: the first forward fails",
                SHARE_EMBED.inferring(),
            ),
        ),
        Case(
            lambda d: True,
            Event("info", "from_target", "{param}: the drafter has none, so vLLM shares the target's", PROPOSER),
        ),
    ),
    loaded=(
        Case(
            lambda d: True,
            Event(
                "info",
                "embed_tokens_own",
                "{name}: vLLM uses the drafter's own embedding (has_own_embed_tokens; shared with the target only "
                "when torch.equal to it), so it must equal the target's; a random one collapses acceptance "
                "(--values --base checks)",
                PROPOSER,
            ),
        ),
    ),
)

#: ParallelLMHead is not a LinearBase: quant configs leave it unquantized.
LM_HEAD = Param(
    "lm_head.weight",
    lambda d: d.shape("lm_head.weight"),
    LLAMA,
    absent=(
        Case(
            lambda d: d.draft_vocab is not None and d.draft_vocab != d.vocab,
            Event(
                "warning",
                "lm_head_from_target",
                "{param}: the drafter has none, so vLLM shares the target's {vocab}-row head, but draft_vocab_size is "
                "{draft_vocab}: draft logits are mapped through d2t as if they were draft-vocabulary logits",
                PROPOSER.inferring(),
            ),
        ),
        Case(
            lambda d: True,
            Event("info", "from_target", "{param}: the drafter has none, so vLLM shares the target's", PROPOSER),
        ),
    ),
)

#: draft_id_to_target_id exists only when draft_vocab_size (else vocab_size) differs from the target's vocabulary.
D2T = Param(
    "draft_id_to_target_id",
    lambda d: (d.head_rows,) if d.head_rows else None,
    LLAMA,
    exists=lambda d: d.head_rows != d.target_vocab,
    dtypes=("I64", "I32", "I16", "U8", "U16", "U32", "I8"),
    dtype_event=Event(
        "warning",
        "d2t_dtype",
        "{name} is {dtype}: vLLM copies it into its int64 {param} (logging only a dtype warning), so offsets a "
        "{dtype} cannot hold exactly are rounded and draft tokens map to the wrong target ids",
        AUTO_LOADER,
    ),
    absent=(
        Case(
            lambda d: True,
            Event(
                "warning",
                "d2t_missing",
                "{param}: no d2t, so it stays zeros and draft id i is taken for target id i, though draft_vocab_size "
                "{draft_vocab} != the target's vocabulary {target_vocab}",
                LLAMA,
            ),
        ),
    ),
)

NORM = Param("model.norm.weight", lambda d: d.shape("norm.weight"), LLAMA, absent=(UNCHECKED,))

#: Names no module or parameter answers to raise in AutoWeightsLoader._load_module.
UNKNOWN = Event(
    "error",
    "unknown_name",
    "{name} becomes {candidate}, which vLLM's drafter has no parameter for: ValueError: There is no module or "
    "parameter named '{candidate}'",
    AUTO_LOADER,
)
SHAPE = Event(
    "error",
    "shape_mismatch",
    '{name} is {got} but vLLM\'s {param} is {want}: "Attempted to load weight ({got}) into parameter ({want})"',
    LOADER_UTILS,
)
#: AutoWeightsLoader.load_weights appends ".bias" to ignore_unexpected_suffixes: a bias the drafter has no
#: parameter for is dropped without a word.
BIAS_IGNORED = (
    ".bias",
    Event(
        "warning",
        "bias_ignored",
        "{name}: vLLM builds this layer without a bias and its loader ignores unexpected .bias tensors, so the "
        "trained bias is not used",
        AUTO_LOADER,
    ),
)

DROPS = (
    Drop(r"t2d", Event("info", "dropped", "{name} is not used by vLLM (skipped by load_weights)", LLAMA)),
    Drop(
        r"mask_hidden",
        Event(
            "info",
            "dropped",
            '{name}: logged "mask_hidden found in weights but model is not configured for parallel '
            'drafting. Skipping loading mask_hidden."',
            LLAMA,
        ),
    ),
    Drop(
        r"^fc\.",
        Event(
            "warning",
            "fc_unused",
            "{name}: eagle_config.use_aux_hidden_state is false, so vLLM skips fc and the "
            "drafter reads one hidden state",
            LLAMA,
        ),
        when=lambda d: not d.use_aux,
    ),
    Drop(
        r"^input_norm\.",
        Event("warning", "input_norm_unused", "{name}: norm_before_fc is not set, so vLLM drops it", LLAMA),
        when=lambda d: not d.spec.norm_before_fc,
    ),
    Drop(r"rotary_emb\.(inv_freq|cos_cached|sin_cached)", Event("info", "dropped", "{name}: dropped", AUTO_LOADER)),
)

RENAMES = (
    Rename(r"d2t", "draft_id_to_target_id", LLAMA),
    Rename(r"midlayer\.", "layers.0.", LLAMA),
    Rename(r"^(?!lm_head|draft_id_to_target_id)", "model.", LLAMA),
    *stacked(LLAMA),
)
MLA_RENAMES = (
    *RENAMES,
    Rename(r"\.q_a_proj\.", ".fused_qkv_a_proj.", DEEPSEEK, shard="0"),
    Rename(r"\.kv_a_proj_with_mqa\.", ".fused_qkv_a_proj.", DEEPSEEK, shard="1"),
)

#: qkv_proj: bias=attention_bias; o_proj: attention_bias or bias; LlamaMLP: bias=mlp_bias (LlamaDecoderLayer).
BIASES = Biases(
    qkv=lambda d: d.spec.attention_bias,
    o_proj=lambda d: d.spec.attention_bias or d.spec.bias,
    mlp=lambda d: d.spec.mlp_bias,
)
NESTED_IDS = ("eagle_config.eagle_aux_hidden_state_layer_ids",)


def layer(i: int) -> str:
    return f"model.layers.{i}."


FC = fc_block("model.fc", LLAMA, UNCHECKED, fc_norm="model.fc_norm", input_norm="model.input_norm")
#: qwen3_eagle3 sizes fc from num_aux_layers, num_aux_hidden_states, then top-level, then nested ids.
QWEN3_FC_KEYS = ("eagle_aux_hidden_state_layer_ids", *NESTED_IDS)

LLAMA_LOADER = Loader(
    architectures=(
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "PeagleLlamaForCausalLM",
        "Eagle3MiniMaxM2ForCausalLM",
        "Eagle3Qwen2_5vlForCausalLM",
        "Eagle3Qwen3vlForCausalLM",
    ),
    source=LLAMA,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}",),
    params=(EMBED, *FC, *decoder_layers(layer, LLAMA, UNCHECKED, biases=BIASES), NORM, LM_HEAD, D2T),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    fc_aux_keys=NESTED_IDS,
    ignored_unexpected=BIAS_IGNORED,
    ignores=vllm_ignores,
)

QWEN3_NORMS = tuple(
    Param(
        f"model.layers.{i}.self_attn.{norm}.weight",
        lambda d: (d.spec.head_dim_size,) if d.spec.head_dim_size else None,
        QWEN3,
        exists=layer_exists(i),
        absent=(UNCHECKED,),
    )
    for i in range(MAX_LAYERS)
    for norm in ("q_norm", "k_norm")
)

QWEN3_LOADER = Loader(
    architectures=("Eagle3Qwen3ForCausalLM", "PeagleQwen3ForCausalLM"),
    source=QWEN3,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}",),
    params=(
        EMBED,
        *fc_block("model.fc", QWEN3, UNCHECKED, fc_norm="model.fc_norm", input_norm="model.input_norm"),
        *decoder_layers(layer, QWEN3, UNCHECKED, biases=BIASES),
        *QWEN3_NORMS,
        NORM,
        LM_HEAD,
        D2T,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    fc_aux_keys=QWEN3_FC_KEYS,
    ignored_unexpected=BIAS_IGNORED,
    ignores=vllm_ignores,
)

MLA_LOADER = Loader(
    architectures=("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"),
    source=DEEPSEEK,
    renames=MLA_RENAMES,
    drops=DROPS[:3] + DROPS[4:],
    lookups=("{name}",),
    params=(
        EMBED,
        *fc_block("model.fc", DEEPSEEK, UNCHECKED, fc_norm="model.fc_norm"),
        *decoder_layers(layer, DEEPSEEK, UNCHECKED, attention="mla"),
        NORM,
        LM_HEAD,
        D2T,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    fc_aux_keys=NESTED_IDS,
    ignored_unexpected=BIAS_IGNORED,
    ignores=vllm_ignores,
)

#: The runner's set-up (eagle3_utils.set_eagle3_aux_hidden_state_layers: the ids read, else the class's
#: get_eagle3_default_aux_hidden_state_layers, interfaces.py: (2, n//2, n-3), which DeepSeek-V2 does not override)
#: keeps ids as they are; every class's forward takes hidden_states + residual at index i before layer i (i = n:
#: after the last), so id j is the output of layer j-1. Observed per class by the oracle (run.py --capture).
SETUP = Source(
    REPO, VERSION, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (set_eagle3_aux_hidden_state_layers)"
)


def _vllm_family(
    label: str, architectures: tuple[str, ...], model_types: tuple[str, ...], forward: str, example: str = ""
) -> ClassCapture:
    return ClassCapture(
        label,
        architectures,
        model_types,
        indices=lambda ids, n: tuple(ids),
        default=vllm_default,
        takes="input",
        reached=lambda n: range(0, n + 1),
        setup=SETUP,
        forward=Source(REPO, VERSION, forward),
        example=example,
    )


CAPTURES = (
    _vllm_family(
        "Llama",
        ("LlamaForCausalLM", "MistralForCausalLM"),
        ("llama", "mistral"),
        "vllm/model_executor/models/llama.py (LlamaModel.forward: _maybe_add_hidden_state(aux, idx + 1, ...))",
        "Llama-3.1-8B",
    ),
    _vllm_family(
        "Qwen2/Qwen3",
        ("Qwen2ForCausalLM", "Qwen3ForCausalLM"),
        ("qwen2", "qwen3"),
        "vllm/model_executor/models/qwen2.py (Qwen2Model.forward, which Qwen3Model inherits)",
        "Qwen3-8B",
    ),
    _vllm_family(
        "Qwen3-MoE",
        ("Qwen3MoeForCausalLM",),
        ("qwen3_moe",),
        "vllm/model_executor/models/qwen3_moe.py (Qwen3MoeModel.forward)",
        "Qwen3-235B-A22B",
    ),
    _vllm_family(
        "DeepSeek-V2/V3",
        ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"),
        ("deepseek_v2", "deepseek_v3", "kimi_k2"),
        "vllm/model_executor/models/deepseek_v2.py (DeepseekV2Model.forward: if idx in aux_hidden_state_layers, "
        "before layer idx; end_layer after the last)",
        "Kimi-K2",
    ),
    _vllm_family(
        "GPT-OSS",
        ("GptOssForCausalLM",),
        ("gpt_oss",),
        "vllm/model_executor/models/gpt_oss.py (GptOssModel.forward: _maybe_add_hidden_state(aux, i + 1, ...))",
        "gpt-oss-120b",
    ),
)

ENGINE = Engine(
    name="vllm",
    label="vLLM",
    version="0.33.0 (installed source)",
    # EAGLEConfig keeps a name that starts or ends with Eagle3 and prepends Eagle3 to any other
    architecture_mapping=((r"^(?!Eagle3)(?!.*Eagle3$)", "Eagle3"),),
    loaders=(LLAMA_LOADER, QWEN3_LOADER, MLA_LOADER),
    unregistered=Event(
        "error",
        "architecture_not_registered",
        "architectures[0] is {arch}; vLLM's EAGLEConfig makes it {looked_up}{why}, which vLLM does not register "
        "({registered}): ValueError: Model architectures ['{looked_up}'] are not supported for now.",
        REGISTRY,
    ),
    model_type_architectures=(
        (
            ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp"),
            "DeepSeekMTPModel",
            " (SpeculativeConfig.hf_config_override first turns a model_type {model_type} draft into "
            "{replacement}: use model_type deepseek_v2 for an EAGLE-3 MLA drafter)",
        ),
    ),
    aux_ids=AuxIds(
        # The V2 model runner (the default for EAGLE-3 in 0.33.0) reads the top-level ids, then
        # eagle_config.layer_ids; the V1 runner (gpu_model_runner.py) reads eagle_config.eagle_aux_... instead.
        keys=("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids"),
        offset=-1,
        convention="vLLM's: id j = the output of target layer j-1 (it captures before layer j; id n = the last)",
        default_outputs=lambda n: (1, n // 2 - 1, n - 4),
        default_event=Event(
            "warning",
            "aux_ids_default",
            "no aux layer ids where vLLM's model runner looks (eagle_aux_hidden_state_layer_ids, then "
            "eagle_config.layer_ids){ignored}: it captures its default (2, n//2, n-3) = the outputs of target "
            "layers {outputs}",
            AUX,
        ),
        source=AUX,
        valid=lambda n: range(0, n + 1),
        classes=CAPTURES,
    ),
    # SpeculativeConfig._verify_args has no target model_type whitelist in this version; older releases
    # refused targets outside a list (vllm#22152, #31254): a rule for such a release sets target_model_types.
    target_model_types=None,
    target_refused=Event(
        "error",
        "target_not_supported",
        "ValueError: Eagle3 is only supported for {supported} models. Got "
        "self.target_model_config.hf_text_config.model_type='{model_type}'",
        SPECULATIVE,
    ),
    config_checks=(
        Case(
            lambda d: d.spec.speculators is not None and d.spec.norm_before_residual is None,
            Event(
                "info",
                "config_default_differs",
                "no norm_before_residual: vLLM's speculators adapter defaults it to true, the speculators library "
                "(which trained this drafter) to false, so the hidden norm is applied at another point than in "
                "training",
                SPECULATORS_ALGOS,
            ),
        ),
    ),
    target_checks=(target_hidden_check(LLAMA.inferring(), "the fc matmul fails on the first forward"),),
    speculators=SpeculatorsAdapter(
        architectures=(("llama", "Eagle3LlamaForCausalLM"), ("qwen3", "Eagle3Qwen3ForCausalLM")),
        types=("eagle3", "peagle"),
        source=SPECULATORS,
        invalid=Event("error", "speculators_config_invalid", "{defect}", SPECULATORS),
        # validate_speculators_config runs only when the checkpoint is served as the model
        # (maybe_override_with_speculators); as --speculative-config's model it loads without it.
        validation=Event(
            "warning",
            "speculators_config_invalid",
            "{defect}: vLLM loads it as --speculative-config's model, but `vllm serve` on this checkpoint (the "
            "speculators auto-detection, transformers_utils/config.py maybe_override_with_speculators) raises it",
            SPECULATORS,
        ),
    ),
)
