"""Which MTP class each engine builds for a target, where ckptdiff names it without replaying its loader: DeepSeek
sparse attention's (DSA) layers, vLLM's DeepSeek-V3.2 class, its Transformers-backend and Parse 3.5 classes, and
SGLang's other NextN/MTP classes (tests/oracle/test_registry_facts.py holds them against the engines' registries)."""

from __future__ import annotations

import pytest
from test_mtp import deepseek_config, events, run, target


def test_an_mtp_layer_with_dsas_indexer_is_not_replayed_as_a_plain_deepseek_layer(tmp_path) -> None:
    """index_topk (DeepSeek sparse attention): both engines build the lightning indexer in the MTP layer, which the
    DeepSeek rules do not replay; its tensors are not unknown names (vLLM) nor skipped (SGLang)."""
    config = deepseek_config(index_topk=4)
    report = run(target(tmp_path / "dsa", config=config), "vllm", "sglang")
    assert events(report, "vllm") == events(report, "sglang") == {"mtp_not_modelled": "error"}
    sources = {r.engine: r.events[0].source for r in report.engines}
    assert "deepseek_mtp.py:91" in sources["vllm"] and "model_config.py:191" in sources["sglang"]


def test_a_deepseek_v3_2_target_is_vllms_v32_class_not_deepseek_mtp(tmp_path) -> None:
    config = deepseek_config(architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32", index_topk=4)
    (result,) = run(target(tmp_path / "v32", config=config), "vllm").engines
    assert [(e.code, e.params["cls"]) for e in result.events] == [("mtp_not_modelled", "DeepseekV32MTPModel")]
    assert "deepseek_v32/nvidia/mtp.py" in result.events[0].source


@pytest.mark.parametrize(
    ("config", "cls"),
    [
        ({"architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan_v1_moe", "num_mtp_layers": 1},
         "TransformersMoEForMTP"),
        ({"architectures": ["Olmo3ForCausalLM"], "model_type": "olmo3", "num_mtp_layers": 1}, "TransformersForMTP"),
        ({"architectures": ["RadioMBartPrefixForCausalLM"], "model_type": "nemotron_parse",
          "num_nextn_predict_layers": 1, "decoder": {"causal_vision_prefix": True}}, "ParseAuxMTPModel"),
    ],
)  # fmt: skip
def test_vllms_transformers_backend_and_parse_mtp_classes_are_named_not_modelled(tmp_path, config, cls) -> None:
    (result,) = run(target(tmp_path / "t", config=deepseek_config(**config)), "vllm").engines
    assert [(e.code, e.params["cls"]) for e in result.events] == [("mtp_not_modelled", cls)]


@pytest.mark.parametrize(
    ("architecture", "model_type", "sglang"),
    [
        ("NemotronHForCausalLM", "nemotron_h", "NemotronHForCausalLMMTP"),
        ("Qwen3MoeForCausalLM", "qwen3_moe", "Qwen3MoeForCausalLMMTP"),
        ("BailingMoeV2ForCausalLM", "bailing_moe", "BailingMoeForCausalLMNextN"),
        ("IQuestQ1MTP", "iquest", "IQuestQ1MTP"),  # a standalone export naming its class
    ],
)
def test_sglangs_other_mtp_classes_are_named_not_modelled(tmp_path, architecture, model_type, sglang) -> None:
    config = deepseek_config(architectures=[architecture], model_type=model_type)
    (result,) = run(target(tmp_path / "t", config=config), "sglang").engines
    assert [(e.code, e.params["cls"]) for e in result.events] == [("mtp_not_modelled", sglang)]
    assert "model_config.py" in result.events[0].source


def test_without_num_mtp_layers_a_transformers_backend_target_has_no_vllm_mtp_class(tmp_path) -> None:
    config = deepseek_config(architectures=["Olmo3ForCausalLM"], model_type="olmo3")
    (result,) = run(target(tmp_path / "t", config=config), "vllm").engines
    assert [e.code for e in result.events] == ["mtp_not_supported"]
