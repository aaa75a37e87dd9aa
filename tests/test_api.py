"""The Python API: compare() with the CLI's options as typed keywords, one error type, render(), the old module."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import msgspec
import pytest
from report_json import validate

import ckptdiff
from ckptdiff import CkptdiffError, compare, render
from fixtures.generate import HERE as FIXTURES

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")


def test_compare_takes_the_clis_options_by_name_and_returns_a_report() -> None:
    report = compare(PUBLISHED, OURS, offline=True, jobs=4, policy=ckptdiff.Policy(allow_extra=("embed_*",)))
    assert isinstance(report, ckptdiff.Report) and report.verdict == "compatible"
    assert report.tool_version == ckptdiff.__version__
    document = validate(json.loads(render(report, "json")))
    assert document["rules"][0]["id"] == "allow_extra.1"


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda: compare(PUBLISHED, OURS, profile="eagle4"), "profile"),
        (lambda: compare(PUBLISHED, OURS, engines=["sglang", "tgi"]), "engines"),
        (lambda: compare(PUBLISHED, OURS, engines="sglang"), "engines"),
        (lambda: compare(PUBLISHED), "b"),
        (lambda: compare(PUBLISHED, OURS, jobs=0), "jobs"),
        (lambda: compare(PUBLISHED, OURS, policy={"ignore": ["x"]}), "policy"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, policy=ckptdiff.Policy(ignore="x")), "ignore"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, renames=["midlayer"]), "renames"),
        (lambda: compare(PUBLISHED, OURS, renames=[r"^(.*$=x"]), "renames"),
        (lambda: compare(PUBLISHED, OURS, renames=[r"^.*$=same"]), "renames"),
        (lambda: compare(PUBLISHED, OURS, renames=[r"^fc\.weight$="]), "renames"),
        (lambda: compare(PUBLISHED, "/nonexistent/ckpt"), None),
        (lambda: render(compare(PUBLISHED, OURS), "pdf"), "format"),
        (lambda: compare(None, OURS), "a"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, 3), "b"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, base=b"base"), "base"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, engines=None), "engines"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, renames=r"^layers\.0\.=midlayer."), "renames"),
        (lambda: compare(PUBLISHED, OURS, renames=[None]), "renames"),  # type: ignore[list-item]
        (lambda: compare(PUBLISHED, OURS, values_only=None), "values_only"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, values_only=[1]), "values_only"),  # type: ignore[list-item]
        (lambda: compare(PUBLISHED, OURS, values_only=[" "]), "values_only"),
        (lambda: compare(PUBLISHED, OURS, base=""), "base"),
        (lambda: compare(" ", OURS), "a"),
        (lambda: compare(PUBLISHED, "", engines=["sglang"]), "b"),
        (lambda: compare(PUBLISHED, OURS, policy=ckptdiff.Policy(ignore=(" ",))), "ignore"),
        (lambda: compare(PUBLISHED, OURS, offline="yes"), "offline"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS, progress="yes"), "progress"),  # type: ignore[arg-type]
        (lambda: render(compare(PUBLISHED, OURS).to_dict(), "markdown"), "report"),  # type: ignore[arg-type]
        (lambda: render(compare(PUBLISHED, OURS), "table", {"color": True}), "options"),  # type: ignore[arg-type]
        (lambda: render(compare(PUBLISHED, OURS), "table", colour=True), "options"),
        (lambda: compare(PUBLISHED, OURS).render("table", colour=True), "options"),
        (lambda: compare(PUBLISHED, OURS).render("markdown", budget="60000"), "options"),  # type: ignore[arg-type]
        (lambda: compare(PUBLISHED, OURS).render("markdown", only_diffs="yes"), "options"),  # type: ignore[arg-type]
    ],
)
def test_every_input_mistake_is_a_ckptdiff_error(call, where) -> None:
    with pytest.raises(CkptdiffError) as caught:
        call()
    if where is not None:
        assert caught.value.where == where
    assert "\n" not in caught.value.line()


def test_a_report_does_not_change_after_the_fact() -> None:
    report = compare(PUBLISHED, OURS)
    finding = next(f for f in report.findings if f.code == "embed_tokens_carried")
    for change in (
        lambda: report.counts.__setitem__("match", 0),
        lambda: report.counts.update(match=0),
        lambda: report.counts.clear(),
        lambda: finding.params.__setitem__("weight", "lm_head.weight"),
        lambda: finding.params.pop("weight"),
        lambda: report.a.dtypes.clear(),
        lambda: report.rule_hits.setdefault("ignore.1", 3),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert report.counts["match"] == 15 and finding.params["weight"] == "embed_tokens.weight"
    # still plain data: equal to dicts, a dict to change by copying, in the JSON report, pickled and back
    assert report.counts == {**report.counts} and isinstance(finding.params, dict)
    assert json.loads(render(report, "json"))["counts"] == report.counts
    again = pickle.loads(pickle.dumps(report))
    assert again == report and again.findings == report.findings and again.counts == report.counts
    with pytest.raises(TypeError, match="read-only"):
        again.findings[0].params.clear()


def test_a_result_is_a_hashable_value() -> None:
    one, again = compare(PUBLISHED, TWO_AUX, engines=["vllm"]), compare(PUBLISHED, TWO_AUX, engines=["vllm"])
    assert one == again and hash(one) == hash(again) and len({one, again}) == 1
    assert one != compare(PUBLISHED, OURS)
    # down to the records holding JSON values: a config key's list, a finding's list param, an event's params
    ids = next(d for d in one.config if d.key.endswith("aux_hidden_state_layer_ids"))
    assert ids.a == [2, 30, 58] and hash(ids) == hash(msgspec.structs.replace(ids, a=[2, 30, 58]))
    finding = next(f for f in one.findings if f.code == "aux_layer_ids_differ")
    assert {finding: "seen"}[next(f for f in again.findings if f.code == "aux_layer_ids_differ")] == "seen"
    assert {event for result in one.engines for event in result.events}


def test_render_takes_its_options_by_name_or_as_render_options() -> None:
    report = compare(PUBLISHED, TWO_AUX)
    diffs = render(report, "markdown", only_diffs=True)
    assert diffs == render(report, "markdown", ckptdiff.RenderOptions(only_diffs=True))
    assert diffs == report.render("markdown", only_diffs=True) != render(report, "markdown")
    # a field by name replaces the options' own, rather than being dropped
    assert render(report, "markdown", ckptdiff.RenderOptions(only_diffs=True), only_diffs=False) == render(
        report, "markdown"
    )


def test_a_path_is_a_local_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = compare(Path(PUBLISHED), Path(OURS), base=None)
    assert report.verdict == "compatible" and report.a.spec == PUBLISHED
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CkptdiffError) as caught:  # a relative path, even one shaped like org/name, is no Hub repo
        compare(Path("org/name"), Path(OURS))
    assert caught.value.line() == "./org/name: no such file or folder"


def test_the_old_module_name_still_imports() -> None:
    from ckptdiff.compare import compare_checkpoints, compare_specs

    from ckptdiff.comparison import compare_checkpoints as current
    from ckptdiff.pipeline import compare_specs as run

    assert (compare_checkpoints, compare_specs) == (current, run)
    assert callable(ckptdiff.compare) and ckptdiff.compare is compare  # the function keeps its name


def test_the_package_is_typed() -> None:
    assert (Path(ckptdiff.__file__).parent / "py.typed").is_file()


def test_an_empty_comparison_fails_unless_allowed(tmp_path: Path, run_cli) -> None:
    from fixtures.generate import write_safetensors

    write_safetensors(tmp_path / "a" / "model.safetensors", [("w", "F32", [2])])
    write_safetensors(tmp_path / "b" / "model.safetensors", [("v", "F32", [2])])
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    loose = ("--allow-missing", "*", "--allow-extra", "*")  # every row accepted, yet nothing compared

    failed = run_cli(a, b, *loose, "--format", "json")
    document = validate(json.loads(failed.stdout))
    assert failed.returncode == 1 and document["verdict"] == "incompatible"
    (finding,) = [f for f in document["findings"] if f["code"] == "nothing_compared"]
    assert finding["severity"] == "error" and "no tensor was compared" in finding["message"]

    assert run_cli(a, b, *loose, "--allow-empty").returncode == 0
    (tmp_path / "ckptdiff.toml").write_text("allow-empty = true\n")
    assert run_cli(a, b, *loose, cwd=tmp_path).returncode == 0


def test_render_takes_the_format_names_the_command_line_takes() -> None:
    """`--format md` is markdown; render(result, "md") was "unknown format 'md'"."""
    report = compare(PUBLISHED, OURS)
    assert render(report, "md") == render(report, "markdown") == report.render("md")
