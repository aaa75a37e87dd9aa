"""SGLang's EAGLE-3 drafter loading, as data (llama_eagle3.py, kimi_k25_eagle3.py, the EAGLE worker)."""

from __future__ import annotations

from .llama_layer import Biases, decoder_layer, mla_layer
from .rules import AuxIds, Case, Drop, Engine, Event, Loader, Param, Rename, Source, target_hidden_check
from .stacking import stacked

REPO = "sgl-project/sglang"
LLAMA = Source(REPO, "03d5a77", "python/sglang/srt/models/llama_eagle3.py")
KIMI = Source(REPO, "054a1ce", "python/sglang/srt/models/kimi_k25_eagle3.py")
DEEPSEEK = Source(REPO, "5da6cae", "python/sglang/srt/models/deepseek_eagle3.py")
RUNNER = Source(REPO, "03d5a77", "python/sglang/srt/model_executor/model_runner.py (set_eagle3_layers_to_capture)")
WORKER = Source(REPO, "03d5a77", "python/sglang/srt/speculative/eagle_worker.py (set_embed)")
LOADER_UTILS = Source(REPO, "03d5a77", "python/sglang/srt/model_loader/weight_utils.py (default_weight_loader)")

RANDOM = Case(
    lambda d: True,
    Event(
        "warning",
        "random_init",
        "{param} is never loaded: SGLang does not report missing weights, so it stays randomly initialised",
        LLAMA,
    ),
)

EMBED = Param(
    "model.embed_tokens.weight",
    lambda d: (d.vocab, d.hidden) if d.vocab else None,
    WORKER,
    absent=(
        Case(
            lambda d: True,
            Event("info", "from_target", "{param}: the EAGLE-3 worker sets the target's embedding (set_embed)", WORKER),
        ),
    ),
    loaded=(
        Case(
            lambda d: True,
            Event(
                "info",
                "embed_tokens_overridden",
                "{name} is loaded, then replaced by the target's embedding (set_embed): harmless "
                "when it is a frozen copy "
                "of the target's, as EAGLE-3 training keeps it (--values --base checks)",
                WORKER,
            ),
        ),
    ),
)

LM_HEAD = Param(
    "lm_head.weight",
    lambda d: (d.head_rows, d.hidden) if d.head_rows else None,
    LLAMA,
    exists=lambda d: not d.tied,
    absent=(
        Case(
            lambda d: d.draft_vocab is None,
            Event(
                "info",
                "from_target",
                "{param}: no draft_vocab_size, so SGLang loads the target's lm_head (load_lm_head_from_target)",
                LLAMA,
            ),
        ),
        Case(
            lambda d: True,
            Event(
                "warning",
                "lm_head_random",
                "{param} is missing but draft_vocab_size is set: SGLang builds its own [draft_vocab_size, hidden] head "
                "and never fills it, so it stays RANDOM, silently (accept length 1.00, sglang PR#27908)",
                LLAMA,
            ),
        ),
    ),
)

HOT_TOKENS = Param(
    "hot_token_id",
    lambda d: (d.draft_vocab,) if d.draft_vocab else None,
    LLAMA,
    exists=lambda d: d.draft_vocab is not None and d.draft_vocab != d.vocab,
    absent=(
        Case(
            lambda d: True,
            Event(
                "warning",
                "d2t_missing",
                "no d2t: hot_token_id stays None, so draft token ids are not mapped to target ids",
                LLAMA.inferring(),
            ),
        ),
    ),
)

FC = Param("model.fc.weight", lambda d: (d.hidden, 3 * d.target_hidden), LLAMA, absent=(RANDOM,))
FC_MLA = Param("model.fc.weight", lambda d: (d.hidden, d.aux_count * d.target_hidden), KIMI, absent=(RANDOM,))
NORM = Param("model.norm.weight", lambda d: (d.hidden,), LLAMA, absent=(RANDOM,))

UNKNOWN = Event(
    "warning",
    "skipped_unknown_name",
    "SGLang has no parameter {name} or model.{name}: skipped without a word, the weight is not used",
    LLAMA,
)
SHAPE = Event(
    "error",
    "shape_mismatch",
    "{name} is {got} but SGLang's {param} is {want}: AssertionError \"Attempted to load weight ({got}) into "
    'parameter ({want})"',
    LOADER_UTILS,
)
ONE_LAYER = Case(
    lambda d: d.layers != 1,
    Event(
        "error",
        "layers_unsupported",
        'num_hidden_layers={layers}: ValueError "EAGLE3 currently only supports 1 layer"',
        KIMI,
    ),
)

DROPS = (Drop(r"t2d", Event("info", "dropped", "{name} is not used by SGLang (skipped by load_weights)", LLAMA)),)
RENAMES = (Rename(r"^d2t$", "hot_token_id", LLAMA), *stacked(LLAMA))

#: llama_eagle3 overrides qkv_proj with bias=False; o_proj keeps LlamaAttention's bias=attention_bias.
BIASES = Biases(o_proj=lambda d: d.config.get("attention_bias") is True)
#: fc is Linear(..., bias=getattr(config, "bias", False)).
FC_BIAS = Param(
    "model.fc.bias", lambda d: (d.hidden,), LLAMA, exists=lambda d: d.config.get("bias") is True, absent=(RANDOM,)
)

LLAMA_LOADER = Loader(
    architectures=("LlamaForCausalLMEagle3",),
    source=LLAMA,
    renames=RENAMES,
    drops=DROPS,
    lookups=("{name}", "model.{name}"),
    params=(
        EMBED,
        FC,
        FC_BIAS,
        *decoder_layer("model.midlayer.", LLAMA, RANDOM, biases=BIASES),
        NORM,
        LM_HEAD,
        HOT_TOKENS,
    ),
    unknown=UNKNOWN,
    shape_error=SHAPE,
)

MLA_LOADER = Loader(
    architectures=("Eagle3DeepseekV2ForCausalLM",),
    source=KIMI,
    renames=(Rename(r"^layers\.0\.", "midlayer.", KIMI), *RENAMES),
    drops=DROPS,
    lookups=("{name}", "model.{name}"),
    params=(EMBED, FC_MLA, *mla_layer("model.midlayer.", KIMI, RANDOM), NORM, LM_HEAD, HOT_TOKENS),
    unknown=Event(
        "warning", "skipped_unknown_name", '{name}: logged "Eagle3 MLA: skipping unexpected weight" and not used', KIMI
    ),
    shape_error=SHAPE,
    checks=(ONE_LAYER,),
    unchecked_prefixes=("model.midlayer.self_attn.",),
)

DEEPSEEK_LOADER = Loader(
    # deepseek_eagle3.py registers V2 too; at 054a1ce kimi_k25_eagle3.py serves that name (MLA_LOADER)
    architectures=("Eagle3DeepseekV3ForCausalLM",),
    source=DEEPSEEK,
    renames=(Rename(r"^layers\.0\.", "midlayer.", DEEPSEEK), *RENAMES),
    drops=(
        *DROPS,
        Drop(r"rotary_emb\.inv_freq", Event("info", "dropped", "{name} is skipped by load_weights", DEEPSEEK)),
    ),
    lookups=("{name}", "model.{name}"),
    params=(EMBED, FC_MLA, *mla_layer("model.midlayer.", DEEPSEEK, RANDOM), NORM, LM_HEAD, HOT_TOKENS),
    unknown=Event(
        "warning",
        "skipped_unknown_name",
        "SGLang has no parameter {name} or model.{name}: skipped without a word",
        DEEPSEEK,
    ),
    shape_error=SHAPE,
    checks=(
        Case(
            lambda d: d.layers != 1,
            Event(
                "error",
                "layers_unsupported",
                'num_hidden_layers={layers}: ValueError "Eagle3 currently only supports 1 decoder layer"',
                DEEPSEEK,
            ),
        ),
    ),
    unchecked_prefixes=("model.midlayer.self_attn.",),
)

ENGINE = Engine(
    name="sglang",
    label="SGLang",
    version="main at 03d5a77 (llama_eagle3), 054a1ce (kimi_k25_eagle3), 5da6cae (deepseek_eagle3)",
    architecture_mapping=(),
    loaders=(LLAMA_LOADER, MLA_LOADER, DEEPSEEK_LOADER),
    unregistered=Event(
        "error",
        "architecture_not_eagle3",
        "architectures[0] is {arch}, not an EAGLE-3 class SGLang registers ({registered}): a class SGLang knows "
        "as a target model loads it and fails with KeyError: 'midlayer.self_attn.qkv_proj.weight' (AngelSlim#39); "
        "any other name is refused",
        LLAMA,
    ),
    aux_ids=AuxIds(
        keys=("eagle_config.eagle_aux_hidden_state_layer_ids",),
        offset=0,
        convention="SGLang's: id k = the output of target layer k (it captures before layer k+1)",
        default_outputs=lambda n: (1, n // 2 - 1, n - 4),
        default_event=Event(
            "warning",
            "aux_ids_default",
            "SGLang reads aux layer ids only from eagle_config.eagle_aux_hidden_state_layer_ids{ignored}; it uses "
            "its default capture [2, n//2, n-3] = the outputs of target layers {outputs}",
            RUNNER,
        ),
        source=RUNNER,
    ),
    config_checks=(
        Case(
            lambda d: d.config.get("norm_before_residual") is True,
            Event(
                "warning",
                "config_ignored",
                "norm_before_residual=true: SGLang's llama_eagle3 does not read it and normalises after taking the "
                "residual, not before as trained",
                LLAMA,
            ),
        ),
    ),
    target_checks=(target_hidden_check(LLAMA.inferring(), "the fc matmul fails on the first forward"),),
)
