"""What every vLLM EAGLE-3 drafter loader shares (llama_eagle3.py's load_weights and its model's parameters):
the pinned sources, the embedding, head, token map and final norm, the renames and drops; ``vllm.py`` and
``vllm_mla.py`` build their loaders from these."""

from __future__ import annotations

from ...rules import Case, Drop, Event, Param, Rename, Source
from .llama_layer import Unread
from .settings import Draft
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
        "eagle3.vllm.random_init",
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
                "eagle3.vllm.embed_width_mismatch",
                SHARE_EMBED.inferring(),
            ),
        ),
        Case(
            lambda d: True,
            Event("info", "from_target", "eagle3.vllm.from_target", PROPOSER),
        ),
    ),
    loaded=(
        Case(
            lambda d: True,
            Event(
                "info",
                "embed_tokens_own",
                "eagle3.vllm.embed_tokens_own",
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
                "eagle3.vllm.lm_head_from_target",
                PROPOSER.inferring(),
            ),
        ),
        Case(
            lambda d: True,
            Event("info", "from_target", "eagle3.vllm.from_target", PROPOSER),
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
        "eagle3.vllm.d2t_dtype",
        AUTO_LOADER,
    ),
    absent=(
        Case(
            lambda d: True,
            Event(
                "warning",
                "d2t_missing",
                "eagle3.vllm.d2t_missing",
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
    "eagle3.vllm.unknown_name",
    AUTO_LOADER,
)
SHAPE = Event(
    "error",
    "shape_mismatch",
    "eagle3.vllm.shape_mismatch",
    LOADER_UTILS,
)
#: AutoWeightsLoader.load_weights appends ".bias" to ignore_unexpected_suffixes: a bias the drafter has no
#: parameter for is dropped without a word.
BIAS_IGNORED = (
    ".bias",
    Event(
        "warning",
        "bias_ignored",
        "eagle3.vllm.bias_ignored",
        AUTO_LOADER,
    ),
)

DROPS = (
    Drop(r"t2d", Event("info", "dropped", "eagle3.vllm.dropped", LLAMA)),
    Drop(
        r"mask_hidden",
        Event(
            "info",
            "dropped",
            "eagle3.vllm.dropped.mask_hidden",
            LLAMA,
        ),
    ),
    Drop(
        r"^fc\.",
        Event(
            "warning",
            "fc_unused",
            "eagle3.vllm.fc_unused",
            LLAMA,
        ),
        when=lambda d: not d.use_aux,
    ),
    Drop(
        r"^input_norm\.",
        Event("warning", "input_norm_unused", "eagle3.vllm.input_norm_unused", LLAMA),
        when=lambda d: not d.spec.norm_before_fc,
    ),
    Drop(
        r"rotary_emb\.(inv_freq|cos_cached|sin_cached)",
        Event("info", "dropped", "eagle3.vllm.dropped.rotary", AUTO_LOADER),
    ),
)


#: ModelOpt's FP8 KV-cache scales, stored on k_proj/v_proj, are loaded into the attention's own k_scale/v_scale
#: (weight_utils.py maybe_remap_kv_scale_name, which the Llama model's load_weights calls).
KV_SCALES = Source(REPO, VERSION, "vllm/model_executor/model_loader/weight_utils.py (maybe_remap_kv_scale_name)")
KV_SCALE_RENAMES = (
    Rename(r"\.k_proj\.k_scale$", ".attn.k_scale", KV_SCALES),
    Rename(r"\.v_proj\.v_scale$", ".attn.v_scale", KV_SCALES),
)

RENAMES = (
    *KV_SCALE_RENAMES,
    Rename(r"d2t", "draft_id_to_target_id", LLAMA),
    Rename(r"midlayer\.", "layers.0.", LLAMA),
    Rename(r"^(?!lm_head|draft_id_to_target_id)", "model.", LLAMA),
    *stacked(LLAMA),
)
NESTED_IDS = ("eagle_config.eagle_aux_hidden_state_layer_ids",)


def layer(i: int) -> str:
    return f"model.layers.{i}."


def later_layers_unread(source: Source) -> Unread:
    """The decoder layer's forward (LlamaDecoderLayer in llama_eagle3.py and qwen3_eagle3.py,
    DeepseekV2Eagle3DecoderLayer in deepseek_eagle3.py): layer 0 normalises the target's state with hidden_norm
    and the embedding with input_layernorm; every later layer calls input_layernorm(hidden_states, residual) and
    never hidden_norm, which it still builds and loads."""
    read = Source(source.repo, source.commit, f"{source.path} (decoder layer forward: layer_idx > 0)")
    return Unread(
        "hidden_norm",
        absent=Case(lambda d: True, Event("info", "unread", "eagle3.vllm.unread", read)),
        loaded=Case(lambda d: True, Event("info", "loaded_unread", "eagle3.vllm.loaded_unread", read)),
    )


#: vLLM builds fc_norm from the top-level fc_norm key alone (getattr(config, "fc_norm", False)); it knows no
#: use_aux_norm.
def fc_norm_read(d: Draft) -> bool:
    return d.spec.fc_norm_key
