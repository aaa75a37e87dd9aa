"""The families registry: each family is one folder with its parts and one registry line, detection asks them
in order, engines without rules for a family say why, and the support table in the docs is the generated one."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path

import pytest

from ckptdiff.families import FAMILIES, detect_family
from ckptdiff.families.support import markdown, rewrite
from fixtures.generate import write_config, write_safetensors

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_every_family_is_one_folder_with_its_parts(family) -> None:
    for part in ("detect", "profile", "messages", "engine_messages"):
        import_module(f"ckptdiff.families.{family.name}.{part}")
    assert import_module(f"ckptdiff.families.{family.name}.profile").PROFILE.name == family.name
    if family.engines:
        engines = import_module(f"ckptdiff.families.{family.name}.engines")
        assert engines.ENGINE_NAMES == family.engines
        for name in family.engines:
            assert engines.get_engine(name).name == name and engines.support(name)
    assert not set(family.engines) & set(family.no_loader)


def test_the_support_table_in_the_docs_is_the_generated_one() -> None:
    page = (ROOT / "docs" / "families.md").read_text(encoding="utf-8")
    assert markdown() in page and rewrite(page) == page  # regenerate: python -m ckptdiff.families.support


def test_every_cell_of_the_support_table_cites_where_it_was_read_or_says_it_is_not_modelled() -> None:
    rows = markdown().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{family.name}`" for family in FAMILIES]
    for row in rows:
        for cell in row.strip(" |").split(" | ")[1:]:
            assert "@v" in cell or "@b35ac1b" in cell or cell.startswith("not modelled"), cell


@pytest.mark.parametrize(
    "config, family",
    [
        ({"architectures": ["DFlashDraftModel"], "dflash_config": {"target_layer_ids": [1, 9, 17]}}, "dflash"),
        ({"architectures": ["MedusaModel"], "medusa_num_heads": 5, "medusa_num_layers": 1}, "medusa"),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, "eagle3"),
        ({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, None),
    ],
)
def test_detection_decides_the_family_from_the_config(config, family) -> None:
    assert detect_family(config) == family


def test_medusa_is_detected_and_no_pinned_engine_loads_it(tmp_path, run_cli) -> None:
    folder = tmp_path / "medusa"
    write_config(folder, {"architectures": ["MedusaModel"], "medusa_num_heads": 2, "medusa_num_layers": 1})
    write_safetensors(
        folder / "model.safetensors", [(f"medusa_head.{i}.0.linear.weight", "BF16", [8, 8]) for i in range(2)]
    )

    done = run_cli(str(folder), "--engine", "all", "--format", "json")

    assert done.returncode == 1
    engines = json.loads(done.stdout)["engines"]
    assert [(e["engine"], e["outcome"]) for e in engines] == [("sglang", "fails"), ("vllm", "fails")]
    for entry in engines:
        (event,) = entry["events"]
        assert event["code"] == "family_not_loaded" and "registry.py" in event["source"]
        assert "has no loader for medusa drafters" in event["message"]
        assert "no speculative method it accepts" in event["message"]  # vLLM 0.33.0 dropped its Medusa method too


def test_dflash_is_detected_and_an_engine_without_its_rules_says_so(tmp_path, run_cli) -> None:
    folder = tmp_path / "dflash"
    write_config(folder, {"architectures": ["DFlashDraftModel"], "dflash_config": {"mask_token_id": 5}})
    write_safetensors(folder / "model.safetensors", [("layers.0.input_layernorm.weight", "BF16", [8])])

    done = run_cli(str(folder), "--engine", "trtllm", "--format", "json")

    assert done.returncode == 1
    (entry,) = json.loads(done.stdout)["engines"]
    assert entry["events"][0]["code"] == "family_not_modelled"
    assert json.loads(run_cli(str(folder), str(folder), "--format", "json").stdout)["profile"] == "dflash"
