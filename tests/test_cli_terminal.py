"""The terminal report and the command line's conventions, as docs/usage.md shows them: width, order, verbosity,
colour, formats and their spellings, the verdict on stderr, mistakes caught, writes that fail, --help."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_kimi_k2_base, write_safetensors

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")
NO_LM_HEAD = str(FIXTURES / "kimi-k2-eagle3-no-lm-head")
ANSI = re.compile(r"\033\[[0-9;]*m")

# --- the width of the terminal ------------------------------------------------------------------------------

RUNS = [(PUBLISHED, OURS, "--all"), (PUBLISHED, TWO_AUX, "--all", "-v"), (NO_LM_HEAD, "--engine", "all", "-v")]


def words_of(text: str) -> set[str]:
    """Every word of a report, and each piece a tensor name may wrap into (it breaks only after a dot)."""
    found = set()
    for word in text.split():
        cuts = [0, *(match.end() for match in re.finditer(r"\.", word)), len(word)]
        found.update(word[i:j] for n, i in enumerate(cuts) for j in cuts[n + 1 :])
    return found


@pytest.mark.parametrize("args", RUNS, ids=["compatible", "two-aux", "engines"])
@pytest.mark.parametrize("columns", [80, 120])
def test_the_report_fits_the_terminal_and_breaks_no_word(run_cli, args, columns):
    wide = run_cli(*args)  # no terminal, no COLUMNS: lines as long as they are
    narrow = run_cli(*args, env={"COLUMNS": str(columns)})

    assert narrow.returncode == wide.returncode
    assert max(map(len, wide.stdout.splitlines())) > columns
    assert max(map(len, narrow.stdout.splitlines())) <= columns
    assert {w for w in narrow.stdout.split() if set(w) != {"-"}} <= words_of(wide.stdout)  # between words only
    verdict = narrow.stdout.split("\n\n")[-1]
    assert verdict.startswith(("compatible: ", "incompatible: ")) and " ".join(verdict.split()) in wide.stdout


@pytest.mark.parametrize("columns", [40, 50])
def test_a_terminal_too_narrow_for_the_tensor_table_lists_each_tensor_on_lines_of_its_own(run_cli, columns):
    wide = run_cli(PUBLISHED, OURS, "--all")
    narrow = run_cli(PUBLISHED, OURS, "--all", env={"COLUMNS": str(columns)})

    lines = narrow.stdout.splitlines()
    assert max(map(len, lines)) <= columns
    body = narrow.stdout.split("\n\n", 1)[1]  # past the A:/B: lines, whose paths break after a slash
    assert {w for w in body.split() if set(w) != {"-"}} <= words_of(wide.stdout)
    at = lines.index("embed_tokens.weight")  # the row's name, then each cell under it after its header
    assert [line.split(None, 3)[-1] for line in lines[at + 1 : at + 4]] == ["—", "[1024, 64] BF16", "injected"]
    assert lines[at + 4].startswith("    frozen: ")  # its note under it


@pytest.mark.parametrize("columns", [40, 44])
def test_at_40_columns_no_line_is_wider_than_the_terminal(run_cli, tmp_path, columns):
    """What no word boundary brings under the width breaks inside: the MTP variant line, engine citations' source
    paths (after a slash), an option with its list (``eagle_aux_hidden_state_layer_ids=[2, 30, 58]):``), a tensor
    name's 76-character part; every character is kept, in its order."""
    from ckptdiff.formats.layout import columns_of

    long_part = "rotary_embedding_inverse_frequency_buffer_for_long_context_scaling_factor_v2"
    write_safetensors(tmp_path / "a" / "model.safetensors", [(f"model.layers.0.{long_part}", "F32", [2, 2])])
    write_safetensors(tmp_path / "b" / "model.safetensors", [(f"model.layers.0.{long_part}", "F32", [2, 3])])
    mtp = [str(FIXTURES / "drafters" / name) for name in ("mtp-deepseek-v3", "mtp-deepseek-v3-dropped")]
    runs = [
        (*mtp, "-v", "--engine", "all"),
        (PUBLISHED, TWO_AUX, "-v", "--engine", "all", "--base", str(FIXTURES / "drafters" / "bases" / "kimi-k2")),
        (str(tmp_path / "a"), str(tmp_path / "b")),
    ]
    for args in runs:
        wide = run_cli(*args, "--color", "never")
        narrow = run_cli(*args, "--color", "never", env={"COLUMNS": str(columns)})
        assert narrow.returncode == wide.returncode
        assert max(map(columns_of, narrow.stdout.splitlines())) <= columns, args
        head, wide_head = (text.split("\n\n", 1)[0] for text in (narrow.stdout, wide.stdout))
        assert "".join(head.split()) == "".join(wide_head.split())  # the A:, B:, profile and variant lines
        if "--engine" in args:  # the engines' text, hung under its lines: the same characters in the same order
            tail, wide_tail = (text[text.index("\nengines:") :] for text in (narrow.stdout, wide.stdout))
            assert "".join(tail.split()) == "".join(wide_tail.split())
    assert f"model.layers.0.{long_part}" in "".join(narrow.stdout.split())


def test_a_terminal_too_narrow_for_the_config_table_lists_each_key_on_lines_of_its_own(run_cli):
    lines = run_cli(PUBLISHED, OURS, env={"COLUMNS": "40"}).stdout.splitlines()

    assert max(map(len, lines)) <= 40
    at = lines.index("max_position_embeddings")
    assert [line.split() for line in lines[at + 1 : at + 4]] == [
        ["A", "131072"],
        ["B", "262144"],
        ["status", "differs"],
    ]


def test_names_of_wide_characters_keep_the_columns_aligned(run_cli, tmp_path):
    from unicodedata import east_asian_width

    from fixtures.generate import write_safetensors

    names = ["model.权重.weight", "emoji😀.weight", "ünïcødé.weight", "plain.weight"]
    write_safetensors(tmp_path / "a" / "model.safetensors", [(n, "BF16", [4, 4]) for n in names])
    write_safetensors(tmp_path / "b" / "model.safetensors", [(n, "F16", [4, 4]) for n in names])

    lines = run_cli(str(tmp_path / "a"), str(tmp_path / "b"), env={"COLUMNS": "120"}).stdout.splitlines()

    def column_of(line: str, text: str) -> int:  # where ``text`` starts on screen: a wide character takes two
        before = line[: line.index(text)]
        return sum(2 if east_asian_width(c) in ("W", "F") else 1 for c in before)

    rows = [line for line in lines if line.startswith(tuple(names))]
    assert len(rows) == 4 and len({column_of(row, "[4, 4] BF16") for row in rows}) == 1, rows


def test_a_long_path_wraps_after_a_slash_under_its_label(run_cli, tmp_path):
    deep = tmp_path / "a-very-long-folder-name-for-the-published-kimi-k2-drafter" / "and-a-second-level-folder"
    shutil.copytree(PUBLISHED, deep)

    lines = run_cli(str(deep), OURS, env={"COLUMNS": "80"}).stdout.splitlines()

    head = lines[: next(n for n, line in enumerate(lines) if line.startswith("B: "))]
    assert len(head) > 1 and max(map(len, head)) <= 80
    assert head[0].startswith("A: ") and all(line.startswith("   ") for line in head[1:])
    assert all(line.endswith("/") for line in head[:-1])
    assert "".join(line[3:] for line in head) == str(deep)


def test_wide_and_combining_characters_in_names_keep_the_columns_aligned(run_cli, tmp_path):
    """A terminal shows 中 two columns wide and the accent of e\u0301 in none: the next column starts where it
    starts for an ASCII name."""
    names = ["abc.w", "中文.权重", "e\u0301.w"]  # 5, 9 and 3 columns on screen
    write_safetensors(tmp_path / "a.safetensors", [(name, "F32", [1]) for name in names])
    write_safetensors(tmp_path / "b.safetensors", [(name, "F32", [2]) for name in names])

    result = run_cli(str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"), "-q", env={"COLUMNS": "100"})

    lines = result.stdout.splitlines()
    name_column = len(lines[1].split()[0])  # its dashes: the widest name's columns, 9
    rows = {name: next(line for line in lines if line.startswith(name)) for name in names}
    for name, on_screen in zip(names, (5, 9, 3)):
        assert rows[name].index("[1] F32") == len(name) + (name_column - on_screen) + 2, rows[name]


def test_json_and_markdown_keep_the_full_text_whatever_the_width(run_cli):
    for fmt in ("json", "markdown"):
        assert run_cli(PUBLISHED, TWO_AUX, "--format", fmt, env={"COLUMNS": "80"}).stdout == (
            run_cli(PUBLISHED, TWO_AUX, "--format", fmt).stdout
        )


# --- order and verbosity ----------------------------------------------------------------------------------


def test_findings_are_grouped_by_severity_and_info_needs_v(run_cli):
    normal = run_cli(PUBLISHED, TWO_AUX).stdout
    assert "\nwarnings:\n  [aux_layer_ids_differ] " in normal
    assert "\n3 info findings (-v shows them)\n" in normal and "[max_position_differs]" not in normal

    verbose = run_cli(PUBLISHED, TWO_AUX, "-v").stdout
    warnings, info = verbose.index("\nwarnings:\n"), verbose.index("\ninfo:\n")
    assert warnings < info < verbose.index("[max_position_differs]")


def test_engine_info_events_need_v(run_cli):
    normal = run_cli(NO_LM_HEAD, "--engine", "all").stdout
    assert "[aux_ids]" not in normal and normal.count(" info events (-v shows them)\n") == 3
    assert "    warning [lm_head_random] " in normal
    # vLLM's and SGLang's captures are conditional on the target (shown without -v), TensorRT-LLM's is plain info
    assert run_cli(NO_LM_HEAD, "--engine", "all", "-v").stdout.count("    info [aux_capture_conditional] ") == 2


def test_quiet_shows_only_the_verdict_and_what_failed_it(run_cli):
    failing = run_cli(PUBLISHED, TWO_AUX, "-q")
    assert failing.returncode == 1 and failing.stderr == ""
    lines = failing.stdout.splitlines()
    assert lines[0].split() == ["tensor", "A", "shape", "dtype", "B", "shape", "dtype", "status", "note"]
    assert lines[2].startswith("fc.weight ") and "shape_mismatch" in lines[2]
    assert len(lines) == 5 and lines[3] == ""  # the failing row; not the injected one, warnings or the config
    assert lines[4] == "incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected"

    engines = run_cli(NO_LM_HEAD, "--engine", "sglang", "-q").stdout.splitlines()
    assert engines[:3] == ["engines:", "  sglang A: degraded — 1 weight random (lm_head.weight)", engines[2]]
    assert engines[2].startswith("    warning [lm_head_random] ") and engines[3:] == ["", engines[-1]]

    passing = run_cli(PUBLISHED, OURS, "-q")
    assert passing.returncode == 0 and passing.stdout == "compatible: 15 match, 1 injected\n"


def test_quiet_keeps_one_blank_line_between_failing_rows_and_failing_events(run_cli):
    both = run_cli(NO_LM_HEAD, TWO_AUX, "--engine", "vllm", "-q").stdout.splitlines()
    table_end = both.index("engines:") - 1
    assert both[table_end] == "" and both[table_end - 1].startswith("lm_head.weight ")


def test_the_verdict_counts_an_engine_event_met_again_instead_of_repeating_it(run_cli):
    """Each scale an MTP layer in BF16 lacks is one event: the verdict read "sglang A random_init, sglang A
    random_init, sglang A random_init, +5 more", which looks like a broken line and names three things as one."""
    mtp_in_bf16 = str(FIXTURES / "drafters" / "mtp-deepseek-v3-mtp-bf16")
    verdict = run_cli(mtp_in_bf16, "--engine", "sglang", "-q").stdout.splitlines()[-1]
    assert verdict == "incompatible: 2 errors (sglang A dtype_refused ×2), 8 warnings (sglang A random_init ×8)"


def test_the_verdict_names_the_first_failures_and_counts_the_rest(run_cli, tmp_path):
    base = write_kimi_k2_base(tmp_path / "base", layers=2, experts=4)
    result = run_cli(str(base), PUBLISHED, "-q")  # every base tensor is only_in_a, every drafter one only_in_b
    verdict = result.stdout.splitlines()[-1]
    assert re.fullmatch(r"incompatible: \d+ errors \((\w+ \S+, ){3}\+\d+ more\)", verdict), verdict


# --- colour -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {}, False),  # not a terminal
        ((), {"NO_COLOR": "", "FORCE_COLOR": "1"}, True),  # an empty NO_COLOR is not set (no-color.org)
        ((), {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
        (("--color", "always"), {"NO_COLOR": "1"}, True),
        (("--color", "never"), {"NO_COLOR": "", "FORCE_COLOR": "1"}, False),
        (("--format", "markdown"), {"NO_COLOR": "", "FORCE_COLOR": "1"}, False),  # only the table is coloured
    ],
)
def test_colour_follows_color_no_color_and_force_color(run_cli, args, env, coloured):
    result = run_cli(PUBLISHED, TWO_AUX, *args, env=env)
    assert bool(ANSI.search(result.stdout)) is coloured
    if coloured:
        assert "\033[31mshape_mismatch" in result.stdout and "\033[1;31mincompatible\033[0m:" in result.stdout
        assert ANSI.sub("", result.stdout) == run_cli(PUBLISHED, TWO_AUX, "--color", "never").stdout


@pytest.mark.parametrize("columns", ["80", "100"])
def test_colour_changes_no_line_of_a_narrow_table(run_cli, columns):
    """The severity's colour codes take no room on screen: a coloured event line wraps where the plain one does,
    not past the terminal's edge (at 80 columns "... reads only layers [1]" took 83)."""
    nextn_export = str(FIXTURES / "drafters" / "mtp-deepseek-v3-nextn-export")
    args = (nextn_export, "--engine", "vllm", "-v")
    coloured = run_cli(*args, "--color", "always", env={"COLUMNS": columns}).stdout
    plain = run_cli(*args, "--color", "never", env={"COLUMNS": columns}).stdout
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == plain
    if columns == "80":  # a headline too long for the line goes on under its outcome, not under the engine's name
        headline = "  vllm A: fails — MTP layer 1 not in the checkpoint; 16 weights random (model.\n"
        assert headline + "          layers.1.*); mtp_layer_unread\n" in plain


# --- formats, -o and the verdict on stderr ----------------------------------------------------------------


def test_md_is_markdown(run_cli, tmp_path):
    short, long = (run_cli(PUBLISHED, OURS, "--format", name).stdout for name in ("md", "markdown"))
    assert short.replace("--format md`", "--format markdown`") == long  # the footer quotes the command as typed
    (tmp_path / "ckptdiff.toml").write_text('format = "md"\n')
    assert run_cli(PUBLISHED, OURS, cwd=tmp_path).stdout.startswith("## ckptdiff: compatible")


def test_an_output_extension_that_names_no_format_is_refused(run_cli, tmp_path):
    target = tmp_path / "report.pdf"
    result = run_cli(PUBLISHED, OURS, "-o", str(target))
    assert result.returncode == 2 and result.stdout == "" and not target.exists()
    assert result.stderr == (
        f"ckptdiff: {target}: no report format is written as .pdf"
        " (give --format, or name it .htm, .html, .json, .markdown, .md, .txt, .xml)\n"
    )
    assert run_cli(PUBLISHED, OURS, "-o", str(target), "--format", "markdown").returncode == 0
    assert target.read_text().startswith("## ckptdiff: compatible")
    assert run_cli(PUBLISHED, OURS, "-o", str(tmp_path / "report")).returncode == 0  # no extension: the table


def test_with_o_the_verdict_still_reaches_stderr(run_cli, tmp_path):
    result = run_cli(PUBLISHED, TWO_AUX, "-o", str(tmp_path / "report.xml"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected\n"
    assert (tmp_path / "report.xml").read_text().startswith("<?xml")
    assert run_cli(PUBLISHED, TWO_AUX, "-o", "-").stderr == ""  # the report itself is on stdout


def test_github_annotations_are_escaped_as_the_runner_unescapes_them():
    from ckptdiff.formats.github import annotation

    line = annotation("error", "ckptdiff: a, b", "100% of\r\nx::y")
    assert line == "::error title=ckptdiff%3A a%2C b::100%25 of%0D%0Ax::y\n"
    assert line.count("\n") == 1


def test_the_github_format_is_annotations_then_the_table(run_cli):
    result = run_cli(NO_LM_HEAD, "--engine", "sglang", "--format", "github")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("::error title=ckptdiff%3A sglang A lm_head_random::lm_head.weight is missing")
    assert lines[1] == "::error title=ckptdiff::incompatible: 1 warning (sglang A lm_head_random)"
    assert lines[2] == f"A: {NO_LM_HEAD}"
    assert "\033" not in result.stdout


def test_github_with_o_keeps_the_annotations_in_the_log_and_the_file_in_its_format(run_cli, tmp_path):
    result = run_cli(PUBLISHED, TWO_AUX, "--format", "github", "-o", str(tmp_path / "ckptdiff.xml"))
    assert result.returncode == 1
    assert result.stdout.startswith("::error title=ckptdiff%3A shape_mismatch::fc.weight: ")
    assert all(line.startswith(("::error ", "::warning ")) for line in result.stdout.splitlines())
    assert (tmp_path / "ckptdiff.xml").read_text().startswith("<?xml")
    assert result.stderr == "incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected\n"


@pytest.mark.parametrize("where", ["--format", "ckptdiff.toml"])
def test_github_with_o_naming_no_format_is_refused_before_anything_is_read(run_cli, tmp_path, where):
    (tmp_path / "ckptdiff.toml").write_text('format = "github"\n' if where == "ckptdiff.toml" else "")
    fmt = ("--format", "github") if where == "--format" else ()
    target = tmp_path / "ckptdiff.log"
    result = run_cli(str(tmp_path / "no-such-drafter"), OURS, *fmt, "-o", str(target), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "" and not target.exists()
    assert result.stderr == (
        f"ckptdiff: {target}: no report format is written as .log (with --format github the annotations go to"
        " stdout and the file gets the format its extension names: .htm, .html, .json, .markdown, .md, .txt, .xml)\n"
    )


# --- mistakes caught --------------------------------------------------------------------------------------


def test_a_config_key_typo_gets_did_you_mean(run_cli, tmp_path):
    (tmp_path / "ckptdiff.toml").write_text('alow-missing = ["lm_head.*"]\n')
    result = run_cli(PUBLISHED, OURS, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.endswith(": alow-missing: is not a ckptdiff setting (did you mean allow-missing?)\n")


def test_a_gguf_file_is_named_with_what_ckptdiff_reads(run_cli, tmp_path):
    model = tmp_path / "model-q4_k_m.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    result = run_cli(str(model), OURS)
    assert result.returncode == 2
    assert result.stderr == (
        f"ckptdiff: {model}: is a GGUF (llama.cpp) file (ckptdiff reads safetensors files, folders and indexes,"
        " and torch .bin/.pt/.pth files)\n"
    )


# --- writing the report to stdout ------------------------------------------------------------------------


def with_stdout_closed(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ckptdiff ARGS | head -1`` where head has already left: the reader is gone before anything is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "ckptdiff", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, **(env or {})},
            timeout=120,
        )
    finally:
        os.close(write_end)


def test_a_closed_pipe_is_quiet():
    """No traceback, no "internal error", exit 2."""
    done = with_stdout_closed(PUBLISHED, TWO_AUX)
    assert done.returncode == 2
    assert done.stderr == ""


@pytest.mark.parametrize(
    "args",
    [("--help",), ("--version",), ("convert", "--help"), ("convert", PUBLISHED, "OUT", "--to", "sglang", "--plan")],
    ids=["help", "version", "convert-help", "convert-plan"],
)
def test_a_closed_pipe_is_exit_2_for_every_command(args):
    """click ends a run whose stdout closed with exit 1, which says "incompatible" (or "not converted")."""
    done = with_stdout_closed(*args)
    assert (done.returncode, done.stderr) == (2, "")


def test_a_closed_pipe_still_gets_the_report_files_written(tmp_path):
    """The reader of stdout left; the reports asked for as files are written all the same."""
    saved, summary, xml = tmp_path / "saved.json", tmp_path / "summary.md", tmp_path / "ckptdiff.xml"
    done = with_stdout_closed(PUBLISHED, TWO_AUX, "--save", str(saved), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert (done.returncode, done.stderr) == (2, "")
    assert json.loads(saved.read_text())["verdict"] == "incompatible"
    assert summary.read_text().startswith("## ckptdiff: incompatible")

    done = with_stdout_closed(PUBLISHED, TWO_AUX, "--format", "github", "-o", str(xml), "--no-step-summary")
    assert done.returncode == 2
    assert done.stderr == "incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected\n"
    assert xml.read_text().startswith("<?xml")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_full_disk_on_stdout_is_one_line_and_exit_2(buffered):
    """Buffered (Python's default): the rest left in stdout's buffer must not fail again at the interpreter's exit."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | (
        {} if buffered else {"PYTHONUNBUFFERED": "1"}
    )
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ckptdiff", PUBLISHED, OURS],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            env=env,
        )
    assert done.returncode == 2
    assert done.stderr == "ckptdiff: stdout: cannot write the report: No space left on device\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [["--help"], ["--version"], ["convert", str(PUBLISHED), "never-written", "--to", "sglang", "--plan"]],
    ids=["help", "version", "convert-plan"],
)
def test_what_click_prints_on_a_full_disk_is_one_line_and_exit_2(args):
    """click's own output, left in stdout's buffer by a successful run, fails only at the flush."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ckptdiff", *args], stdout=full, stderr=subprocess.PIPE, text=True, env=env
        )
    assert (done.returncode, done.stderr) == (2, "ckptdiff: stdout: cannot write: No space left on device\n")


# --- --help and shell completion ------------------------------------------------------------------------


def test_help_lists_options_in_groups_with_examples(run_cli):
    text = run_cli("--help").stdout
    headings = [line for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert headings == ["Sources:", "Comparison:", "Engines:", "Policy:", "Output:", "Other:"]
    sources, output = text.index("\nSources:\n"), text.index("\nOutput:\n")
    assert sources < text.index("  --offline ") < text.index("\nComparison:\n")
    assert output < text.index("  --color [auto|always|never]") < text.index("\nOther:\n")
    assert "Examples:\n    ckptdiff ./published ./ours\n" in text and "docs/index.md" in text


@pytest.fixture
def on_path(tmp_path) -> dict[str, str]:
    """An environment whose PATH has a ``ckptdiff`` launcher for this checkout (what an install puts there)."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    launcher = bin_folder / "ckptdiff"
    repo = Path(__file__).resolve().parent.parent
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH="{repo}" exec "{sys.executable}" -m ckptdiff "$@"\n')
    launcher.chmod(0o755)
    (tmp_path / "drafters" / "ours-step-100").mkdir(parents=True)
    (tmp_path / "drafters" / "ours-step-200").mkdir()
    return {"PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("words", "answer"),
    [
        ("ckptdiff drafters/ours-", "file,drafters/ours-"),  # a spec: the shell completes file names
        ("ckptdiff x --base drafters/o", "file,drafters/o"),
        ("ckptdiff x -o rep", "file,rep"),
        ("ckptdiff --for", "plain,--format"),
        # convert's own options and choices: they completed as file names, the comparison's A being "convert"
        ("ckptdiff convert src out --to s", "plain,sglang"),
        ("ckptdiff convert src out --pl", "plain,--plan"),
        ("ckptdiff convert src drafters/ours-", "file,drafters/ours-"),
    ],
)
def test_click_completion_hands_specs_and_files_to_the_shell(tmp_path, on_path, words, answer):
    env = {**os.environ, **on_path, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    env["_CKPTDIFF_COMPLETE"] = "bash_complete"
    done = subprocess.run(["ckptdiff"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.splitlines() == [answer]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_tab_completes_a_path_in_bash(tmp_path, on_path):
    """In a real bash (in tmux), with the completion script the docs show: Tab completes the folder's name."""
    session = f"ckptdiff-completion-{os.getpid()}"
    shell = f"env -i PATH={on_path['PATH']} HOME={tmp_path} TERM=xterm bash --norc --noprofile"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "10", "-c", str(tmp_path), shell])
    try:
        keys = ['eval "$(_CKPTDIFF_COMPLETE=bash_source ckptdiff)"', "Enter", "ckptdiff drafters/ours-step-1", "Tab"]
        screen = ""
        for key in keys:
            subprocess.run(["tmux", "send-keys", "-t", session, key], check=True)
        deadline = time.monotonic() + 120  # a guard against a hang, never reached by a slow machine
        while time.monotonic() < deadline:  # the completion runs a Python process: wait for the screen to show it
            capture = ["tmux", "capture-pane", "-p", "-t", session]
            screen = subprocess.run(capture, capture_output=True, text=True).stdout
            if "ckptdiff drafters/ours-step-100/" in screen:
                break
            time.sleep(0.1)
        assert "ckptdiff drafters/ours-step-100/" in screen, screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_a_wrapped_message_keeps_every_character_of_a_path_it_breaks():
    """The event lines of a coloured table: the severity's colour codes take no room on screen."""
    from ckptdiff.formats.layout import columns_of, hang

    label = "\033[31merror\033[0m"
    message = (
        "[aux_count_mismatch] 3 target hidden states are captured (its default three) but fc takes 2 x "
        "target_hidden_size=64: the fc matmul fails on the first forward [vllm-project/vllm@v0.33.0 "
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (get_eagle3_aux_layers_from_config)]"
    )
    for width in range(30, 120):
        lines = hang("    ", f"{label} {message}", width, indent="      ")
        # prose breaks at a space, a path after a dot or a slash, a word wider than the line inside it
        assert "".join("".join(lines).split()) == "".join(f"{label} {message}".split()), width
        assert all(columns_of(line) <= width for line in lines), (width, lines)
