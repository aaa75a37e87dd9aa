"""What SGLang's EAGLE-3 drafter loaders share (llama_eagle3.py and kimi_k25_eagle3.py load the same way around
their layers): the pinned sources, the embedding the target's replaces, the head, d2t consumed into hot_token_id,
the final norm; ``sglang.py`` and ``sglang_mla.py`` build their loaders from these."""

from __future__ import annotations

from ...rules import Case, Event, Param, Source
from .settings import Draft

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


def embed_param(set_embed: Source, replaced_by: Source) -> Param:
    """The drafter's embedding, which the EAGLE-3 worker replaces by the target's through the drafter class's
    ``set_embed`` (``set_embed``: where that method is read; ``replaced_by``: where the replacement is said)."""
    width = Event("error", "embed_width_mismatch", "eagle3.sglang.embed_width_mismatch", set_embed.inferring())
    return Param(
        "model.embed_tokens.weight",
        lambda d: d.shape("embed_tokens.weight"),
        set_embed,
        absent=(
            Case(_too_narrow, width),
            Case(_replaced, Event("info", "from_target", "eagle3.sglang.from_target.embedding", replaced_by)),
            Case(
                lambda d: True,
                Event("warning", "random_init", "eagle3.sglang.random_init.own_embedding", set_embed),
            ),
        ),
        loaded=(
            Case(_too_narrow, width),
            Case(
                _replaced,
                Event("info", "embed_tokens_overridden", "eagle3.sglang.embed_tokens_overridden", set_embed),
            ),
        ),
    )


#: LlamaForCausalLMEagle3 (llama_eagle3.py) inherits LlamaForCausalLM's set_embed (llama.py).
EMBED = embed_param(TARGET_LLAMA, LLAMA)

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

SHAPE = Event(
    "error",
    "shape_mismatch",
    "eagle3.sglang.shape_mismatch",
    LOADER_UTILS,
)

NESTED_IDS = ("eagle_config.eagle_aux_hidden_state_layer_ids",)
