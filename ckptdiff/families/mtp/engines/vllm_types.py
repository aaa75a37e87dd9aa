"""The other targets vLLM 0.33.0 builds an MTP drafter for, as data: each model type or architecture its
``SpeculativeConfig.hf_config_override`` (vllm/config/speculative.py) rewrites into an MTP class whose loader
ckptdiff does not replay, with the lines that rewrite it (the classes' names are the registry's,
model_executor/models/registry.py:650-745). A target served by one of them is said to be unmodelled, not guessed."""

from __future__ import annotations

from ...rules import Source
from .model import MtpClass, unmodelled

REPO, VERSION = "vllm-project/vllm", "v0.33.0"
SPECULATIVE = "vllm/config/speculative.py"

#: (class, hf_config_override's lines, model types, architectures[0], pieces of a model type). The ``*_mtp`` type of
#: each is the standalone export's (speculative.py:38 MTPModelTypes, the types served with method "mtp").
OVERRIDES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("Dots3NoteMTPModel", "734-748", ("dots3_note", "dots3_note_mtp"), (), ()),
    # DeepSeek-V4 only: V4.1 keeps its architecture, and method "mtp" on a V4.1 target raises (speculative.py:1474)
    ("DeepSeekV4MTPModel", "765-776", ("deepseek_v4",), (), ()),
    ("OpenPanguMTPModel", "777-783", ("pangu_ultra_moe", "pangu_ultra_moe_mtp"), (), ()),
    ("KimiK3MTPModel", "785-793", ("kimi_k3", "kimi_k3_mtp"), (), ()),
    ("MiMoV2OmniMTPModel", "806-829", (), ("MiMoV2OmniForCausalLM",), ()),
    ("GlmOcrMTPModel", "869-878", ("glm_ocr_mtp",), ("GlmOcrForConditionalGeneration",), ()),
    # a nemotron_h config announcing MTP layers (the family sees no other); the Omni wrappers' text_config promoted
    (
        "NemotronHMTPModel",
        "888-906",
        ("nemotron_h", "nemotron_h_puzzle", "nemotron_h_mtp"),
        ("NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3"),
        (),
    ),
    ("Qwen4ExpMTP", "915-935", ("qwen4_exp", "qwen4_exp_text", "qwen4_exp_mtp"), (), ()),
    (
        "BailingMoeV3MTPModel",
        "938-971",
        ("bailing_hybrid_v3_mtp",),
        ("BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration"),
        (),
    ),
    ("BailingMoeV25MTPModel", "950-963", ("bailing_hybrid", "bailing_hybrid_mtp"), ("BailingMoeV2_5ForCausalLM",), ()),
    ("ExaoneMoeMTP", "973-979", ("exaone_moe", "exaone_moe_mtp"), (), ()),
    # any model type holding "exaone4_5"
    ("Exaone4_5_MTP", "980-986", (), (), ("exaone4_5",)),
    # intern_s2_preview: Qwen3.5's drafter (MoE when its text_config is qwen3_5_moe_text; the dense one named here)
    ("Qwen3_5MTP", "1008-1031", ("intern_s2_preview",), (), ()),
    ("InternS2MobiusMTP", "1008-1031", ("interns2_mobius",), (), ()),
    (
        "Step5MTP",
        "1055-1068",
        ("step5", "step5_vl", "step5_mtp"),
        ("Step5ForCausalLM", "Step5ForConditionalGeneration"),
        (),
    ),
    ("EagleMistralLarge3ForCausalLM", "1070-1071", (), ("MistralLarge3ForCausalLM",), ()),
    ("HYV3MTPModel", "1073-1078", ("hy_v3", "hy_v3_mtp"), (), ()),
    ("HYV4MTPModel", "1080-1085", ("hy_v4", "hy_v4_mtp"), (), ()),
    ("InklingMTPModel", "1087-1104", ("inkling_mm_model", "inkling_model", "inkling_mtp"), (), ()),
    ("Gemma4MTPModel", "1106-1115", ("gemma4_assistant", "gemma4_unified_assistant", "gemma4_mtp"), (), ()),
    (
        "MiniMaxM3MTP",
        "1117-1145",
        ("minimax_m3_vl", "minimax_m3_mtp"),
        ("MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3MTP"),
        (),
    ),
    ("Glm5NextMTPModel", "1146-1157", ("glm5_next", "glm5_next_mtp"), (), ()),
)


def override_classes() -> tuple[MtpClass, ...]:
    """Each of :data:`OVERRIDES` as a class vLLM builds and ckptdiff does not replay, citing its lines."""
    return tuple(
        unmodelled(
            "vllm",
            name,
            Source(REPO, VERSION, f"{SPECULATIVE}:{lines} (hf_config_override: {name})"),
            model_types=types,
            architectures=architectures,
            layout="other",
            model_type_pieces=pieces,
        )
        for name, lines, types, architectures, pieces in OVERRIDES
    )
