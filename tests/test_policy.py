"""Policy rules (ignore, allow-missing/extra, allow-dtype-change, fail-on) and the config file that holds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_json import json_document

from ckptdiff import compare
from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints
from ckptdiff.config_file import ConfigError, find_config, load_config, merge_policy
from ckptdiff.formats.messages import allowed_by_text, finding_message, rules_applied
from ckptdiff.policy import Policy, PolicyError
from ckptdiff.report import PolicyRule, Report
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_safetensors

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")


def checkpoint(tensors: dict[str, tuple[list[int], str]], spec: str = "x") -> Checkpoint:
    infos = {n: TensorInfo(n, d, tuple(s), "model.safetensors", (0, 0)) for n, (s, d) in tensors.items()}
    return Checkpoint(spec=spec, kind="local", location=spec, revision=None, tensors=infos, config=None)


def applied(report: Report) -> tuple[str, ...]:
    """The "policy rules applied" lines every format shows."""
    return tuple(rules_applied(report))


# A is the reference, B the candidate: B lost lm_head, gained a value head, upcast one norm, reshaped fc.
A = checkpoint(
    {
        "fc.weight": ([8, 24], "BF16"),
        "lm_head.weight": ([32, 8], "BF16"),
        "norm.weight": ([8], "BF16"),
        "rotary_emb.inv_freq": ([4], "F32"),
    },
    "a",
)
B = checkpoint(
    {
        "fc.weight": ([8, 24], "BF16"),
        "norm.weight": ([8], "F32"),
        "value_head.weight": ([1, 8], "BF16"),
        "rotary_emb.inv_freq": ([4], "F32"),
    },
    "b",
)


def rows(report):
    return {row.name: row for row in report.tensors}


def flags(**rules) -> Policy:
    """The rules as the CLI builds them from its flags (``--allow-missing``...), worded so in every report."""
    return Policy(**rules, flags=True)


def test_without_rules_every_difference_fails():
    report = compare_checkpoints(A, B)
    assert report.verdict == "incompatible"
    assert {n: r.status for n, r in rows(report).items() if r.status != "match"} == {
        "lm_head.weight": "only_in_a",
        "norm.weight": "dtype_mismatch",
        "value_head.weight": "only_in_b",
    }
    assert applied(report) == ()


def test_allow_missing_accepts_names_in_a_absent_from_b_and_keeps_their_status():
    report = compare_checkpoints(A, B, policy=flags(allow_missing=("lm_head*",)))
    lm_head = rows(report)["lm_head.weight"]
    assert lm_head.status == "only_in_a"
    assert lm_head.allowed_by == "allow_missing.1" and report.rule("allow_missing.1").pattern == "lm_head*"
    assert allowed_by_text(report, lm_head.allowed_by) == "--allow-missing 'lm_head*'"
    row = next(row for row in json_document(report)["tensors"] if row["name"] == "lm_head.weight")
    assert row["allowed_by"] == "allow_missing.1"
    rule = json_document(report)["rules"][0]
    assert rule == {
        "id": "allow_missing.1",
        "kind": "allow_missing",
        "pattern": "lm_head*",
        "origin": "flag",
        "hits": 1,
    }
    assert applied(report) == ("--allow-missing 'lm_head*': 1 tensor accepted as missing from B",)
    assert report.verdict == "incompatible"  # the extra value head and the dtype change still fail


def test_missing_and_extra_are_not_interchangeable():
    # "missing" = in A, not in B; "extra" = in B, not in A. A glob under the wrong rule accepts nothing.
    wrong = compare_checkpoints(A, B, policy=flags(allow_missing=("value_head.*",), allow_extra=("lm_head.*",)))
    assert all(row.allowed_by is None for row in wrong.tensors)
    assert applied(wrong) == ()
    # each rule says that it matched only the other side: A and B swapped, or the mirror flag meant
    idle = [(f.code, f.subject) for f in wrong.findings if f.code.startswith("policy_rule")]
    assert idle == [("policy_rule_other_side", "allow_missing.1"), ("policy_rule_other_side", "allow_extra.1")]
    texts = [finding_message(wrong, f) for f in wrong.findings if f.code == "policy_rule_other_side"]
    assert texts[0] == (
        "--allow-missing 'value_head.*' matched nothing, but 1 tensor only in B match it: "
        "A and B swapped, or --allow-extra meant?"
    )


def test_all_three_differences_allowed_make_the_gate_pass():
    policy = flags(allow_missing=("lm_head.weight",), allow_extra=("value_head.*",), allow_dtype_change=("BF16:F32",))
    report = compare_checkpoints(A, B, policy=policy)
    assert report.verdict == "compatible" and report.exit_code == 0
    assert report.counts["only_in_a"] == 1 and report.counts["only_in_b"] == 1  # true statuses are kept
    assert applied(report) == (
        "--allow-missing lm_head.weight: 1 tensor accepted as missing from B",
        "--allow-extra 'value_head.*': 1 tensor accepted as extra in B",
        "--allow-dtype-change BF16:F32: 1 tensor accepted with a dtype change",
    )


def test_ignore_leaves_names_out_of_the_report():
    report = compare_checkpoints(A, B, policy=flags(ignore=("lm_head.*", "value_head.*", "*.inv_freq")))
    assert set(rows(report)) == {"fc.weight", "norm.weight"}
    assert applied(report) == (
        "--ignore 'lm_head.*': 1 tensor left out",
        "--ignore 'value_head.*': 1 tensor left out",
        "--ignore '*.inv_freq': 1 tensor left out",
    )


def test_a_glob_that_matches_nothing_is_reported_by_its_rule_id():
    report = compare_checkpoints(A, B, policy=flags(ignore=("optimizer.*",), allow_missing=("embed_tokens.*",)))
    assert applied(report) == ()
    idle = [f for f in report.findings if f.code == "policy_rule_unmatched"]
    assert [(f.severity, f.subject) for f in idle] == [("warning", "ignore.1"), ("warning", "allow_missing.1")]
    assert finding_message(report, idle[0]) == (
        "--ignore 'optimizer.*' matched no tensor: the rule did nothing (a typo, or no longer needed?)"
    )


def test_a_dtype_rule_written_the_other_way_round_says_so():
    report = compare_checkpoints(A, B, policy=Policy(allow_dtype_change=("F32:BF16",)))
    (finding,) = [f for f in report.findings if f.code.startswith("policy_rule")]
    assert finding.code == "policy_rule_other_side" and "(BF16:F32): A and B swapped?" in finding_message(
        report, finding
    )


@pytest.mark.parametrize(
    ("rule", "accepted"),
    [
        ("*", True),
        ("BF16:F32", True),
        ("bf16:f32", True),
        ("BF16:*", True),
        ("*:F32", True),
        ("F32:BF16", False),
        ("BF16:F16", False),
    ],
)
def test_allow_dtype_change_is_directional_from_a_to_b(rule, accepted):
    report = compare_checkpoints(A, B, policy=Policy(allow_dtype_change=(rule,)))
    assert (rows(report)["norm.weight"].allowed_by is not None) is accepted


def test_bare_allow_dtype_change_is_named_without_a_value():
    report = compare_checkpoints(A, B, policy=flags(allow_dtype_change=("*",)))
    assert allowed_by_text(report, rows(report)["norm.weight"].allowed_by) == "--allow-dtype-change"


def test_a_shape_mismatch_is_never_accepted_by_a_dtype_rule():
    a = checkpoint({"w": ([2, 3], "BF16")})
    b = checkpoint({"w": ([3, 3], "F32")})
    report = compare_checkpoints(a, b, policy=Policy(allow_dtype_change=("*",)))
    assert report.tensors[0].status == "shape_mismatch" and report.tensors[0].allowed_by is None
    assert report.verdict == "incompatible"


@pytest.mark.parametrize("rule", ["BF16", "BF16:F32:F16", "BF61:F32", ":F32"])
def test_a_malformed_dtype_rule_is_a_one_line_error(rule):
    with pytest.raises(PolicyError) as caught:
        Policy(allow_dtype_change=(rule,))
    assert caught.value.line().startswith("allow_dtype_change: ")  # the keyword the caller wrote
    assert "\n" not in caught.value.line()


def test_a_policy_error_names_the_keyword_from_python_and_the_flag_from_the_command_line(run_cli):
    with pytest.raises(PolicyError) as caught:
        Policy(ignore="fc.*")  # type: ignore[arg-type]
    assert (
        caught.value.line()
        == "ignore: 'fc.*' is not a list of globs (a string is one glob: give a list, ignore=['fc.*'])"
    )
    with pytest.raises(PolicyError) as caught:
        Policy(allow_dtype_change=("BF16",))
    assert caught.value.line() == "allow_dtype_change: 'BF16' is not FROM:TO (e.g. BF16:F32) ('*' allows any change)"

    result = run_cli(PUBLISHED, TWO_AUX, "--allow-dtype-change", "BF16")
    assert result.returncode == 2 and result.stderr == (
        "ckptdiff: --allow-dtype-change: 'BF16' is not FROM:TO (e.g. BF16:F32) "
        "(a bare --allow-dtype-change goes after A and B)\n"
    )
    result = run_cli(PUBLISHED, TWO_AUX, "--allow-event", "lm_head_random")
    assert result.returncode == 2
    assert result.stderr.startswith("ckptdiff: --allow-event: 'lm_head_random' is not ENGINE:CODE")


def test_rules_of_a_policy_built_in_python_are_worded_as_the_caller_wrote_them():
    """Not as the flags the caller never typed: the Policy's field and the glob, and "python" as the JSON origin."""
    policy = Policy(allow_missing=("value_head.*", "lm_head*"), ignore=("optimizer.*",), allow_dtype_change=("*",))
    report = compare_checkpoints(A, B, policy=policy)
    assert allowed_by_text(report, rows(report)["lm_head.weight"].allowed_by) == "allow_missing 'lm_head*'"
    assert allowed_by_text(report, rows(report)["norm.weight"].allowed_by) == "allow_dtype_change '*'"
    assert applied(report)[0] == "allow_missing 'lm_head*': 1 tensor accepted as missing from B"
    texts = [finding_message(report, f) for f in report.findings if f.code.startswith("policy_rule")]
    assert texts == [
        "ignore 'optimizer.*' matched no tensor: the rule did nothing (a typo, or no longer needed?)",
        "allow_missing 'value_head.*' matched nothing, but 1 tensor only in B match it: A and B swapped, or "
        "allow_extra meant?",
    ]
    assert {rule["origin"] for rule in json_document(report)["rules"]} == {"python"}
    # through compare(): the table names no flag
    result = compare(PUBLISHED, TWO_AUX, policy=Policy(ignore=("optimizer.*",)))
    assert "[policy_rule_unmatched] ignore 'optimizer.*' matched no tensor" in result.render("table")
    assert "--ignore" not in result.render("table")
    assert [rule["origin"] for rule in result.to_dict()["rules"]] == ["python"]
    # the settings that are no rules too: what makes an empty comparison pass, what makes warnings fail
    empty = compare_checkpoints(A, B, policy=Policy(ignore=("*",), fail_on="warning"))
    (nothing,) = [f for f in empty.findings if f.code == "nothing_compared"]
    assert finding_message(empty, nothing) == (
        "no tensor was compared (ignore rules left out all 5 tensors both sides share): an empty comparison is not a "
        "pass (Policy(allow_empty=True) accepts it)"
    )
    flagged = compare_checkpoints(A, B, policy=flags(ignore=("*",)))
    (nothing,) = [f for f in flagged.findings if f.code == "nothing_compared"]
    assert finding_message(flagged, nothing).endswith("(--allow-empty accepts it)")


def test_a_command_line_without_policy_flags_names_the_flags_not_pythons_keywords(tmp_path, run_cli):
    """No policy flag and no config file: the CLI's default policy, whose settings are still its flags (the
    Python words are for a report asked for in Python)."""
    write_safetensors(tmp_path / "a.safetensors", [("x", "F32", [2])])
    write_safetensors(tmp_path / "b.safetensors", [("y", "F32", [2])])
    result = run_cli(str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"), "-v")
    assert result.returncode == 1
    assert "an empty comparison is not a pass (--allow-empty accepts it)" in result.stdout
    assert "Policy(" not in result.stdout
    report = compare(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    (nothing,) = [f for f in report.findings if f.code == "nothing_compared"]
    assert nothing.message.endswith("(Policy(allow_empty=True) accepts it)")


def test_a_switch_of_a_policy_built_in_python_is_named_in_pythons_words():
    with pytest.raises(PolicyError) as caught:
        Policy(allow_empty="yes")  # type: ignore[arg-type]
    assert caught.value.line() == "allow_empty: 'yes' is not True or False"


def test_fail_on_warning_makes_warning_findings_fail_the_gate():
    # The two-aux drafter differs in fc.weight (left out here) and in its aux layer ids: a warning finding.
    lenient = compare(PUBLISHED, TWO_AUX, policy=Policy(ignore=("fc.weight",)))
    assert [f.code for f in lenient.findings if f.severity == "warning"] == ["aux_layer_ids_differ"]
    assert lenient.verdict == "compatible"

    strict = compare(PUBLISHED, TWO_AUX, policy=Policy(ignore=("fc.weight",), fail_on="warning"))
    assert strict.verdict == "incompatible"
    assert applied(strict)[-1] == "fail_on='warning': 1 warning finding fails the gate"  # the keyword given
    assert json_document(strict)["fail_on"] == "warning"


# --- the config file -------------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pyproject_settings_are_found_from_a_subfolder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the search climbs no higher than home
    pyproject = '[project]\nname = "x"\n\n[tool.ckptdiff]\nallow-missing = ["lm_head*"]\nallow-dtype-change = true\n'
    write(tmp_path / "pyproject.toml", pyproject + 'fail-on = "warning"\nformat = "markdown"\n')
    start = tmp_path / "runs" / "today"
    start.mkdir(parents=True)
    assert find_config(start) == tmp_path / "pyproject.toml"
    settings = load_config(start=start)
    assert settings.values == {
        "allow_missing": ("lm_head*",),
        "allow_dtype_change": ("*",),
        "fail_on": "warning",
        "format": "markdown",
    }


def test_a_pyproject_without_the_table_is_passed_over(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the search climbs no higher than home
    write(tmp_path / "ckptdiff.toml", 'ignore = "optimizer.*"\n')
    write(tmp_path / "inner" / "pyproject.toml", '[project]\nname = "inner"\n')
    assert find_config(tmp_path / "inner") == tmp_path / "ckptdiff.toml"
    assert load_config(start=tmp_path / "inner").values == {"ignore": ("optimizer.*",)}


def test_ckptdiff_toml_comes_before_pyproject_in_the_same_folder(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ckptdiff]\nfail-on = "warning"\n')
    write(tmp_path / "ckptdiff.toml", 'fail-on = "error"\n')
    assert load_config(start=tmp_path).values == {"fail_on": "error"}


def test_no_config_file_gives_empty_settings(tmp_path):
    # the search stops at the repository's root, so what lies above tmp_path cannot leak in
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / "runs").mkdir()
    for start in (repository, repository / "runs"):
        settings = load_config(start=start)
        assert settings.path is None and dict(settings.values) == {}
        assert merge_policy(settings, {}) is None  # the default policy


def test_the_search_ends_at_the_repository_root(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the search climbs no higher than home
    write(tmp_path / "ckptdiff.toml", 'fail-on = "warning"\n')  # outside the repository: not its policy
    repository = tmp_path / "repo"
    (repository / "runs").mkdir(parents=True)
    assert load_config(start=repository / "runs").path == tmp_path / "ckptdiff.toml"  # no repository yet
    (repository / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git is a file
    assert load_config(start=repository / "runs").path is None
    write(repository / "pyproject.toml", '[tool.ckptdiff]\nfail-on = "error"\n')
    assert load_config(start=repository / "runs").values == {"fail_on": "error"}


def test_flags_replace_the_files_setting_and_rules_say_where_they_came_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_config(
        write(
            tmp_path / "ckptdiff.toml",
            'allow-missing = ["lm_head*"]\nfail-on = "warning"\nallow-extra = ["value_head.*"]\n',
        )
    )
    from_file = merge_policy(settings, {})
    assert from_file.allow_missing == ("lm_head*",) and from_file.fail_on == "warning"
    report = compare_checkpoints(A, B, policy=from_file)
    allowed_by = rows(report)["lm_head.weight"].allowed_by
    assert allowed_by_text(report, allowed_by) == "--allow-missing 'lm_head*' (from ckptdiff.toml)"
    assert report.rule(allowed_by) == PolicyRule(
        "allow_missing.1", "allow_missing", "lm_head*", "config", "ckptdiff.toml"
    )

    overridden = merge_policy(settings, {"allow_missing": ("other*",), "fail_on": "error"})
    assert overridden.allow_missing == ("other*",) and overridden.fail_on == "error"
    assert overridden.allow_extra == ("value_head.*",)  # not given on the command line: the file's value stays


@pytest.mark.parametrize(
    ("text", "defect"),
    [
        ("fail-on = 'sometimes'\n", "fail-on: must be one of error, warning"),
        ("allow-missing = [1, 2]\n", "allow-missing: must be a list of non-empty strings"),
        ("colour = true\n", "colour: is not a ckptdiff setting"),
        ("[tool.ckptdiff]\nignore = ['x']\n", "has a [tool.ckptdiff] table"),
        ("ignore = ['x'\n", "is not valid TOML"),
        ("allow-dtype-change = ['BF16-F32']\n", "is not FROM:TO"),
        ("profile = 'eagle4'\n", "profile: must be one of auto, none, dflash, eagle3"),
        # rename rules are parsed with the file: a bad one was blamed on a --rename flag never given
        ("rename = ['(=x']\n", "rename: '(' is not a regular expression"),
        ("rename = 'midlayer'\n", "rename: 'midlayer' is not REGEX=REPLACEMENT"),
        ("rename = ['^a=\\9']\n", "rename: replacement '\\9' is invalid"),
    ],
)
def test_a_broken_config_file_is_a_one_line_error_naming_the_file(tmp_path, text, defect):
    path = write(tmp_path / "ckptdiff.toml", text)
    with pytest.raises((ConfigError, PolicyError)) as caught:
        merge_policy(load_config(path), {})
    line = caught.value.line()
    assert "\n" not in line and defect in line and "ckptdiff.toml" in line


def test_an_explicit_pyproject_needs_the_table(tmp_path):
    path = write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"has no \[tool.ckptdiff\] table"):
        load_config(path)
