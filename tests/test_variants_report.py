"""A side's drafter variants (the family spec's: MLA, EAGLE 3.1, multi-layer, an MTP layout) in every report
format, from the command line: codes in JSON, words in the others, nothing for a plain drafter."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from fixtures.generate import HERE as FIXTURES

K25_MLA = str(FIXTURES / "drafters" / "kimi-k2.5-eagle3-mla")
K26_MLA_31 = str(FIXTURES / "drafters" / "kimi-k2.6-eagle3.1-mla")
MULTI_LAYER = str(FIXTURES / "drafters" / "multi-layer-qwen3-8b")
PLAIN = str(FIXTURES / "kimi-k2-eagle3-published")
MTP_EXPORT = str(FIXTURES / "drafters" / "mtp-deepseek-v3-nextn-export")
MLA_WORDS = "MLA attention (DeepSeek-V2/V3, Kimi-K2.5)"
EAGLE31_WORDS = "EAGLE 3.1 (fc_norm, norm_before_fc or norm_output)"


def test_the_terminal_report_names_each_sides_variants(run_cli) -> None:
    done = run_cli(K25_MLA, K26_MLA_31)
    assert f"variant (A): {MLA_WORDS}\n" in done.stdout
    assert f"variant (B): {MLA_WORDS}; {EAGLE31_WORDS}\n" in done.stdout


def test_one_line_when_both_sides_are_the_same_variants(run_cli) -> None:
    done = run_cli(MULTI_LAYER, MULTI_LAYER)
    assert "variant (A and B): multi-layer (more than one decoder layer)\n" in done.stdout
    assert "variant (A):" not in done.stdout


def test_a_plain_drafter_has_no_variant(run_cli) -> None:
    done = run_cli(PLAIN, PLAIN, "--format", "json")
    report = json.loads(done.stdout)
    assert "variants" not in report["a"] and "variants" not in report["b"]
    # the line's label, not the word: a checkout's path may hold it (/work/variants/fixtures/...)
    assert not [line for line in run_cli(PLAIN, PLAIN).stdout.splitlines() if line.startswith("variant")]


def test_json_holds_the_codes(run_cli) -> None:
    report = json.loads(run_cli(K25_MLA, K26_MLA_31, "--format", "json").stdout)
    assert report["a"]["variants"] == ["mla"]
    assert report["b"]["variants"] == ["mla", "eagle3.1"]


def test_markdown_html_and_junit_say_them_in_words(run_cli) -> None:
    markdown = run_cli(K25_MLA, K26_MLA_31, "--format", "markdown").stdout
    assert f"- **variant** (B): {MLA_WORDS}; {EAGLE31_WORDS}" in markdown
    html = run_cli(K25_MLA, K26_MLA_31, "--format", "html").stdout
    assert f"<li><strong>variant</strong> (A): {MLA_WORDS}</li>" in html
    junit = ET.fromstring(run_cli(K25_MLA, K26_MLA_31, "--format", "junit").stdout)
    properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert properties["a.variants"] == MLA_WORDS
    assert properties["b.variants"] == f"{MLA_WORDS}; {EAGLE31_WORDS}"


def test_a_checkpoint_checked_on_its_own_names_its_mtp_layout(run_cli) -> None:
    done = run_cli(MTP_EXPORT, "--engine", "vllm")
    assert "variant (A): DeepSeek-V3/GLM-4.5 MTP layers" in done.stdout
    assert "standalone MTP/NextN export" in done.stdout
    report = json.loads(run_cli(MTP_EXPORT, "--engine", "vllm", "--format", "json").stdout)
    assert report["a"]["variants"] == ["nextn_layers", "mtp_export"]
