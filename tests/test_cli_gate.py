"""ckptdiff as a CI gate, end to end: policy flags and config file, JUnit, step summary, readable and
deterministic reports, and exit discipline (the whole report is written before exit 1; write trouble is exit 2)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import cli_env

from ckptdiff.formats import render
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_kimi_k2_base, write_safetensors

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")


@pytest.fixture
def pair(tmp_path) -> tuple[str, str]:
    """A (reference) has lm_head; B (candidate) lost it, gained a value head and upcast its norm."""
    a, b = tmp_path / "a" / "model.safetensors", tmp_path / "b" / "model.safetensors"
    write_safetensors(
        a, [("fc.weight", "BF16", [8, 24]), ("lm_head.weight", "BF16", [32, 8]), ("norm.weight", "BF16", [8])]
    )
    write_safetensors(
        b, [("fc.weight", "BF16", [8, 24]), ("norm.weight", "F32", [8]), ("value_head.weight", "BF16", [1, 8])]
    )
    return str(a.parent), str(b.parent)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ckptdiff: ")
    assert "Traceback" not in result.stderr
    return result.stderr.strip()


# --- policy flags ----------------------------------------------------------------------------------------


def test_each_rule_accepts_only_its_kind_of_difference(run_cli, pair):
    a, b = pair
    assert run_cli(a, b).returncode == 1
    allowed = ("--allow-missing", "lm_head.*", "--allow-extra", "value_head.*", "--allow-dtype-change", "BF16:F32")
    result = run_cli(a, b, *allowed)
    assert result.returncode == 0, result.stdout
    rules = result.stdout.split("policy rules applied:\n")[1]
    assert rules.startswith("  --allow-missing 'lm_head.*': 1 tensor accepted as missing from B\n")
    assert result.stdout.rstrip().endswith(
        "compatible: 1 match, 1 dtype_mismatch, 1 only_in_a, 1 only_in_b (3 allowed by policy)"
    )
    # swapped: "missing" is in A and not in B, "extra" in B and not in A
    swapped = ("--allow-missing", "value_head.*", "--allow-extra", "lm_head.*", "--allow-dtype-change", "BF16:F32")
    assert run_cli(a, b, *swapped).returncode == 1
    assert run_cli(a, b, "--allow-missing", "lm_head.*", "--allow-extra", "value_head.*").returncode == 1


def test_bare_allow_dtype_change_and_ignore(run_cli, pair):
    a, b = pair
    result = run_cli(a, b, "--ignore", "lm_head.*", "--ignore", "value_head.*", "--allow-dtype-change")
    assert result.returncode == 0
    assert "lm_head" not in result.stdout.split("policy rules applied:")[0]
    assert "  --allow-dtype-change: 1 tensor accepted with a dtype change" in result.stdout


def test_fail_on_warning(run_cli):
    # Left without fc.weight, the two-aux drafter differs only by a warning (its aux layer ids).
    assert run_cli(PUBLISHED, TWO_AUX, "--ignore", "fc.weight").returncode == 0
    strict = run_cli(PUBLISHED, TWO_AUX, "--ignore", "fc.weight", "--fail-on", "warning")
    assert strict.returncode == 1
    assert "--fail-on warning: 1 warning finding fails the gate" in strict.stdout


# --- the config file -------------------------------------------------------------------------------------


def test_a_ckptdiff_toml_in_the_working_directory_is_the_policy(run_cli, pair, tmp_path):
    a, b = pair
    (tmp_path / "ckptdiff.toml").write_text(
        'allow-missing = ["lm_head.*"]\nallow-extra = ["value_head.*"]\nallow-dtype-change = ["BF16:F32"]\n'
    )
    result = run_cli(a, b, cwd=tmp_path)
    assert result.returncode == 0
    assert "--allow-missing 'lm_head.*' (from ckptdiff.toml): 1 tensor accepted as missing from B" in result.stdout


def test_pyproject_is_found_from_a_subfolder_and_flags_override_it(run_cli, pair, tmp_path):
    a, b = pair
    (tmp_path / ".git").mkdir()  # the search climbs to the repository's root, no further
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "gate"\n\n[tool.ckptdiff]\nignore = ["lm_head.*", "value_head.*"]\n'
        'allow-dtype-change = true\nfail-on = "warning"\nformat = "markdown"\n'
    )
    work = tmp_path / "runs" / "today"
    work.mkdir(parents=True)
    from_file = run_cli(a, b, cwd=work)
    assert from_file.returncode == 0 and from_file.stdout.startswith("## ckptdiff: compatible")
    assert "- `--ignore 'lm_head.*' (from ../../pyproject.toml): 1 tensor left out`" in from_file.stdout

    # a flag replaces that setting from the file; the others stay
    flagged = run_cli(a, b, "--ignore", "lm_head.*", "--format", "json", cwd=work)
    assert flagged.returncode == 1
    document = json.loads(flagged.stdout)
    assert document["fail_on"] == "warning"
    assert document["rules_applied"] == [
        "--ignore 'lm_head.*': 1 tensor left out",
        "--allow-dtype-change (from ../../pyproject.toml): 1 tensor accepted with a dtype change",
    ]
    assert [t["name"] for t in document["tensors"] if t["status"] == "only_in_b"] == ["value_head.weight"]


def test_an_explicit_config_file_and_a_missing_one(run_cli, pair, tmp_path):
    a, b = pair
    settings = tmp_path / "settings" / "gate.toml"
    settings.parent.mkdir()
    settings.write_text('allow-missing = ["lm_head.*"]\nallow-extra = ["value_head.*"]\nallow-dtype-change = true\n')
    assert run_cli(a, b, "--config", str(settings)).returncode == 0
    line = one_error_line(run_cli(a, b, "--config", str(tmp_path / "nope.toml")))
    assert line == f"ckptdiff: {tmp_path / 'nope.toml'}: no such config file"


def test_without_a_and_b_the_config_files_reference_and_candidate_are_compared(run_cli, tmp_path):
    """The pre-commit hook's way: paths are taken from the config file's folder, wherever ckptdiff runs below it."""
    import shutil

    shutil.copytree(PUBLISHED, tmp_path / "reference")
    shutil.copytree(TWO_AUX, tmp_path / "checkpoints" / "drafter")
    (tmp_path / "ckptdiff.toml").write_text('reference = "reference"\ncandidate = "checkpoints/drafter"\n')
    (tmp_path / ".git").mkdir()  # the search climbs to the repository's root, no further
    (tmp_path / "docs").mkdir()
    result = run_cli(cwd=tmp_path / "docs")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("A: ../reference\nB: ../checkpoints/drafter\n")
    assert result.stdout.endswith("\nincompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected\n")
    # A and B on the command line win over the file's
    assert run_cli(PUBLISHED, OURS, cwd=tmp_path).returncode == 0
    # a spec that is not beside the file (a Hub repo) is kept as written
    (tmp_path / "ckptdiff.toml").write_text('reference = "./gone"\ncandidate = "checkpoints/drafter"\n')
    assert one_error_line(run_cli(cwd=tmp_path)) == "ckptdiff: ./gone: no such file or folder"


def test_one_spec_without_the_other_is_a_usage_error(run_cli, tmp_path):
    (tmp_path / "ckptdiff.toml").write_text('reference = "a"\n')
    for args in ((), (PUBLISHED,)):
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 2 and "Missing argument" in result.stderr
    assert "set reference and candidate in the config file" in run_cli(cwd=tmp_path).stderr


@pytest.mark.parametrize(
    ("text", "defect"),
    [
        ("allow-missing = [\n", "is not valid TOML"),
        ("fail-on = 'never'\n", "fail-on: must be one of error, warning"),
        (
            "allow-dtype-change = ['BF16=>F32']\n",
            "is not FROM:TO (e.g. BF16:F32) (allow-dtype-change = true allows any",
        ),
    ],
)
def test_a_broken_config_file_is_one_line_and_exit_2(run_cli, pair, tmp_path, text, defect):
    (tmp_path / "ckptdiff.toml").write_text(text)
    line = one_error_line(run_cli(*pair, cwd=tmp_path))
    assert "ckptdiff.toml" in line and defect in line


# --- JUnit and the GitHub step summary -------------------------------------------------------------------


def test_junit_from_the_output_file_extension(run_cli, pair, tmp_path):
    report = tmp_path / "report.xml"
    result = run_cli(*pair, "-o", str(report))
    assert result.returncode == 1 and result.stdout == ""
    suite = ET.parse(report).getroot().find("testsuite")
    failures = {
        case.get("name"): case.find("failure").get("type")
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    }
    assert failures == {
        "lm_head.weight": "only_in_a",
        "norm.weight": "dtype_mismatch",
        "value_head.weight": "only_in_b",
    }


def test_the_markdown_report_is_appended_to_the_github_step_summary(run_cli, pair, tmp_path):
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    first = run_cli(*pair, "--format", "json", env=env)
    assert first.returncode == 1 and json.loads(first.stdout)["verdict"] == "incompatible"  # normal output too
    second = run_cli(PUBLISHED, OURS, env=env)
    assert second.returncode == 0
    text = summary.read_text()
    assert text.startswith("## earlier step\n\n## ckptdiff: incompatible ❌\n")
    assert text.count("## ckptdiff: ") == 2 and "## ckptdiff: compatible ✅" in text

    before = summary.read_bytes()
    assert run_cli(*pair, "--no-step-summary", env=env).returncode == 1
    (tmp_path / "ckptdiff.toml").write_text("step-summary = false\n")
    assert run_cli(*pair, env=env, cwd=tmp_path).returncode == 1
    assert summary.read_bytes() == before


def test_a_report_over_a_comments_limit_keeps_the_differences_and_counts_the_rest(run_cli, tmp_path):
    names = [(f"w{i:05d}", "F32", [1]) for i in range(20_000)]  # no layer indices: nothing collapses
    write_safetensors(tmp_path / "a" / "model.safetensors", names + [("gone", "F32", [2])])
    write_safetensors(tmp_path / "b" / "model.safetensors", names)
    summary = tmp_path / "summary.md"
    result = run_cli(
        str(tmp_path / "a"), str(tmp_path / "b"), "--format", "markdown", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    # 20,000 matches would be 1.5 MB of table: the report keeps to a PR comment's budget, and says what it left out
    assert result.returncode == 1 and len(result.stdout) <= 60_000
    text = summary.read_text()
    assert text == result.stdout
    assert text.startswith("## ckptdiff: incompatible") and "| `gone`" in text and "`w00000`" not in text
    assert "left out 20,000 matching tensors" in text


def test_an_unwritable_step_summary_is_exit_2_after_the_report(run_cli, pair, tmp_path):
    result = run_cli(*pair, env={"GITHUB_STEP_SUMMARY": str(tmp_path / "missing-folder" / "summary.md")})
    # the report itself was written first, verdict line and all
    assert result.stdout.endswith(
        "\nincompatible: 3 errors (only_in_a lm_head.weight, dtype_mismatch norm.weight, only_in_b value_head.weight),"
        " 1 match\n"
    )
    line = one_error_line(result)
    assert "cannot append the step summary" in line and "--no-step-summary" in line


def test_a_step_summary_naming_a_checkpoints_file_is_refused_before_anything_is_read(run_cli, pair, tmp_path):
    """A GITHUB_STEP_SUMMARY pointed at A's config.json would have had the markdown appended to it."""
    config = Path(pair[0]) / "config.json"
    config.write_text('{"hidden_size": 8}')
    before = config.read_bytes()

    result = run_cli(*pair, env={"GITHUB_STEP_SUMMARY": str(config)})

    assert result.returncode == 2 and result.stdout == ""
    assert "a report never replaces or adds a checkpoint's files" in one_error_line(result)
    assert "--no-step-summary" in result.stderr and config.read_bytes() == before
    assert run_cli(*pair, "--no-step-summary", env={"GITHUB_STEP_SUMMARY": str(config)}).returncode == 1


# --- readable output -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_base(tmp_path_factory) -> str:
    return str(write_kimi_k2_base(tmp_path_factory.mktemp("base"), layers=4, experts=24))


def test_layers_collapse_unless_expand(run_cli, small_base):
    collapsed = run_cli(small_base, small_base, "--all")
    assert collapsed.returncode == 0
    rows = collapsed.stdout.split("\n\n")[1].splitlines()[2:]
    expert = next(row for row in rows if row.startswith("model.layers.{1..3}.mlp.experts.{0..23}.gate_proj.weight "))
    assert expert.split()[1] == "72"

    expanded = run_cli(small_base, small_base, "--expand", "--all")
    names = [line.split()[0] for line in expanded.stdout.split("\n\n")[1].splitlines()[2:]]
    tensors = json.loads(run_cli(small_base, small_base, "--format", "json").stdout)["tensors"]
    assert names == [t["name"] for t in tensors] and len(names) == 521 and len(rows) == 37


def test_only_diffs_hides_matching_rows(run_cli):
    result = run_cli(PUBLISHED, TWO_AUX, "--only-diffs")
    table = result.stdout.split("\n\n")[1].splitlines()
    assert [line.split()[0] for line in table[2:-1]] == ["fc.weight", "embed_tokens.weight"]  # failing first
    assert table[-1] == "14 tensors match (--all lists them)"
    markdown = run_cli(PUBLISHED, OURS, "--only-diffs", "--format", "markdown").stdout
    assert "| `embed_tokens.weight`" in markdown and "| `fc.weight`" not in markdown


def test_report_defaults_from_the_config_file_and_the_flags_that_undo_them(run_cli, small_base, tmp_path):
    (tmp_path / "ckptdiff.toml").write_text("only-diffs = true\nexpand = true\n")
    hidden = run_cli(PUBLISHED, TWO_AUX, cwd=tmp_path)
    assert [line.split()[0] for line in hidden.stdout.split("\n\n")[1].splitlines()[2:-1]] == [
        "fc.weight",
        "embed_tokens.weight",
    ]
    shown = run_cli(PUBLISHED, TWO_AUX, "--all-rows", cwd=tmp_path)
    assert len(shown.stdout.split("\n\n")[1].splitlines()[2:]) == 16
    expanded = run_cli(small_base, small_base, "--all-rows", cwd=tmp_path).stdout.split("\n\n")[1].splitlines()
    collapsed = run_cli(small_base, small_base, "--all-rows", "--collapse", cwd=tmp_path).stdout.split("\n\n")[1]
    assert len(expanded) == 2 + 521 and len(collapsed.splitlines()) == 2 + 37


def test_markdown_names_the_command_and_version_without_tokens(run_cli):
    token = "hf_" + "Q" * 30
    result = run_cli(
        PUBLISHED, OURS, "--format", "markdown", "--ignore", token, "--ignore", "x y", env={"HF_TOKEN": token}
    )
    footer = result.stdout.rstrip().splitlines()[-1]
    from ckptdiff import __version__

    assert footer == (
        f"_ckptdiff {__version__} — `ckptdiff {PUBLISHED} {OURS} --format markdown --ignore *** --ignore 'x y'`_"
    )
    assert token not in result.stdout


def test_names_from_a_checkpoint_cannot_drive_the_terminal():
    # The reader refuses such names in files; checkpoints built through the API reach the formats as they are.
    from ckptdiff.checkpoint import Checkpoint, TensorInfo
    from ckptdiff.comparison import compare_checkpoints

    evil = "x.\x1b[2J\x1b]0;owned\x07.weight\u202e"
    a = Checkpoint(
        spec="a",
        kind="local",
        location="a",
        revision=None,
        config=None,
        tensors={evil: TensorInfo(evil, "F32", (1,), "model.safetensors", (0, 4))},
    )
    b = Checkpoint(spec="b", kind="local", location="b", revision=None, config=None, tensors={})
    report = compare_checkpoints(a, b)
    for fmt in ("table", "markdown"):
        text = render(report, fmt)
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "x.\\x1b[2J\\x1b]0;owned\\x07.weight\\u202e" in text


def run_on_a_terminal(*args: str, env: dict[str, str]) -> bytes:
    """Run ckptdiff with its stdout on a pseudo-terminal, as in an interactive shell; returns what it printed."""
    leader, follower = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | env
    process = subprocess.Popen(
        [sys.executable, "-m", "ckptdiff", *args], stdout=follower, stderr=subprocess.DEVNULL, env=full_env
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closes when the process exits
            break
        if not chunk:
            break
        out += chunk
    process.wait(timeout=120)
    os.close(leader)
    return out


def test_statuses_are_coloured_on_a_terminal_unless_no_color():
    coloured = run_on_a_terminal(PUBLISHED, TWO_AUX, env={})
    assert b"\x1b[31mshape_mismatch\x1b[0m" in coloured and b"\x1b[1;31mincompatible\x1b[0m" in coloured
    plain = run_on_a_terminal(PUBLISHED, TWO_AUX, env={"NO_COLOR": "1"})
    assert b"\x1b[" not in plain and b"shape_mismatch" in plain


# --- determinism -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "markdown", "junit", "table"])
def test_two_runs_give_identical_bytes(run_cli, tmp_path, small_base, fmt):
    target = tmp_path / "report.out"  # the same command twice (the command is part of the markdown and JUnit)
    outputs = []
    for _ in range(2):
        result = run_cli(small_base, PUBLISHED, "--format", fmt, "-o", str(target))
        assert result.returncode == 1
        outputs.append(target.read_bytes())
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1000


# --- exit discipline -------------------------------------------------------------------------------------


def test_a_large_report_is_complete_on_stdout_before_exit_1(run_cli, small_base):
    result = run_cli(small_base, PUBLISHED, "--format", "json")  # every base tensor is only_in_a: > 64 KiB
    assert result.returncode == 1 and len(result.stdout) > 65536
    assert len(json.loads(result.stdout)["tensors"]) > 400


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "junit"])
def test_the_whole_report_is_in_the_file_before_exit_1(run_cli, pair, tmp_path, fmt):
    target = tmp_path / "out" / "report"
    target.parent.mkdir()
    target.write_text("the previous report\n")
    result = run_cli(*pair, "--format", fmt, "-o", str(target))
    assert result.returncode == 1 and result.stdout == ""
    text = target.read_text()
    ends = {"table": "value_head.weight), 1 match\n", "markdown": "`_\n", "json": "\n}\n", "junit": "</testsuites>\n"}
    assert text.endswith(ends[fmt])
    assert sorted(p.name for p in target.parent.iterdir()) == ["report"]  # no temporary file left behind


def test_an_existing_report_survives_a_failed_run(run_cli, pair, tmp_path):
    target = tmp_path / "report.json"
    target.write_text('{"verdict": "previous"}\n')
    one_error_line(run_cli(pair[0], str(tmp_path / "no-such-checkpoint"), "-o", str(target)))
    assert target.read_text() == '{"verdict": "previous"}\n'
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []


@pytest.mark.parametrize("where", ["file/report.json", "folder", "/dev/full"])
def test_an_unwritable_output_is_exit_2_with_a_clear_line(run_cli, pair, tmp_path, where):
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    target = where if where.startswith("/") else str(tmp_path / where)
    line = one_error_line(run_cli(*pair, "--format", "json", "-o", target))
    assert line.startswith(f"ckptdiff: {target}: ")
    assert "cannot write the report" in line or "is a folder" in line


@pytest.mark.parametrize("where", ["no-such-folder/report.md", "file/report.md", "folder"])
@pytest.mark.parametrize("flag", ["-o", "--save"])
def test_a_report_that_cannot_be_written_is_refused_before_anything_is_read(run_cli, pair, tmp_path, where, flag):
    """Found once the report was ready, a typo in -o threw away the whole run (the Hub, --values): here B does
    not exist, so a run that read anything would blame B; and --save's report was printed before the refusal."""
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    target = str(tmp_path / where)
    result = run_cli(pair[0], str(tmp_path / "no-such-checkpoint"), flag, target)
    line = one_error_line(result)
    assert line.startswith(f"ckptdiff: {target}: "), line
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("flags", "twice"),
    [
        (["--format", "json", "-o", "r.md", "--save", "r.md"], "-o and --save"),
        (["--save", "r.json", "--save", "./r.json"], "--save and --save"),
    ],
)
def test_a_report_file_named_twice_is_refused_before_anything_is_read(run_cli, pair, tmp_path, flags, twice):
    """The second write replaced the first: ``--format json -o r.md --save r.md`` left markdown, no JSON."""
    result = run_cli(pair[0], str(tmp_path / "no-such-checkpoint"), *flags, cwd=tmp_path)
    named = flags[-1]
    assert one_error_line(result) == (
        f"ckptdiff: {named}: is named by {twice}: one report would replace the other (give each its own file)"
    )
    assert result.stdout == "" and not list(tmp_path.glob("r.*"))


@pytest.mark.parametrize("output", [[], ["-o", "-"], ["-o", "report.json"]])
def test_save_to_stdout_is_refused_before_anything_is_read(run_cli, pair, tmp_path, output):
    """--save - printed a table after the report on stdout: --format json --save - was JSON and then a table."""
    result = run_cli(pair[0], str(tmp_path / "no-such-checkpoint"), "--format", "json", *output, "--save", "-")
    assert one_error_line(result) == (
        "ckptdiff: --save -: names stdout; --save writes a file (the report goes to stdout without -o)"
    )
    assert result.stdout == ""


@pytest.mark.parametrize("device", ["/dev/stdout", "/dev/stderr"])
def test_a_report_to_dev_stdout_reaches_a_pipe(run_cli_subprocess, pair, device):
    """`-o /dev/stdout | jq` wrote nothing and said "cannot write the report: No such file or directory": the link
    was followed to /proc/self/fd/1's target, "pipe:[…]", a name no file has."""
    result = run_cli_subprocess(*pair, "--format", "json", "-o", device)
    written = result.stdout if device == "/dev/stdout" else result.stderr
    assert result.returncode == 1, result.stderr
    report, _end = json.JSONDecoder().raw_decode(written, written.index("{"))  # on stderr, the verdict line follows
    assert report["verdict"] == "incompatible"


def test_a_report_to_dev_stdout_appended_to_a_log_keeps_the_log(pair, tmp_path):
    """`-o /dev/stdout >> ci.log` replaced ci.log with the report: /dev/stdout was followed to the log's name, and
    the log replaced atomically as a report file is. It is written through stdout, appended as `>>` asks."""
    log = tmp_path / "ci.log"
    log.write_text("earlier steps\n")
    with log.open("a") as appended:
        command = [sys.executable, "-m", "ckptdiff", *pair, "--format", "json", "-o", "/dev/stdout"]
        done = subprocess.run(command, stdout=appended, stderr=subprocess.PIPE, text=True, env=cli_env(tmp_path, None))
    assert done.returncode == 1, done.stderr
    text = log.read_text()
    assert text.startswith("earlier steps\n{\n") and json.loads(text.removeprefix("earlier steps\n"))["verdict"]
