"""vLLM's EAGLE-3 drafter loading, as data (llama_eagle3.py, deepseek_eagle3.py, the EAGLE proposer, configs)."""

from __future__ import annotations

from .llama_layer import Biases, decoder_layer, mla_layer
from .rules import AuxIds, Case, Drop, Engine, Event, Loader, Param, Rename, Source, target_hidden_check
from .stacking import stacked

REPO = "vllm-project/vllm"
LLAMA = Source(REPO, "00bd149", "vllm/model_executor/models/llama_eagle3.py")
DEEPSEEK = Source(REPO, "0359019", "vllm/model_executor/models/deepseek_eagle3.py")
PROPOSER = Source(REPO, "00c4f22", "vllm/v1/spec_decode/llm_base_proposer.py")
CONFIG = Source(REPO, "23c5aa9", "vllm/transformers_utils/configs/eagle.py")
AUX = Source(REPO, "0cfdd2e", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py")
REGISTRY = Source(REPO, "00bd149", "vllm/model_executor/models/registry.py", inferred=True)
SPECULATORS = Source(REPO, "9469974", "vllm/transformers_utils/configs/speculators/base.py")
SPECULATORS_ALGOS = Source(REPO, "cfb173a", "vllm/transformers_utils/configs/speculators/algos.py")
LOADER_UTILS = Source(REPO, "00bd149", "vllm/model_executor/model_loader/weight_utils.py (default_weight_loader)")

#: Eagle3LlamaForCausalLM.load_weights returns None, so the model loader's "weights not initialized" check
#: does not run for the drafter: an unfilled parameter keeps its initial values.
UNCHECKED = Case(
    lambda d: True,
    Event(
        "warning",
        "random_init",
        "{param} is never loaded and vLLM does not check (the drafter's load_weights returns None): it keeps its "
        "initial values",
        LLAMA.inferring(),
    ),
)

EMBED = Param(
    "model.embed_tokens.weight",
    lambda d: (d.vocab, d.hidden) if d.vocab else None,
    PROPOSER,
    absent=(
        Case(
            lambda d: d.target_width not in (None, d.hidden),
            Event(
                "error",
                "embed_width_mismatch",
                "{param}: the drafter has none, so vLLM shares the target's, which is {target_width} wide, but "
                "hidden_size is {hidden}: AssertionError in LlamaModel.forward (hidden_states.shape[-1] == "
                "input_embeds.shape[-1]) (vllm#18906)",
                LLAMA,
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
                "{name}: vLLM uses the drafter's own embedding (shared with the target only when "
                "torch.equal to it), so it "
                "must equal the target's; a random one collapses acceptance (--values --base checks)",
                PROPOSER,
            ),
        ),
    ),
)

LM_HEAD = Param(
    "lm_head.weight",
    lambda d: (d.head_rows, d.hidden) if d.head_rows else None,
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

D2T = Param(
    "draft_id_to_target_id",
    lambda d: (d.head_rows,) if d.head_rows else None,
    LLAMA,
    absent=(
        Case(
            lambda d: d.draft_vocab is not None and d.draft_vocab != d.vocab,
            Event(
                "warning",
                "d2t_missing",
                "{param}: no d2t, so it stays zeros and draft id i is taken for target id i, though draft_vocab_size "
                "{draft_vocab} != vocab_size {vocab}",
                LLAMA,
            ),
        ),
        Case(lambda d: True, Event("info", "skipped", "{param}: no d2t; not needed (one vocabulary)", LLAMA)),
    ),
)

FC = Param(
    "model.fc.weight", lambda d: (d.hidden, 3 * d.target_hidden), LLAMA, exists=lambda d: d.use_aux, absent=(UNCHECKED,)
)
FC_MLA = Param(
    "model.fc.weight",
    lambda d: (d.hidden, d.aux_count * d.target_hidden),
    DEEPSEEK,
    exists=lambda d: d.use_aux,
    absent=(UNCHECKED,),
)
NORM = Param("model.norm.weight", lambda d: (d.hidden,), LLAMA, absent=(UNCHECKED,))

#: The drafter's LlamaModel.load_weights looks names up without the outer "model." (AutoWeightsLoader strips it).
UNKNOWN = Event(
    "error",
    "unknown_name",
    "{name} becomes {candidate}, which vLLM's drafter has no parameter for: KeyError: '{inner}' in load_weights "
    "(params_dict[name])",
    LLAMA.inferring(),
)
SHAPE = Event(
    "error",
    "shape_mismatch",
    '{name} is {got} but vLLM\'s {param} is {want}: "Attempted to load weight ({got}) into parameter ({want})"',
    LOADER_UTILS,
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
)

RENAMES = (
    Rename(r"^d2t$", "draft_id_to_target_id", LLAMA),
    Rename(r"midlayer\.", "layers.0.", LLAMA),
    Rename(r"^(?!lm_head|draft_id_to_target_id)", "model.", LLAMA),
    *stacked(LLAMA),
)

#: qkv_proj: bias=attention_bias; o_proj: attention_bias or bias; LlamaMLP: bias=mlp_bias (LlamaDecoderLayer).
BIASES = Biases(
    qkv=lambda d: d.config.get("attention_bias") is True,
    o_proj=lambda d: d.config.get("attention_bias") is True or d.config.get("bias") is True,
    mlp=lambda d: d.config.get("mlp_bias") is True,
)

LLAMA_LOADER = Loader(
    architectures=("Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3", "Eagle3Speculator"),
    source=LLAMA,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}",),
    params=(EMBED, FC, *decoder_layer("model.layers.0.", LLAMA, UNCHECKED, biases=BIASES), NORM, LM_HEAD, D2T),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    nested_config=("transformer_layer_config",),  # the speculators adapter (SPECULATORS)
)

MLA_LOADER = Loader(
    architectures=("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"),
    source=DEEPSEEK,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}",),
    params=(EMBED, FC_MLA, *mla_layer("model.layers.0.", DEEPSEEK, UNCHECKED), NORM, LM_HEAD, D2T),
    unknown=UNKNOWN,
    shape_error=SHAPE,
    unchecked_prefixes=("model.layers.0.self_attn.",),
)

SPECULATIVE = Source(REPO, "002e77c", "vllm/config/speculative.py")

ENGINE = Engine(
    name="vllm",
    label="vLLM",
    version="main at 00bd149 (llama_eagle3), 0359019 (deepseek_eagle3), 00c4f22 (proposer)",
    # EAGLEConfig keeps a name that starts or ends with Eagle3 and prepends Eagle3 to any other
    architecture_mapping=((r"^(?!Eagle3)(?!.*Eagle3$)", "Eagle3"),),
    loaders=(LLAMA_LOADER, MLA_LOADER),
    unregistered=Event(
        "error",
        "architecture_not_registered",
        "architectures[0] is {arch}; vLLM's EAGLEConfig makes it {looked_up}, which vLLM does not register "
        "({registered}): ValueError: Model architectures ['{looked_up}'] are not supported for now.",
        REGISTRY,
    ),
    aux_ids=AuxIds(
        keys=("eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids"),
        offset=-1,
        convention="vLLM's: id j = the output of target layer j-1 (it captures before layer j)",
        default_outputs=lambda n: (1, n // 2 - 1, n - 4),
        default_event=Event(
            "warning",
            "aux_ids_default",
            'no eagle_aux_hidden_state_layer_ids{ignored}: vLLM logs "Eagle3 aux layers not set... Acceptance will '
            'be low" and captures [2, n//2, n-3] = the outputs of target layers {outputs} (vllm PR#50170)',
            AUX,
        ),
        source=AUX,
    ),
    # SpeculativeConfig._verify_args at SPECULATIVE has no target model_type whitelist; older releases refused
    # targets outside a list (vllm#22152, #31254): a rule for such a release sets target_model_types.
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
            lambda d: "speculators_model_type" in d.config and "norm_before_residual" not in d.config,
            Event(
                "warning",
                "config_default_differs",
                "no norm_before_residual: vLLM's speculators adapter defaults it to true, the speculators library "
                "(which trained this drafter) to false, so the hidden norm is applied at another point than in "
                "training",
                SPECULATORS_ALGOS,
            ),
        ),
    ),
    target_checks=(target_hidden_check(LLAMA.inferring(), "the fc matmul fails on the first forward"),),
)
