"""SGLang's EAGLE-3 drafter with DeepSeek-V2 MLA attention, as data (kimi_k25_eagle3.py: Eagle3DeepseekV2ForCausalLM,
served for Kimi-K2.5 and DeepSeek-V3 targets)."""

from __future__ import annotations

from ...rules import Case, Drop, Event, Loader, Rename, Source
from .llama_layer import decoder_layers, fc_block
from .sglang_common import HOT_TOKENS, KIMI, LM_HEAD, NESTED_IDS, NORM, RANDOM, REPO, SHAPE, VERSION, embed_param

#: Eagle3DeepseekV2ForCausalLM's own set_embed: the target's embedding replaces the drafter's unless
#: target_hidden_size is set (not None) and differs from hidden_size.
KIMI_SET_EMBED = Source(
    REPO, VERSION, "python/sglang/srt/models/kimi_k25_eagle3.py:404 (Eagle3DeepseekV2ForCausalLM.set_embed)"
)
EMBED = embed_param(KIMI_SET_EMBED, KIMI_SET_EMBED)

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
        # no parameter answers to these: logged as skipped, but no trained weight is lost (parallel drafting's
        # mask, a rotary cache)
        Drop(
            r"(^|\.)(mask_hidden|rotary_emb\.inv_freq)$",
            Event("info", "dropped", "eagle3.sglang.dropped.not_trained", KIMI),
        ),
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
