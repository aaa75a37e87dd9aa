"""The JSON report lists one tensor row a line, and is exactly ``Report.to_dict()`` whatever the rows contain."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ckptdiff import compare
from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints
from ckptdiff.policy import Policy

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def checkpoint(names: list[str]) -> Checkpoint:
    return Checkpoint("x", "local", "x", None, {n: TensorInfo(n, "F32", (4,), "m", (0, 16)) for n in names})


def row_names(text: str) -> list[str]:
    """The names on the report's one-line tensor rows, each line parsed as JSON on its own."""
    return [json.loads(line.rstrip(","))["name"] for line in text.splitlines() if line.startswith('    {"name": ')]


def test_each_tensor_row_is_one_line_of_the_document() -> None:
    report = compare(str(FIXTURES / "kimi-k2-eagle3-published"), str(FIXTURES / "kimi-k25-eagle3-ours"))
    text = report.render("json")

    assert json.loads(text) == report.to_dict()
    assert row_names(text) == [row.name for row in report.tensors]


def test_rows_whose_text_looks_like_a_row_boundary_still_round_trip() -> None:
    hostile = ['x}, {"name": "y', "plain", 'z"}, {"name": ']
    report = compare_checkpoints(checkpoint(hostile), checkpoint(hostile[1:]))
    # a nested list of objects puts the row-boundary text outside any string: each row is then encoded alone
    nested = replace(report.tensors[1], values={"per_block": [{"max": 1.0}, {"name": "block 2"}]})
    report = replace(report, tensors=(report.tensors[0], nested, *report.tensors[2:]))

    text = report.render("json")

    assert json.loads(text) == report.to_dict()
    assert row_names(text) == [row.name for row in report.tensors]


def test_an_empty_comparison_is_still_a_document() -> None:
    report = compare_checkpoints(checkpoint([]), checkpoint([]))
    assert json.loads(report.render("json"))["tensors"] == []


def test_each_row_line_is_exactly_json_dumps_of_the_row() -> None:
    a = checkpoint(["same", "dtype", "shape", "only_a", "ünïcödé \u2028 \x1b"])
    b = {n: TensorInfo(n, "F32", (4,), "m", (0, 16)) for n in ["same", "only_b", "ünïcödé \u2028 \x1b"]}
    b |= {
        "dtype": TensorInfo("dtype", "BF16", (4,), "m", (0, 8)),
        "shape": TensorInfo("shape", "F32", (2, 2), "m", (0, 16)),
    }
    b["renamed"] = TensorInfo("layers.0.renamed", "F32", (4,), "m", (0, 16))  # matched under another name
    report = compare_checkpoints(
        a, replace(a, tensors=b), renames=["^layers\\.0\\.="], policy=Policy(allow_missing=("only_*",))
    )
    assert {row.status for row in report.tensors} >= {"match", "dtype_mismatch", "shape_mismatch", "only_in_a"}
    assert any(row.allowed_by for row in report.tensors) and any(row.note for row in report.tensors)
    lines = [line.strip().rstrip(",") for line in report.render("json").split("\n") if line.startswith('    {"name": ')]
    assert lines == [json.dumps(row.to_dict(), ensure_ascii=False) for row in report.tensors]
