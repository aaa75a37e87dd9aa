"""DrafterSpec: one drafter's description from its config.json, in each format published drafters use."""

from __future__ import annotations

import json

from ckptdiff.families.eagle3.shapes import shapes_of
from ckptdiff.families.eagle3.spec import DrafterSpec, Setting, drafter_spec
from fixtures.published_drafters import ROOT


def spec(name: str) -> DrafterSpec:
    return DrafterSpec.of(json.loads((ROOT / name / "config.json").read_text()))


def test_a_plain_config_without_aux_ids():
    s = spec("yuhuili-eagle3-llama3.1-8b")
    assert (s.layout, s.attention, s.layer_count, s.aux_ids) == ("plain", "llama", 1, ())
    assert (s.hidden_size, s.q_out(), s.kv_out(), s.head_rows, s.needs_d2t) == (16, 16, 8, 32, True)
    assert s.safetensors_dtype == "F16" and s.fc_aux_count(("eagle_config.eagle_aux_hidden_state_layer_ids",)) == 3


def test_nested_ids_keep_the_key_they_were_read_from():
    s = spec("specforge-kimi-k2")
    assert s.layout == "eagle_config"
    assert s.aux_ids == (Setting((2, 30, 58), "eagle_config.eagle_aux_hidden_state_layer_ids"),)
    # an engine reading the top level and eagle_config.layer_ids finds none of them
    assert s.aux_at(("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids")) is None
    assert str(s.aux_layer_ids) == "eagle_config.eagle_aux_hidden_state_layer_ids=[2, 30, 58]"


def test_a_speculators_config_reads_its_layer_settings_and_what_vllms_adapter_validates():
    s = spec("redhat-speculators-llama3.1-8b")
    assert s.layout == "speculators" and s.hidden is not None and s.hidden.key == "transformer_layer_config.hidden_size"
    assert s.speculators is not None and s.speculators.defect() is None
    assert s.norm_before_residual == Setting(True, "norm_before_residual")
    broken = dict(json.loads((ROOT / "redhat-speculators-llama3.1-8b" / "config.json").read_text()))
    broken["speculators_config"] = {"verifier": {"name_or_path": "x"}}
    defect = DrafterSpec.of(broken).speculators.defect()  # type: ignore[union-attr]
    assert defect is not None and "proposal_methods[0]" in defect


def test_mla_layers_and_quantization():
    mla = spec("mla-kimi-k25")
    assert mla.attention == "mla" and mla.mla is not None and mla.fc_norm
    assert shapes_of(mla)["midlayer.self_attn.kv_b_proj.weight"].shape == (2 * (8 + 8), 8)
    assert "midlayer.self_attn.q_proj.weight" not in shapes_of(mla)
    two = spec("multi-layer-qwen3-8b")
    assert shapes_of(two)["midlayer.self_attn.q_proj.weight"].shape == (16, 32)
    assert shapes_of(two)["layers.1.self_attn.q_proj.weight"].shape == (16, 16)
    nvfp4 = spec("modelopt-nvfp4-llama3.1-8b").quantization
    assert nvfp4 is not None and nvfp4.weight_format == "nvfp4"
    assert not nvfp4.covers("midlayer.self_attn.q_proj") and nvfp4.covers("midlayer.mlp.gate_proj")
    assert not nvfp4.covers("lm_head") and not nvfp4.covers("fc")
    fp8 = spec("fp8-qwen3-8b").quantization
    assert fp8 is not None and fp8.weight_format == "fp8" and fp8.key == "quantization_config"


def test_not_a_drafter():
    assert drafter_spec({"architectures": ["LlamaForCausalLM"]}) is None and drafter_spec(None) is None


def test_the_scales_each_quantization_stores():
    def scales(q: dict) -> tuple[str, ...]:
        found = DrafterSpec.of({"hidden_size": 8, "quantization_config": q}).quantization
        assert found is not None
        return found.scales

    assert scales({"quant_method": "fp8", "activation_scheme": "dynamic"}) == ("weight_scale",)
    assert scales({"quant_method": "fp8", "activation_scheme": "static"}) == ("weight_scale", "input_scale")
    assert scales({"quant_method": "modelopt", "quant_algo": "FP8"}) == ("weight_scale", "input_scale")
    assert scales({"quant_method": "modelopt", "quant_algo": "NVFP4"}) == (
        "weight_scale",
        "weight_scale_2",
        "input_scale",
    )
