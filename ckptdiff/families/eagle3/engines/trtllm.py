"""TensorRT-LLM's (PyTorch backend) EAGLE-3 drafter loading, as data (modeling_speculative.py, modeling_auto.py)."""

from __future__ import annotations

from ...rules import AuxIds, Case, Drop, Engine, Event, Loader, Param, Rename, Source, target_hidden_check
from .llama_layer import decoder_layers, fc_block
from .stacking import stacked

REPO = "NVIDIA/TensorRT-LLM"
MODEL = Source(REPO, "b35ac1b", "tensorrt_llm/_torch/models/modeling_speculative.py")
AUTO = Source(REPO, "b35ac1b", "tensorrt_llm/_torch/models/modeling_auto.py")
SPEC = Source(REPO, "b35ac1b", "tensorrt_llm/_torch/speculative/eagle3.py")

#: Loading is module-driven: each module asks for its weights by name, so a missing one raises.
MISSING = Case(
    lambda d: True,
    Event(
        "error",
        "missing_weight",
        "eagle3.trtllm.missing_weight",
        MODEL.inferring(),
    ),
)

EMBED = Param(
    "model.embed_tokens.weight",
    lambda d: d.shape("embed_tokens.weight"),
    MODEL,
    exists=lambda d: d.target_hidden != d.hidden,
    absent=(MISSING,),
)
TARGET_EMBED = Param(
    "model.embed_tokens.weight (the target's)",
    lambda d: None,
    MODEL,
    exists=lambda d: d.target_hidden == d.hidden,
    absent=(
        Case(
            lambda d: True,
            Event(
                "info",
                "from_target",
                "eagle3.trtllm.from_target.embedding",
                MODEL,
            ),
        ),
    ),
)
LM_HEAD = Param(
    "lm_head.weight",
    lambda d: d.shape("lm_head.weight"),
    MODEL,
    absent=(
        Case(
            lambda d: d.draft_vocab is not None and d.draft_vocab != d.vocab,
            Event(
                "warning",
                "lm_head_from_target",
                "eagle3.trtllm.lm_head_from_target",
                MODEL.inferring(),
            ),
        ),
        Case(
            lambda d: True,
            Event(
                "info",
                "from_target",
                "eagle3.trtllm.from_target.lm_head",
                MODEL,
            ),
        ),
    ),
)
D2T = Param(
    "model.d2t",
    lambda d: d.shape("d2t"),
    MODEL,
    exists=lambda d: d.draft_vocab is not None and d.draft_vocab != d.vocab,
    absent=(MISSING,),
    dtypes=("I64", "I32"),
    dtype_event=Event(
        "warning",
        "d2t_dtype",
        "eagle3.trtllm.d2t_dtype",
        MODEL.inferring(),
    ),
)
#: fc (and, under bias: true, its bias) sized by the serving setting's capture count (three by default).
FC = fc_block("model.fc", MODEL.inferring(), MISSING, bias=lambda d: d.spec.bias)
NORM = Param("model.norm.weight", lambda d: d.shape("norm.weight"), MODEL, absent=(MISSING,))
#: One layer is model.midlayer; with num_hidden_layers > 1 the layers are model.midlayer.{i} (inferred).
LAYERS = (
    *decoder_layers(lambda i: "model.midlayer.", MODEL, MISSING, layers=1, when=lambda d: d.layers == 1),
    *decoder_layers(lambda i: f"model.midlayer.{i}.", MODEL.inferring(), MISSING, when=lambda d: d.layers > 1),
)


LLAMA_LOADER = Loader(
    architectures=("EAGLE3LlamaForCausalLM",),
    source=MODEL,
    renames=(Rename(r"^(?!lm_head)", "model.", MODEL), *stacked(MODEL.inferring())),
    drops=(
        Drop(
            r"embed_tokens\.",
            Event(
                "info",
                "embed_tokens_overridden",
                "eagle3.trtllm.embed_tokens_overridden",
                MODEL,
            ),
            when=lambda d: d.target_hidden == d.hidden,
        ),
        Drop(r"t2d", Event("info", "dropped", "eagle3.trtllm.dropped", MODEL.inferring())),
    ),
    lookups=("{name}",),
    params=(EMBED, TARGET_EMBED, *FC, *LAYERS, NORM, LM_HEAD, D2T),
    unknown=Event(
        "warning",
        "ignored_name",
        "eagle3.trtllm.ignored_name",
        MODEL.inferring(),
    ),
    shape_error=Event("error", "shape_mismatch", "eagle3.trtllm.shape_mismatch", MODEL.inferring()),
)

ENGINE = Engine(
    name="trtllm",
    label="TensorRT-LLM",
    version="main at b35ac1b (PyTorch backend)",
    # modeling_auto: an EAGLE-3 drafter's class is "EAGLE3" + architectures[0] without "Eagle3"
    architecture_mapping=((r"Eagle3", ""), (r"^", "EAGLE3")),
    loaders=(LLAMA_LOADER,),
    unregistered=Event(
        "error",
        "architecture_not_registered",
        "eagle3.trtllm.architecture_not_registered",
        AUTO,
    ),
    aux_ids=AuxIds(
        keys=(),
        offset=0,
        default_outputs=lambda n: (1, n // 2 - 1, n - 4),
        default_event=Event(
            "info",
            "aux_ids_serving_setting",
            "eagle3.trtllm.aux_ids_serving_setting",
            SPEC,
        ),
        source=SPEC,
        from_serving_config=True,
    ),
    config_checks=(
        Case(
            lambda d: d.draft_vocab is None,
            Event(
                "error",
                "not_eagle3",
                "eagle3.trtllm.not_eagle3",
                AUTO,
            ),
        ),
    ),
    target_checks=(target_hidden_check(MODEL.inferring(), "eagle3.trtllm.target_hidden_mismatch"),),
)
