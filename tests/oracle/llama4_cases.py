"""EAGLE-3 drafters against a 48-layer Llama-4 target (Llama4ForConditionalGeneration over its Llama4ForCausalLM
text model, as Maverick and Scout are): both engines hand the capture to the text model, whose depth is
text_config's. Modelled on the published Maverick drafters: nvidia/Llama-4-Maverick-17B-128E-Eagle3 (SpecForge
names, trained on the outputs of layers [1, 23, 44], the ids its speculators conversion writes), lmsys's SpecForge
drafters (eagle_config's ids), scaled down to the oracle's sizes."""

from __future__ import annotations

from cases import AUX_KEY, Case, Target

NESTED = f"eagle_config.{AUX_KEY}"
MAVERICK = Target("llama4", 48)
FAMILY = "eagle3_llama4"

LLAMA4_CASES: list[Case] = [
    Case(
        "gen_llama4_specforge_ids",
        "SpecForge ids [1, 23, 44] in eagle_config on Llama-4 (SGLang reads them; vLLM's V2 runner its default)",
        config={NESTED: [1, 23, 44]},
        trained_outputs=(1, 23, 44),
        target=MAVERICK,
        family=FAMILY,
    ),
    Case(
        "gen_llama4_top_level_ids",
        "speculators-style top-level ids [1, 23, 44] on Llama-4 (vLLM reads them as indices: one layer early)",
        config={NESTED: None, AUX_KEY: [1, 23, 44]},
        trained_outputs=(1, 23, 44),
        target=MAVERICK,
        family=FAMILY,
    ),
    Case(
        "gen_llama4_no_ids",
        "no ids on Llama-4: each engine's default over text_config's 48 layers",
        config={NESTED: None},
        trained_outputs=None,
        target=MAVERICK,
        family=FAMILY,
    ),
    Case(
        "gen_llama4_out_of_range",
        "ids past Llama-4's 48 layers (eagle_config [1, 23, 47], top level [2, 24, 49]): never captured",
        config={NESTED: [1, 23, 47], AUX_KEY: [2, 24, 49]},
        trained_outputs=None,
        target=MAVERICK,
        family=FAMILY,
    ),
]
