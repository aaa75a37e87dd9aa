"""The other targets SGLang 0.5.23 builds an MTP drafter for, as data: each architecture (or model type) its
``ModelConfig._config_draft_model`` (python/sglang/srt/configs/model_config.py) rewrites into a NextN/MTP class whose
loader ckptdiff does not replay, with the line that rewrites it (the classes are registered in
python/sglang/srt/models/). A target served by one of them is said to be unmodelled, not guessed."""

from __future__ import annotations

from ...rules import Source
from .model import MtpClass, unmodelled

REPO, VERSION = "sgl-project/sglang", "v0.5.23"
MODEL_CONFIG = "python/sglang/srt/configs/model_config.py"

#: (class, _config_draft_model's line, model types, architectures[0]).
OVERRIDES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    # a Dots3Config text config: configure_draft_model() names the class (configs/dots3.py:187)
    ("Dots3NoteForCausalLMNextN", "1015-1018", ("dots3_note",), ()),
    # unless the checkpoint bundles a DSpark head and the algorithm is DSPARK (or unset)
    ("DeepseekV4ForCausalLMNextN", "1041-1061", (), ("DeepseekV4ForCausalLM",)),
    ("Glm5NextForConditionalGenerationNextN", "1071-1076", (), ("Glm5NextForConditionalGeneration",)),
    ("GlmOcrForConditionalGenerationNextN", "1080-1083", (), ("GlmOcrForConditionalGeneration",)),
    ("InklingForConditionalGenerationMTP", "1099-1103", (), ("InklingForConditionalGeneration",)),
    ("GigaChat35ForCausalLMNextN", "1110-1114", (), ("GigaChat35ForCausalLM",)),
    (
        "BailingMoeForCausalLMNextN",
        "1121-1127",
        (),
        ("BailingMoeV2ForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM"),
    ),
    ("Qwen4ExpForCausalLMMTP", "1137-1146", (), ("Qwen4ExpForConditionalGeneration",)),
    ("Qwen3MoeForCausalLMMTP", "1155-1157", (), ("Qwen3MoeForCausalLM",)),
    ("ExaoneMoEForCausalLMMTP", "1183-1188", (), ("ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM")),
    (
        "NemotronHForCausalLMMTP",
        "1190-1203",
        (),
        ("NemotronH_Omni_Reasoning_V3", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"),
    ),
    ("HYV3ForCausalLMNextN", "1205-1206", (), ("HYV3ForCausalLM",)),
    ("HYV4ForCausalLMNextN", "1209-1210", (), ("HYV4ForCausalLM",)),
    # no rewrite names it: a standalone export naming it (MtpEngine.by_own_name)
    ("IQuestQ1MTP", "94", (), ()),
)


def override_classes() -> tuple[MtpClass, ...]:
    """Each of :data:`OVERRIDES` as a class SGLang builds and ckptdiff does not replay, citing its lines."""
    return tuple(
        unmodelled(
            "sglang",
            name,
            Source(REPO, VERSION, f"{MODEL_CONFIG}:{lines} (_config_draft_model: {name})"),
            model_types=types,
            architectures=architectures,
            layout="other",
        )
        for name, lines, types, architectures in OVERRIDES
    )
