"""The JSON report lists one tensor row a line, and is exactly the document msgspec encodes, whatever the rows hold."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import msgspec
from report_json import validate

from ckptdiff import compare, render
from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints
from ckptdiff.formats.document import document
from ckptdiff.policy import Policy
from ckptdiff.report import RowValues, ValueNote

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def checkpoint(names: list[str]) -> Checkpoint:
    return Checkpoint("x", "local", "x", None, {n: TensorInfo(n, "F32", (4,), "m", (0, 16)) for n in names})


def row_names(text: str) -> list[str]:
    """The names on the report's one-line tensor rows, each line parsed as JSON on its own."""
    return [json.loads(line.rstrip(","))["name"] for line in text.splitlines() if line.startswith('    {"name": ')]


def test_each_tensor_row_is_one_line_of_the_document() -> None:
    report = compare(str(FIXTURES / "kimi-k2-eagle3-published"), str(FIXTURES / "kimi-k25-eagle3-ours"))
    text = render(report, "json")

    assert validate(json.loads(text)) == json.loads(msgspec.json.encode(document(report)))
    assert row_names(text) == [row.name for row in report.tensors]


def test_rows_whose_text_looks_like_a_row_boundary_still_round_trip() -> None:
    hostile = ['x}, {"name": "y', "plain", 'z"}, {"name": ']
    report = compare_checkpoints(checkpoint(hostile), checkpoint(hostile[1:]))
    # value statistics with text of their own (a note naming a dtype) that looks like a row boundary
    note = ValueNote(not_widened='}, {"name": "block 2"}', bytes_compared=True)
    stats = RowValues.of(False, float("nan"), 1.0, None, float("inf"), note=note)
    nested = msgspec.structs.replace(report.tensors[1], values=stats)
    report = replace(report, tensors=(report.tensors[0], nested, *report.tensors[2:]))

    text = render(report, "json")

    assert validate(json.loads(text)) == json.loads(msgspec.json.encode(document(report)))
    assert json.loads(text)["tensors"][1]["values"]["max_abs"] == "NaN"  # non-finite numbers: one spelling
    assert row_names(text) == [row.name for row in report.tensors]


def test_an_empty_comparison_is_still_a_document() -> None:
    report = compare_checkpoints(checkpoint([]), checkpoint([]))
    document = validate(json.loads(render(report, "json")))
    assert document["tensors"] == [] and document["verdict"] == "incompatible"  # nothing compared is no pass
    assert "nothing_compared" in [f["code"] for f in document["findings"]]
    assert (
        json.loads(
            render(compare_checkpoints(checkpoint([]), checkpoint([]), policy=Policy(allow_empty=True)), "json")
        )["verdict"]
        == "compatible"
    )


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
    assert any(row.allowed_by for row in report.tensors) and any(row.notes for row in report.tensors)
    text = render(report, "json")
    lines = [line.strip().rstrip(",") for line in text.split("\n") if line.startswith('    {"name": ')]
    assert lines == [json.dumps(row, ensure_ascii=False) for row in validate(json.loads(text))["tensors"]]


def test_a_lone_surrogate_in_a_name_is_escaped_not_a_crash() -> None:
    report = compare_checkpoints(checkpoint(["w\udc80", "x"]), checkpoint(["w\udc80", "x"]))
    text = render(report, "json")
    text.encode("utf-8")  # writable as UTF-8
    assert [row["name"] for row in validate(json.loads(text))["tensors"]] == ["w\udc80", "x"]


def test_rows_written_from_the_template_are_the_rows_msgspec_encodes() -> None:
    from ckptdiff.formats import json as json_format

    a = checkpoint(["same", "dtype", "shape", "only_a", "weird <name> with spaces"])
    b = {n: TensorInfo(n, "F32", (4,), "m", (0, 16)) for n in ["same", "only_b", "weird <name> with spaces"]}
    b |= {
        "dtype": TensorInfo("dtype", "BF16", (4,), "m", (0, 8)),
        "shape": TensorInfo("shape", "F32", (2, 2), "m", (0, 16)),
        "scalar": TensorInfo("scalar", "F32", (), "m", (0, 4)),
    }
    b["renamed"] = TensorInfo("layers.0.renamed", "F32", (4,), "m", (0, 16))  # a side with a name of its own
    report = compare_checkpoints(
        a, replace(a, tensors=b), renames=["^layers\\.0\\.="], policy=Policy(allow_missing=("only_*",))
    )
    stats = RowValues.of(False, float("nan"), 1.0, None, float("inf"), note=ValueNote(widened=("BF16", "F32")))
    rows = report.tensors
    report = replace(report, tensors=(rows[0], msgspec.structs.replace(rows[1], values=stats), *rows[2:]))
    kinds = {row.status for row in report.tensors}
    assert kinds >= {"match", "dtype_mismatch", "shape_mismatch", "only_in_a", "only_in_b"}
    assert any(row.b is not None and row.b.name == "layers.0.renamed" for row in report.tensors)

    assert "".join(json_format._row_parts(report.tensors) or ()) == json_format._rows_encoded(report)


def test_names_that_need_escaping_are_left_to_msgspec() -> None:
    from ckptdiff.formats import json as json_format

    for name in ['a "quoted" name', "back\\slash", "tab\there", "ünïcödé"]:
        report = compare_checkpoints(checkpoint([name, "x"]), checkpoint([name, "x"]))
        assert json_format._row_parts(report.tensors) is None
        assert [row["name"] for row in validate(json.loads(render(report, "json")))["tensors"]] == sorted([name, "x"])
