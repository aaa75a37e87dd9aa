"""A CI job's log is a command channel: GitHub's runner acts on a line that starts with ``::`` (once leading
spaces are trimmed) and on ``##[`` anywhere in a line. Tensor names and config keys come from the checkpoints, so
whatever ckptdiff prints (every format, stdout and stderr) holds no workflow command but its own annotations.
``runner_commands`` reads a log the way the runner does (actions/runner ``ActionCommand.TryParseV2``/``TryParse``).
"""

from __future__ import annotations

import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.generate import write_config, write_safetensors

#: The commands the runner knows (its command extensions and stop-commands).
RUNNER_COMMANDS = {
    "set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher", "remove-matcher", "debug",
    "warning", "error", "notice", "group", "endgroup", "echo", "stop-commands",
}  # fmt: skip


def _dropped(character: str) -> bool:
    """What the runner's trim skips, and what a culture-aware comparison may ignore (marks, format characters)."""
    return character.isspace() or unicodedata.category(character) in ("Mn", "Me", "Cf", "Cc", "Cn", "Co", "Cs")


def runner_commands(log: str) -> list[str]:
    """Every line of ``log`` the runner would act on, as the line (both forms; lines split at \\r and \\n, and at
    every other line break a reader might honour)."""
    found = []
    for line in log.splitlines():
        bare = "".join(c for c in line if not _dropped(c))
        if bare.startswith("::") and bare[2:].partition("::")[0].partition(" ")[0] in RUNNER_COMMANDS:
            found.append(line)
            continue
        _, legacy, rest = bare.partition("##[")
        if legacy and rest.partition("]")[0].partition(" ")[0] in RUNNER_COMMANDS:
            found.append(line)
    return found


def ours(line: str) -> bool:
    """An annotation ckptdiff wrote: ``::error title=ckptdiff…::…`` or ``::warning title=ckptdiff…::…``."""
    return line.startswith(("::error title=ckptdiff", "::warning title=ckptdiff"))


HOSTILE_NAMES = [
    "::stop-commands::ckptdiff-paused",
    "::add-mask::model.embed_tokens.weight",
    "::warning file=.github/workflows/release.yml,line=1::forged",
    "  ::error::after spaces",
    "\u00a0\u3000::error::after unicode spaces",
    "\u200b::error::after a zero-width space",
    ":\u0301:error::a mark between the colons",
    "%0A::error::percent-encoded newline",
    "x\n::error::after a newline",
    "x\r::error::after a carriage return",
    "x\u2028::error::after a line separator",
    "##[error]legacy form",
    "model.layers.0.##[add-mask]mid-line",
    "#\u200b#[stop-commands]legacy with a zero-width space",
]


#: A safetensors tensor name is printable (ckptdiff refuses others); a config key can be anything.
TENSOR_NAMES = [name for name in HOSTILE_NAMES if name.isprintable()]


def hostile_pair(tmp_path: Path) -> tuple[str, str]:
    """Two folders whose tensor names and config keys are the hostile names (A and B differ in every one, so every
    name shows up as mismatched, missing or extra, and every key as a config difference)."""
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, shape in ((a, [4]), (b, [8])):
        tensors = [(name, "F32", shape) for name in TENSOR_NAMES]
        tensors += [(f"{name}.only_in_{folder.name}", "F16", [2]) for name in TENSOR_NAMES[:3]]
        write_safetensors(folder / "model.safetensors", tensors)
        write_config(folder, {name: folder.name for name in HOSTILE_NAMES} | {"model_type": "llama"})
    return str(a), str(b)


@pytest.mark.parametrize("fmt", ["github", "table", "markdown", "json", "junit"])
def test_no_name_or_key_becomes_a_workflow_command_in_any_format(run_cli, tmp_path, fmt):
    a, b = hostile_pair(tmp_path)
    summary = tmp_path / "summary.md"
    result = run_cli(a, b, "--format", fmt, "--all", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 1, result.stderr
    commands = runner_commands(result.stdout) + runner_commands(result.stderr)
    assert all(ours(line) for line in commands), [line for line in commands if not ours(line)]
    assert bool(commands) == (fmt == "github")  # the github format's own annotations, and only those
    if fmt == "json":  # escaped the JSON way: the report still carries every name exactly
        names = {row["name"] for row in json.loads(result.stdout)["tensors"]}
        assert set(TENSOR_NAMES) <= names
    if fmt == "junit":
        ET.fromstring(result.stdout.split("\n", 1)[1])
    assert summary.read_text().startswith("## ")  # the step summary (markdown, not a command channel) is written


def test_the_table_shows_a_neutralised_name_escaped(run_cli, tmp_path):
    """In the table, the ``:`` or ``[`` that would make a command is shown escaped, as control characters are."""
    a, b = hostile_pair(tmp_path)
    lines = run_cli(a, b, "--all").stdout.splitlines()
    assert any(line.startswith(r"\x3a:stop-commands::ckptdiff-paused") for line in lines)
    assert any(line.startswith(r"##\x5berror]legacy form") for line in lines)


#: Names whose odd start the table shows as it is (``:``, ``-``, a space, a backslash) or escaped (``::``), a name
#: that puts ``##`` before the shape's ``[``, ones whose ``::`` or ``##[`` wrapping may bring to a line's start, and
#: one the verdict line names.
ODD_NAMES = [
    "::weird.weight",
    ":colon.weight",
    "-dash.weight",
    " space.weight",
    r"\tTab.weight",
    "end##",
    "##[error]legacy.weight",
    "model.layers.0.self_attn.::stop-commands::x.weight",
    "model.layers.0.self_attn.##[add-mask]mid.weight",
]


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_an_escaped_name_keeps_its_row_in_its_columns(run_cli, tmp_path, columns):
    """The table counts a guard's escape in its column's width: every row's cells start under their headers, and
    no line (the verdict's included) runs past the terminal's width."""
    for side, shape in (("a", [4, 8]), ("b", [4, 16])):
        write_safetensors(tmp_path / side / "model.safetensors", [(name, "F32", shape) for name in ODD_NAMES])
    result = run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--all", env={"COLUMNS": str(columns)})

    lines = result.stdout.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("tensor "))
    dashes = next(line for line in lines if line.startswith("------"))  # under the headers, wrapped or not
    starts = [found.start() for found in re.finditer(r"-+", dashes)]
    rows = [line for line in lines[header : lines.index("", header)] if "shape_mismatch" in line]
    assert len(rows) == len(ODD_NAMES) and max(map(len, lines[2:])) <= columns  # below the A: and B: paths
    for row in rows:
        assert row[starts[1] :].startswith(("[4, 8]", r"\x5b4, 8]")), row  # "end##" puts "##" before its "["
        assert row[starts[3] :].startswith("shape_mismatch"), row
    assert r"\x3a:weird.weight" in result.stdout and "\n:colon.weight " in result.stdout
    assert "\n space.weight " in result.stdout and "\n-dash.weight " in result.stdout
    assert runner_commands(result.stdout) == []
    report = tmp_path / "report.txt"  # a file is no log: its table shows the names as they are
    run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--all", "-o", str(report), env={"COLUMNS": str(columns)})
    assert "\n::weird.weight " in report.read_text() and r"\x3a" not in report.read_text()


def test_the_guard_leaves_the_colour_codes_alone(run_cli, tmp_path):
    """On a coloured terminal a name ending in ``##`` comes right before a colour code (the engine's headline ends
    with the name the loader has no parameter for): the guard reads the text, past the codes, and escapes none."""
    from fixtures.dflash_drafters import DRAFTER, drafter_tensors

    for side, extra in (("a", []), ("b", [("x##", "BF16", [4]), ("::y", "BF16", [4])])):
        write_config(tmp_path / side, DRAFTER)
        write_safetensors(tmp_path / side / "model.safetensors", drafter_tensors(DRAFTER) + extra)
    args = [str(tmp_path / "a"), str(tmp_path / "b"), "--engine", "vllm", "--color", "always"]

    result = run_cli(*args)

    output = result.stdout
    assert result.returncode == 1 and "\x1b" in output, output
    assert output.count("\x1b") == len(re.findall("\x1b\\[[0-9;]*m", output)), output
    headline = next(line for line in output.splitlines() if "vllm B: fails" in line)
    assert headline.endswith("x##\x1b[0m") and r"\x5b" not in headline
    assert "\n\\x3a:y " in output and runner_commands(output) == []  # the text itself is guarded as before


def test_the_guard_reads_past_colour_codes():
    from ckptdiff.errors import inert_in_ci_log

    assert inert_in_ci_log("x##\x1b[0m") == "x##\x1b[0m"
    assert inert_in_ci_log("\x1b[31m::add-mask::x\x1b[0m") == "\x1b[31m\\x3a:add-mask::x\x1b[0m"
    assert inert_in_ci_log("a##\x1b[31m[error]\x1b[0m") == "a##\x1b[31m\\x5berror]\x1b[0m"


def test_errors_and_usage_messages_quoting_a_name_are_inert(run_cli, tmp_path):
    """stderr is in the log too: a refusal that quotes an argument, a usage error, the verdict line with -o."""
    a, b = hostile_pair(tmp_path)
    for args in (
        ["./##[add-mask]x", b],
        [a, b, "--format", "##[stop-commands]x"],
        [a, b, "--ignore", "\n::add-mask::x", "--profile", "##[error]x"],
        [a, b, "-o", str(tmp_path / "report.json")],
    ):
        result = run_cli(*args)
        assert result.returncode in (1, 2) and result.stderr, args
        assert runner_commands(result.stderr) == [], (args, result.stderr)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(":#[] \t\n\r\u00a0\u200b\u0301\u2028xa-")), max_size=24))
def test_the_guard_leaves_no_command_in_any_text(text):
    from ckptdiff.errors import inert_in_ci_log

    for style in ("text", "json", "xml"):
        assert runner_commands(inert_in_ci_log(text, style)) == []


def test_the_guard_changes_nothing_else():
    from ckptdiff.errors import inert_in_ci_log

    report = "A: ./a\nB: ./b\n\nname  A  B  status\nfc.weight  [4] F32  [8] F32  shape_mismatch\n"
    assert inert_in_ci_log(report) == report
    assert inert_in_ci_log('{"name": "::x", "b": "##[y"}', "json") == '{"name": "::x", "b": "##\\u005by"}'
    assert inert_in_ci_log("<a n='x'>\n  ::x</a>", "xml") == "<a n='x'>\n  &#58;:x</a>"


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_the_convert_plan_names_no_workflow_command(run_cli, tmp_path, fmt):
    """`ckptdiff convert` prints the plan's tensor names too: guarded the same way, JSON still exact."""
    a, _ = hostile_pair(tmp_path)
    result = run_cli("convert", a, str(tmp_path / "out"), "--to", "vllm", "--plan", "--format", fmt)
    assert result.stdout and runner_commands(result.stdout) == [] and runner_commands(result.stderr) == []
    if fmt == "json":
        names = {tensor["name"] for tensor in json.loads(result.stdout)["tensors"]}
        assert {"::stop-commands::ckptdiff-paused", "##[error]legacy form"} <= names


def test_a_wrapped_line_is_escaped_before_it_is_measured():
    """The verdict and other wrapped lines: the guard's escape counts in the width, so the log's line keeps to it."""
    from ckptdiff.errors import inert_in_ci_log
    from ckptdiff.formats.layout import hang

    verdict = "incompatible: 2 errors (shape_mismatch ##[error]forged.weight, shape_mismatch ::x.weight)"
    for width in range(40, 100):
        for line in hang("", verdict, width, indent="  ", guard=True):
            assert inert_in_ci_log(line) == line and len(line) <= width, (width, line)
