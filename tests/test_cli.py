"""The command line, end to end, as the README shows it."""

from __future__ import annotations

import json

from fixtures.generate import HERE as FIXTURES

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")
NO_LM_HEAD = str(FIXTURES / "kimi-k2-eagle3-no-lm-head")


def test_compatible_pair_prints_the_table_and_exits_0(run_cli):
    result = run_cli(PUBLISHED, OURS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("kimi-k2-eagle3-published") and lines[1].endswith("kimi-k25-eagle3-ours")
    embed = next(line for line in lines if line.startswith("embed_tokens.weight"))
    assert "—" in embed and "[1024, 64] BF16" in embed and "injected" in embed
    assert not any(line.startswith("fc.weight") for line in lines)  # matches are a count line
    assert "15 tensors match (--all lists them)" in lines
    assert lines[-1] == "compatible: 15 match, 1 injected"
    assert result.stderr == ""

    everything = run_cli(PUBLISHED, OURS, "--all").stdout.splitlines()
    fc = next(line for line in everything if line.startswith("fc.weight"))
    assert fc.split()[1:] == ["[64,", "192]", "BF16", "[64,", "192]", "BF16", "match"]


def test_changed_fc_shape_exits_1_and_says_which_tensor_and_how(run_cli):
    result = run_cli(PUBLISHED, TWO_AUX)
    assert result.returncode == 1
    fc = next(line for line in result.stdout.splitlines() if line.startswith("fc.weight"))
    assert "[64, 192] BF16" in fc and "[64, 128] BF16" in fc and "shape_mismatch" in fc and "dim 1: 192 vs 128" in fc
    assert result.stdout.rstrip().endswith("incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected")


def test_one_drafter_checked_against_two_engines_names_the_random_head(run_cli):
    """README's --engine example: no lm_head.weight but draft_vocab_size set (sglang PR#27908)."""
    result = run_cli(NO_LM_HEAD, "--engine", "sglang", "--engine", "vllm")

    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "  sglang A: degraded — 1 weight random (lm_head.weight)" in lines
    assert any(line.startswith("  vllm A: degraded") for line in lines)
    assert any(line.startswith("    warning [lm_head_random] lm_head.weight is missing") for line in lines)
    # vLLM reads no nested SpecForge ids: its default capture is the trained one on a 61-layer DeepSeek-V2/V3
    # target, a condition without --base, not a warning
    assert lines[-1] == "incompatible: 2 warnings (sglang A lm_head_random, vllm A lm_head_from_target)"


def test_the_bundled_fixtures_are_what_generate_writes(tmp_path):
    from fixtures.generate import write_bundled

    for folder in write_bundled(tmp_path):
        for file in folder.iterdir():
            assert file.read_bytes() == (FIXTURES / folder.name / file.name).read_bytes(), file


def test_json_on_stdout(run_cli):
    result = run_cli(PUBLISHED, TWO_AUX, "--format", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["verdict"] == "incompatible"
    assert [t["name"] for t in document["tensors"]] == sorted(t["name"] for t in document["tensors"])
    fc = next(t for t in document["tensors"] if t["name"] == "fc.weight")
    assert fc == {
        "name": "fc.weight",
        "status": "shape_mismatch",
        "a": {"shape": [64, 192], "dtype": "BF16"},
        "b": {"shape": [64, 128], "dtype": "BF16"},
        "note": "dim 1: 192 vs 128",
    }


def test_output_file_format_follows_the_extension_and_is_written_before_exit_1(run_cli, tmp_path):
    report = tmp_path / "report.md"
    result = run_cli(PUBLISHED, TWO_AUX, "-o", str(report))
    assert result.returncode == 1 and result.stdout == ""
    text = report.read_text()
    assert text.startswith("## ckptdiff: incompatible")
    assert "| `fc.weight`" in text and "### config.json differences" in text and "<summary>Parameters per dtype" in text

    as_json = tmp_path / "report.json"
    assert run_cli(PUBLISHED, OURS, "-o", str(as_json)).returncode == 0
    assert json.loads(as_json.read_text())["verdict"] == "compatible"


def test_markdown_is_self_contained(run_cli):
    text = run_cli(PUBLISHED, OURS, "--format", "markdown").stdout
    sections = [line for line in text.splitlines() if line.startswith("#")]
    assert sections == [
        "## ckptdiff: compatible ✅",
        "### Differences",
        "### config.json differences",
        "### Findings",
    ]
    assert "<details><summary>15 matching tensors</summary>" in text
    assert "<details><summary>Parameters per dtype</summary>" in text
    assert "**compatible**: 15 match, 1 injected." in text
    assert "| BF16 " in text and "| `max_position_embeddings` | `131072` | `262144` | differs" in text


def test_trouble_exits_2_with_one_line(run_cli, tmp_path):
    missing = run_cli(PUBLISHED, str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [f"ckptdiff: {tmp_path / 'nope'}: no such file or folder"]

    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    result = run_cli(PUBLISHED, str(broken))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"ckptdiff: {broken}: header is not valid JSON")

    usage = run_cli(PUBLISHED)
    assert usage.returncode == 2 and "Missing argument" in usage.stderr

    empty = run_cli(PUBLISHED, PUBLISHED, "--profile", "")  # not "auto" in disguise
    assert empty.returncode == 2 and "Invalid value for --profile: choose from auto, none" in empty.stderr


def test_python_dash_m_and_version(run_cli):
    from ckptdiff import __version__

    assert run_cli("--version").stdout.strip() == f"ckptdiff, version {__version__}"
    assert "Exit status: 0 compatible, 1 incompatible, 2 trouble" in " ".join(run_cli("--help").stdout.split())


def test_the_in_process_runner_sees_what_a_real_process_does(run_cli, run_cli_subprocess, tmp_path):
    """``python -m ckptdiff`` in a process of its own and the in-process runner the other tests use agree, exit
    code and every byte of stdout and stderr, for a pass, a failure, trouble and a usage error."""
    for args in (
        (PUBLISHED, OURS),
        (PUBLISHED, TWO_AUX, "--format", "json"),
        (PUBLISHED, str(tmp_path / "missing")),
        (PUBLISHED, OURS, "--format", "nope"),
    ):
        real, in_process = run_cli_subprocess(*args), run_cli(*args)
        assert (real.returncode, real.stdout, real.stderr) == (
            in_process.returncode,
            in_process.stdout,
            in_process.stderr,
        ), args


def test_a_report_over_a_mebibyte_is_written_whole_to_a_file_and_to_stdout(run_cli, tmp_path):
    from test_markdown_report import write_header_only

    # names outside ASCII: the report is written in pieces of characters, each encoded on its own
    tensors = {f"model.layers.{i}.mlp.ëxperts.{i % 7}.wëight": ("BF16", [4, 8]) for i in range(12_000)}
    write_header_only(tmp_path / "a.safetensors", tensors)
    report = tmp_path / "report.json"
    to_file = run_cli(str(tmp_path / "a.safetensors"), str(tmp_path / "a.safetensors"), "-o", str(report))
    to_stdout = run_cli(str(tmp_path / "a.safetensors"), str(tmp_path / "a.safetensors"), "--format", "json")
    assert to_file.returncode == to_stdout.returncode == 0
    text = report.read_text(encoding="utf-8")
    assert len(text) > 2**20 and text == to_stdout.stdout
    assert len(json.loads(text)["tensors"]) == 12_000
