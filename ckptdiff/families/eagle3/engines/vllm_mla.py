"""vLLM's EAGLE-3 drafter with DeepSeek-V2 MLA attention, as data (deepseek_eagle3.py: Eagle3DeepseekV2ForCausalLM,
served for DeepSeek-V3 and Kimi-K2/K2.5 targets)."""

from __future__ import annotations

from ...rules import Loader, Rename
from .llama_layer import decoder_layers, fc_block
from .quantized import vllm_ignores
from .vllm_common import (
    BIAS_IGNORED,
    D2T,
    DEEPSEEK,
    DROPS,
    EMBED,
    LM_HEAD,
    NESTED_IDS,
    NORM,
    RENAMES,
    SHAPE,
    UNCHECKED,
    UNKNOWN,
    fc_norm_read,
    later_layers_unread,
    layer,
)

MLA_RENAMES = (
    *RENAMES,
    Rename(r"\.q_a_proj\.", ".fused_qkv_a_proj.", DEEPSEEK, shard="0"),
    Rename(r"\.kv_a_proj_with_mqa\.", ".fused_qkv_a_proj.", DEEPSEEK, shard="1"),
)

MLA_LOADER = Loader(
    architectures=("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"),
    source=DEEPSEEK,
    renames=MLA_RENAMES,
    # load_weights skips t2d only: mask_hidden and input_norm are unknown names, fc is loaded with or without
    # use_aux_hidden_state (DeepseekV2Eagle3Model builds it whatever eagle_config says)
    drops=(DROPS[0], DROPS[4]),
    lookups=("{name}",),
    params=(
        EMBED,
        *fc_block("model.fc", DEEPSEEK, UNCHECKED, fc_norm="model.fc_norm", needs_aux=False, fc_norm_read=fc_norm_read),
        *decoder_layers(layer, DEEPSEEK, UNCHECKED, attention="mla", unread=later_layers_unread(DEEPSEEK)),
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
