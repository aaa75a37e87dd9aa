"""Command-line arguments a careless script or a hostile caller passes: names longer than the file system allows,
empty strings (an unset ``$MODEL``). Each is one line naming the argument and exit 2, never "internal error"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env

from fixtures.generate import write_safetensors

#: A file name over Linux's 255-byte NAME_MAX: every lookup of it fails with ENAMETOOLONG.
TOO_LONG = "a" * 300


def checkpoint(folder: Path) -> Path:
    write_safetensors(folder / "model.safetensors", [("fc.weight", "F32", [4, 4])])
    (folder / "config.json").write_text(json.dumps({"hidden_size": 4}))
    return folder


def one_line(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    return result.stderr


@pytest.mark.parametrize("spec", [TOO_LONG, f"./{TOO_LONG}", f"/{TOO_LONG}", f"{TOO_LONG}/model.safetensors"])
def test_a_spec_too_long_for_the_file_system_is_one_line(tmp_path, run_cli, spec):
    model = checkpoint(tmp_path / "model")
    one_line(run_cli(spec, str(model)), "cannot be looked up: File name too long")
    one_line(run_cli(str(model), "--base", spec, "--engine", "vllm"), "File name too long")


@pytest.mark.parametrize("src", [TOO_LONG, f"/{TOO_LONG}"])
def test_convert_from_a_src_too_long_is_one_line(tmp_path, run_cli, src):
    one_line(run_cli("convert", src, str(tmp_path / "out"), "--to", "vllm"), "File name too long")
    assert not (tmp_path / "out").exists()


def test_convert_into_an_out_too_long_is_one_line(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    out = tmp_path / TOO_LONG
    one_line(run_cli("convert", str(model), str(out), "--to", "vllm"), "cannot be written: File name too long")


def test_a_report_name_too_long_is_one_line(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    one_line(run_cli(str(model), str(model), "-o", str(tmp_path / TOO_LONG)), "cannot write the report")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary left


def test_a_report_name_just_under_the_limit_is_written(tmp_path, run_cli):
    """Its temporary's name adds a prefix and a suffix: it must still fit the file system."""
    model = checkpoint(tmp_path / "model")
    report = tmp_path / ("r" * 250)
    result = run_cli(str(model), str(model), "-o", str(report))
    assert result.returncode == 0, result.stderr
    assert "compatible" in report.read_text()


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_spec_is_refused_not_read_as_the_current_folder(tmp_path, run_cli, empty):
    model = checkpoint(tmp_path / "model")
    # run from inside a checkpoint: read as ".", the empty spec would compare it
    one_line(run_cli(empty, str(model), cwd=model), "is empty: give a file, folder, Hub repo id or URL")
    one_line(run_cli(str(model), empty, cwd=model), "is empty")
    # --base "$BASE" with BASE unset: named by its option (it was "'': is empty"), for convert's --from-base too
    option_named = f"ckptdiff: --base {empty!r}: is empty (give a file, folder, Hub repo id or URL)\n"
    assert one_line(run_cli(str(model), str(model), "--base", empty, cwd=model)) == option_named
    assert one_line(run_cli("convert", str(model), "out", "--to", "vllm", "--base", empty, cwd=model)) == option_named
    from_base = run_cli("convert", str(model), "out", "--to", "vllm", "--base", str(model), "--from-base", empty)
    assert one_line(from_base).startswith(f"ckptdiff: --from-base {empty!r}: is empty")


def test_an_empty_report_name_names_the_flag(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    one_line(run_cli(str(model), str(model), "-o", ""), "-o '': is empty; give a file name for the report")
    one_line(run_cli(str(model), str(model), "--save", " "), "--save ' ': is empty; give a file name for the report")
    one_line(run_cli(str(model), str(model), "--config", ""), "--config '': is empty; give the config file's name")


def test_an_empty_values_only_glob_is_refused_before_anything_is_read(tmp_path, run_cli):
    """`--values-only "$NAMES"` with NAMES unset: one line naming the option, before A or B is read (B is missing
    here, and it is the option that is named) and before --values' own packages are looked for."""
    model = checkpoint(tmp_path / "model")
    for args in (["--values-only", ""], ["--values-only", "fc.weight", "--values-only", ""]):
        line = one_line(run_cli(str(model), str(tmp_path / "absent"), *args))
        assert line.startswith("ckptdiff: --values-only: '' is not a non-empty glob (give a tensor name or glob")


@pytest.mark.parametrize("option", ["--values-only", "--ignore", "--allow-missing", "--allow-extra"])
def test_a_blank_glob_is_refused_before_anything_is_read_as_an_empty_one_is(tmp_path, run_cli, option):
    """`--values-only "$NAMES"` with NAMES a space: no tensor name is blank, so the glob could match nothing; it is
    refused up front (B is missing here), not after both sides were read, nor silently kept as a rule that does
    nothing."""
    model = checkpoint(tmp_path / "model")
    line = one_line(run_cli(str(model), str(tmp_path / "absent"), option, " "))
    assert line.startswith(f"ckptdiff: {option}: ' ' is not a non-empty glob")


def test_a_report_onto_a_symlink_replaces_the_file_it_names_and_keeps_the_link(tmp_path, run_cli):
    """``-o latest.json`` where latest.json -> reports/run-42.json, as ``> latest.json`` would write it."""
    model = checkpoint(tmp_path / "model")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "run-42.json").write_text("old")
    (tmp_path / "latest.json").symlink_to(Path("reports", "run-42.json"))

    result = run_cli(str(model), str(model), "-o", str(tmp_path / "latest.json"))

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "latest.json").is_symlink()
    assert json.loads((tmp_path / "reports" / "run-42.json").read_text())["verdict"] == "compatible"


def test_a_bad_rename_rule_in_the_config_file_names_the_file_not_a_flag(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    (tmp_path / "ckptdiff.toml").write_text("rename = ['(?P<a>x)(?P<a>y)=z']\n")

    result = run_cli(str(model), str(model), cwd=tmp_path)

    line = one_line(result, f"{tmp_path / 'ckptdiff.toml'}: rename: '(?P<a>x)(?P<a>y)' is not a regular expression")
    assert not line.startswith("ckptdiff: --rename")


@pytest.mark.parametrize(
    ("side", "spec", "output", "extra"),
    [
        ("A", "a", "a/config.json", ()),  # was written over A's config.json, exit 0
        ("A", "a/model.safetensors", "a/model.safetensors", ("--format", "json")),
        ("B", "b", "b/model.safetensors.index.json", ("--format", "json")),  # a bogus index added to B
        ("B", "b", "b/config.json", ("--save",)),
    ],
    ids=["config", "weights", "new-index", "save"],
)
def test_a_report_onto_a_file_of_a_checkpoint_it_reads_is_refused(tmp_path, run_cli, side, spec, output, extra):
    checkpoint(tmp_path / "a")
    checkpoint(tmp_path / "b")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    specs = {"A": spec, "B": "b"} if side == "A" else {"A": "a", "B": spec}
    flag = ["--save", output] if extra == ("--save",) else ["-o", output, *extra]

    result = run_cli(specs["A"], specs["B"], *flag, cwd=tmp_path)

    one_line(result, f"{output}: would be {side}'s {Path(output).name} ({spec}): a report never replaces")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_report_beside_the_checkpoints_files_is_written(tmp_path, run_cli):
    model = checkpoint(tmp_path / "a")
    result = run_cli(str(model), str(model), "-o", str(model / "report.md"))
    assert result.returncode == 0 and "compatible" in (model / "report.md").read_text()


def test_convert_into_a_folder_that_is_a_file_says_so(tmp_path, run_cli):
    model = checkpoint(tmp_path / "model")
    (tmp_path / "notes.txt").write_text("mine\n")
    out = tmp_path / "notes.txt" / "out"
    one_line(
        run_cli("convert", str(model), str(out), "--to", "vllm"), f"{out}: its parent {out.parent} is not a folder"
    )
    one_line(
        run_cli("convert", str(model), str(tmp_path / "no" / "out"), "--to", "vllm"), "parent folder does not exist"
    )
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_debug_before_convert_runs_convert(tmp_path, run_cli):
    """`ckptdiff --debug convert ...` read "convert" as the comparison's A and refused --to."""
    from fixtures.generate import HERE as FIXTURES

    out = tmp_path / "out"
    result = run_cli(
        "--debug", "convert", str(FIXTURES / "kimi-k2-eagle3-published"), str(out), "--to", "vllm", "--plan"
    )

    assert result.returncode == 0, result.stderr
    assert "for: vLLM" in result.stdout and not out.exists()


@pytest.mark.parametrize(
    ("endpoint", "defect"),
    [
        ("http://[::1", "is not a URL (Invalid IPv6 URL)"),  # was a raw traceback, raised again while printed
        ("http://127.0.0.1:99999", "is not a URL (Port out of range 0-65535)"),  # was "internal error"
        ("file:///etc", "is not an http:// or https:// URL with a host"),
        ("", "is not an http:// or https:// URL with a host"),  # was "cannot reach , and ..."
    ],
)
def test_a_malformed_hf_endpoint_is_one_line_naming_it(tmp_path, run_cli_subprocess, endpoint, defect):
    model = checkpoint(tmp_path / "model")

    for spec in ("org/drafter", "https://huggingface.co/org/drafter"):
        result = run_cli_subprocess(spec, str(model), env={"HF_ENDPOINT": endpoint})
        one_line(result, f"ckptdiff: HF_ENDPOINT: {defect} (give the Hub's URL")

    # a run that needs no Hub is not stopped by it
    assert run_cli_subprocess(str(model), str(model), env={"HF_ENDPOINT": endpoint}).returncode == 0


def as_a_user(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ckptdiff ARGS`` in a process file modes apply to: root reads a ``chmod 000`` file unless it drops
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv does, for this process only)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv reads every file whatever its mode")
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", "--bounding-set", caps, "--inh-caps", caps]
    command = [*prefix, sys.executable, "-m", "ckptdiff", *args]
    return subprocess.run(command, capture_output=True, text=True, env=cli_env(tmp_path, None), cwd=tmp_path)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["locked/model.safetensors", "model"], "ckptdiff: locked/model.safetensors: cannot read: Permission denied\n"),
        (["locked", "model"], "ckptdiff: locked: cannot be listed: Permission denied\n"),
        (["model", "model", "--base", "locked"], "ckptdiff: locked: cannot be listed: Permission denied\n"),
        (["convert", "locked", "out", "--to", "vllm"], "ckptdiff: locked: cannot be listed: Permission denied\n"),
    ],
)
def test_an_unreadable_spec_is_one_line_naming_it(tmp_path, args, line):
    """Not click's usage error ("Path 'locked' is not readable" under "Usage: ..."): the reader's own line."""
    checkpoint(tmp_path / "model")
    locked = checkpoint(tmp_path / "locked")
    (locked / "model.safetensors").chmod(0)
    if "locked" in args:
        locked.chmod(0)
    try:
        result = as_a_user(tmp_path, *args)
    finally:
        locked.chmod(0o755)
        (locked / "model.safetensors").chmod(0o644)

    assert (result.returncode, result.stderr) == (2, line)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["-o", "--save"])
def test_a_report_into_a_read_only_folder_is_refused_before_anything_is_read(tmp_path, flag):
    """--save into a folder the user may not write printed the whole table, then failed at the end, exit 2 (and -o
    threw the run away): refused first, as a missing folder is. B does not exist: a run that read would blame it."""
    checkpoint(tmp_path / "model")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports").chmod(0o555)
    try:
        result = as_a_user(tmp_path, "model", "no-such-checkpoint", flag, "reports/report.json")
    finally:
        (tmp_path / "reports").chmod(0o755)

    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "ckptdiff: reports/report.json: cannot write the report: Permission denied\n"
    assert list((tmp_path / "reports").iterdir()) == []
