"""config.json differences that never lie: key paths, typed values, null vs absent, standard JSON for NaN/Infinity."""

from __future__ import annotations

import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ckptdiff.comparison import diff_configs, flatten_config, same_config_value
from fixtures.generate import HERE as FIXTURES


def diffs(a: dict, b: dict) -> list[tuple[str, object, object, str]]:
    return [(d.key, d.a, d.b, d.status) for d in diff_configs(a, b)]


def test_a_dotted_key_is_not_a_nested_one():
    assert flatten_config({"a.b": 1}) == {("a.b",): 1}
    assert flatten_config({"a": {"b": 1}}) == {("a", "b"): 1}
    assert diffs({"a.b": 1}, {"a": {"b": 1}}) == [("a.b", None, 1, "only_in_b"), ('"a.b"', 1, None, "only_in_a")]
    (diff,) = diff_configs({"a": {"b": 1}}, {"a": {"b": 2}})
    assert diff.path == ("a", "b") and diff.key == "a.b"


@pytest.mark.parametrize(
    "a, b, same",
    [
        (1, 1.0, True),
        (True, 1, False),
        (False, 0, False),
        ([True, 2], [1, 2], False),
        ([1, 2], [1.0, 2], True),
        (None, None, True),
        ("1", 1, False),
        ({"x": True}, {"x": 1}, False),
        (math.nan, math.nan, True),
        (math.inf, math.inf, True),
        (math.inf, -math.inf, False),
        ([], {}, False),
    ],
)
def test_values_compare_with_their_json_types(a, b, same):
    assert same_config_value(a, b) is same
    assert bool(diffs({"k": a}, {"k": b})) is not same


def test_null_and_absent_are_different_differences():
    assert diffs({"rope_scaling": None}, {}) == [("rope_scaling", None, None, "only_in_a")]
    assert diffs({"pad_token_id": None}, {"pad_token_id": 0}) == [("pad_token_id", None, 0, "differs")]
    # a null leaf and a nested object are different paths: nothing is silently equal
    assert diffs({"rope_scaling": None}, {"rope_scaling": {"factor": 8}}) == [
        ("rope_scaling", None, None, "only_in_a"),
        ("rope_scaling.factor", None, 8, "only_in_b"),
    ]


def drafter_with_config(folder: Path, **changes: object) -> Path:
    """The bundled published drafter with config.json edited (values json can read but not strictly write)."""
    folder.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "kimi-k2-eagle3-published" / "model.safetensors", folder / "model.safetensors")
    config = json.loads((FIXTURES / "kimi-k2-eagle3-published" / "config.json").read_text())
    config.update(changes)
    for key, value in list(config.items()):
        if value == "<absent>":
            del config[key]
    (folder / "config.json").write_text(json.dumps(config))  # allow_nan: writes NaN / Infinity
    return folder


@pytest.fixture
def edge_pair(tmp_path) -> tuple[Path, Path]:
    a = drafter_with_config(
        tmp_path / "a", rope_theta=math.nan, logit_scale=math.inf, pad_token_id=None, bias=True, extra=[True, 2]
    )
    b = drafter_with_config(
        tmp_path / "b", rope_theta=50000.0, logit_scale=-math.inf, pad_token_id="<absent>", bias=1, extra=[1, 2]
    )
    return a, b


def strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"not standard JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_the_json_report_is_standard_json_with_non_finite_numbers_as_strings(edge_pair, run_cli):
    a, b = edge_pair

    result = run_cli(str(a), str(b), "--format", "json")

    config = {d["key"]: d for d in strict(result.stdout)["config"]}
    assert config["rope_theta"]["a"] == "NaN" and config["rope_theta"]["b"] == 50000.0
    assert (config["logit_scale"]["a"], config["logit_scale"]["b"]) == ("Infinity", "-Infinity")
    assert config["pad_token_id"] == {
        "key": "pad_token_id",
        "path": ["pad_token_id"],
        "a": None,
        "b": None,
        "status": "only_in_a",
    }
    assert config["bias"]["status"] == "differs" and config["extra"]["status"] == "differs"


def test_null_and_absent_read_differently_in_every_human_format(edge_pair, run_cli):
    a, b = edge_pair

    table = run_cli(str(a), str(b)).stdout
    markdown = run_cli(str(a), str(b), "--format", "markdown").stdout
    junit = run_cli(str(a), str(b), "--format", "junit").stdout

    assert [line.split() for line in table.splitlines() if line.startswith("pad_token_id")] == [
        ["pad_token_id", "null", "(absent)", "only_in_a"]
    ]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in markdown.splitlines()]
    assert ["`pad_token_id`", "`null`", "`(absent)`", "only_in_a"] in cells
    assert ["`bias`", "`true`", "`1`", "differs"] in cells
    (config,) = [case for case in ET.fromstring(junit).iter("testcase") if case.get("classname") == "config"]
    assert "pad_token_id: null vs (absent) (only_in_a)" in config.find("system-out").text
    assert "rope_theta: NaN vs 50000.0 (differs)" in config.find("system-out").text
