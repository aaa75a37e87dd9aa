"""The other targets vLLM 0.33.0 builds an MTP drafter for, as data: each model type or architecture its
``SpeculativeConfig.hf_config_override`` (vllm/config/speculative.py) rewrites into an MTP class whose loader
ckptdiff does not replay, with the lines that rewrite it (the classes' names are the registry's,
model_executor/models/registry.py:650-745). A target served by one of them is said to be unmodelled, not guessed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...rules import Source
from .model import MtpClass, unmodelled

REPO, VERSION = "vllm-project/vllm", "v0.33.0"
SPECULATIVE = "vllm/config/speculative.py"

#: (class, hf_config_override's lines, model types, architectures[0], pieces of a model type). A ``*_mtp`` type here
#: is one hf_config_override rewrites (a standalone export's, speculative.py:38 MTPModelTypes); an export of a type it
#: leaves (gemma4_mtp, hy_v3_mtp...) keeps its own architectures[0], the class it names (``MtpEngine.by_own_name``).
OVERRIDES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("Dots3NoteMTPModel", "734-748", ("dots3_note",), (), ()),
    # DeepSeek-V4 only: V4.1 keeps its architecture, and method "mtp" on a V4.1 target raises (speculative.py:1474)
    ("DeepSeekV4MTPModel", "765-776", ("deepseek_v4",), (), ()),
    ("OpenPanguMTPModel", "777-783", ("pangu_ultra_moe", "pangu_ultra_moe_mtp"), (), ()),
    ("KimiK3MTPModel", "785-793", ("kimi_k3",), (), ()),
    ("MiMoV2OmniMTPModel", "806-829", (), ("MiMoV2OmniForCausalLM",), ()),
    ("GlmOcrMTPModel", "869-878", (), ("GlmOcrForConditionalGeneration",), ()),
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
        ("step5", "step5_vl"),
        ("Step5ForCausalLM", "Step5ForConditionalGeneration"),
        (),
    ),
    ("EagleMistralLarge3ForCausalLM", "1070-1071", (), ("MistralLarge3ForCausalLM",), ()),
    ("HYV3MTPModel", "1073-1078", ("hy_v3",), (), ()),
    ("HYV4MTPModel", "1080-1085", ("hy_v4",), (), ()),
    ("InklingMTPModel", "1087-1104", ("inkling_mm_model", "inkling_model"), (), ()),
    ("Gemma4MTPModel", "1106-1115", ("gemma4_assistant", "gemma4_unified_assistant"), (), ()),
    (
        "MiniMaxM3MTP",
        "1117-1145",
        ("minimax_m3_vl", "minimax_m3_mtp"),
        ("MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3MTP"),
        (),
    ),
    ("Glm5NextMTPModel", "1146-1157", ("glm5_next",), (), ()),
)


#: Targets the Transformers modeling backend serves (model_executor/models/registry.py:750-770,
#: _TRANSFORMERS_SUPPORTED_MODELS' text models, by their backend class): with ``num_mtp_layers`` in the text config,
#: method "mtp" builds ``Transformers{MoE}ForMTP`` from the target's own config before any other rewrite
#: (speculative.py:1379-1398); a multimodal one raises NotImplementedError. The backend's own names are served too.
TRANSFORMERS_DENSE = (
    "ArceeForCausalLM",
    "CwmForCausalLM",
    "GlmForCausalLM",
    "GPTBigCodeForCausalLM",
    "GPTNeoXForCausalLM",
    "HunYuanDenseV1ForCausalLM",
    "Jais2ForCausalLM",
    "NanbeigeForCausalLM",
    "OlmoForCausalLM",
    "Olmo2ForCausalLM",
    "Olmo3ForCausalLM",
    "PhiForCausalLM",
    "SeedOssForCausalLM",
    "SmolLM3ForCausalLM",
    "Starcoder2ForCausalLM",
    "VaultGemmaForCausalLM",
    "TransformersForCausalLM",
)
TRANSFORMERS_MOE = (
    "FlexOlmoForCausalLM",
    "HunYuanMoEV1ForCausalLM",
    "Kolibri1ForCausalLM",
    "MellumForCausalLM",
    "TransformersMoEForCausalLM",
)
TRANSFORMERS_MTP = Source(
    REPO, VERSION, f"{SPECULATIVE}:1379-1398 (Transformers*ForMTP), vllm/model_executor/models/transformers/__init__.py"
)
#: Nemotron Parse 3.5 (RadioMBartPrefixForCausalLM with decoder.causal_vision_prefix): ParseAuxMTPModel, which reads
#: only decoder.embed_tokens and decoder.extra_heads.0 / extra_proj.0 (nemotron_parse3_5_mtp.py:72-81).
PARSE_AUX = Source(
    REPO,
    VERSION,
    f"{SPECULATIVE}:719-730 (ParseAuxMTPModel), vllm/model_executor/models/nemotron_parse3_5_mtp.py:72",
)


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def _causal_vision_prefix(config: Mapping[str, Any]) -> bool:
    decoder = config.get("decoder")
    return isinstance(decoder, Mapping) and bool(decoder.get("causal_vision_prefix"))


def _transformers_mtp(config: Mapping[str, Any]) -> bool:
    return _text(config).get("num_mtp_layers") is not None


def chosen_first() -> tuple[MtpClass, ...]:
    """The classes vLLM picks before (Transformers backend) or first in (Parse 3.5) hf_config_override's rewrites."""
    transformers = tuple(
        unmodelled("vllm", name, TRANSFORMERS_MTP, architectures=archs, layout="other", when=_transformers_mtp)
        for name, archs in (("TransformersForMTP", TRANSFORMERS_DENSE), ("TransformersMoEForMTP", TRANSFORMERS_MOE))
    )
    parse = unmodelled(
        "vllm",
        "ParseAuxMTPModel",
        PARSE_AUX,
        architectures=("RadioMBartPrefixForCausalLM",),
        layout="other",
        when=_causal_vision_prefix,
    )
    return (*transformers, parse)


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
