"""``ckptdiff convert`` in a terminal (docs/convert.md): every line of the plan and of the outcome fits the width
(``$COLUMNS`` here), with nothing lost in the wrapping; written to a pipe, lines are kept whole."""

from __future__ import annotations

import json
import shutil

import pytest

from fixtures.generate import HERE as FIXTURES

DRAFTERS = FIXTURES / "drafters"
#: (SRC, flags): the config patch with JSON values (the vLLM class, the aux ids, the base's hidden size) and the
#: base's embedding; a plan that fails on two long engine problems; TensorRT-LLM's "not proven" note and its
#: warning; a full model's main tensors, not written.
CASES = {
    "config": (
        DRAFTERS / "specforge-kimi-k2",
        ["--to", "vllm", "--base", str(DRAFTERS / "bases" / "kimi-k25"), "--embed", "base", "--allow-tokenizer-change"],
    ),
    "fails": (FIXTURES / "kimi-k2-eagle3-no-lm-head", ["--to", "sglang"]),
    "unproven": (FIXTURES / "kimi-k2-eagle3-published", ["--to", "trtllm"]),
    "not-written": (DRAFTERS / "mtp-deepseek-v3", ["--to", "sglang"]),
}


def squeezed(text: str) -> str:
    """The text without its whitespace: what wrapping between words, or after a dot, cannot change."""
    return "".join(text.split())


def after_tensors(stdout: str) -> str:
    """Everything the plan prints after its tensor table (the tensor table's own wrapping: test_convert_plan_rows)."""
    return stdout.split("\n\n", 2)[2]


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_plan_fits_the_terminal_and_loses_nothing(run_cli, tmp_path, case, columns):
    source, flags = CASES[case]
    args = ["convert", str(source), str(tmp_path / "out"), *flags, "--plan"]

    wrapped = run_cli(*args, env={"COLUMNS": str(columns)})
    whole = run_cli(*args)
    document = json.loads(run_cli(*args, "--format", "json").stdout)

    assert wrapped.returncode == whole.returncode, wrapped.stderr
    lines = (wrapped.stdout + wrapped.stderr).splitlines()
    assert max(map(len, lines)) <= columns, "\n".join(line for line in lines if len(line) > columns)
    if columns == 80:
        assert max(map(len, (whole.stdout + whole.stderr).splitlines())) > 80  # the case needs wrapping
    assert squeezed(wrapped.stderr) == squeezed(whole.stderr)
    rest, rest_whole = after_tensors(wrapped.stdout), after_tensors(whole.stdout)
    if "config.json:" not in rest:
        assert squeezed(rest) == squeezed(rest_whole)
        return
    # the config table may change its layout; every key, value and reason is in it, and what follows is whole
    table, after = rest.split("\n\n", 1)
    assert squeezed(after) == squeezed(rest_whole.split("\n\n", 1)[1])
    for change in document["config"]["changes"]:
        for cell in (change["key"], json.dumps(change["old"]), json.dumps(change["new"]), change["why"]):
            assert squeezed(cell) in squeezed(table), cell


@pytest.mark.parametrize("columns", [40, 50, 60, 80])
def test_a_long_src_path_and_the_config_patch_fit_a_narrow_terminal(run_cli, tmp_path, columns):
    """SRC: and base: break after a "/"; the config patch, where even a key beside a JSON value is wider than the
    terminal (under about 62 columns), lists each change on lines of its own. (The tensor table's narrowest is
    its longest name part and its shapes, then a tensor a few lines: test_convert_plan_rows.)"""
    source, flags = CASES["config"]
    deep = tmp_path / "runs" / "a-rather-long-experiment-name" / "checkpoints" / "step-120000" / source.name
    shutil.copytree(source, deep)
    args = ["convert", str(deep), str(tmp_path / "out"), *flags, "--plan"]

    wrapped, whole = run_cli(*args, env={"COLUMNS": str(columns)}), run_cli(*args)

    assert wrapped.returncode == whole.returncode == 0, wrapped.stderr
    head, rest = wrapped.stdout.split("\n\n", 1)[0], after_tensors(wrapped.stdout)
    assert max(map(len, whole.stdout.splitlines()[:1])) > 80  # the SRC line needs wrapping
    assert max(map(len, [*head.splitlines(), *rest.splitlines()])) <= columns, wrapped.stdout
    assert squeezed(head) == squeezed(whole.stdout.split("\n\n", 1)[0])
    src = head.split("\nfor: ", 1)[0].splitlines()
    assert len(src) > 1 and all(line.endswith("/") for line in src[:-1]), src  # broken after a "/" only
    document = json.loads(run_cli(*args, "--format", "json").stdout)
    for change in document["config"]["changes"]:
        for cell in (change["key"], json.dumps(change["old"]), json.dumps(change["new"]), change["why"]):
            assert squeezed(cell) in squeezed(rest), cell


@pytest.mark.parametrize("columns", [80, 200])
def test_the_outcome_of_a_conversion_fits_the_terminal(run_cli, tmp_path, columns):
    source, flags = CASES["unproven"]
    out = tmp_path / "out"

    result = run_cli("convert", str(source), str(out), *flags, env={"COLUMNS": str(columns)})

    assert result.returncode == 0, result.stderr
    outcome = result.stdout.rsplit("\n\n", 1)[1]
    said = (
        f"converted: {out} (15 tensors; TensorRT-LLM check: loads; 15 tensors compared byte for byte, 0 by value; "
        "not proven by an engine)"
    )
    assert squeezed(outcome) == squeezed(said)
    assert max(map(len, result.stdout.splitlines())) <= columns
    assert (len(outcome.splitlines()) > 1) == (columns == 80)
