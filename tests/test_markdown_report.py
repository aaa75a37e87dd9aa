"""The markdown report as a PR comment: rendered by GitHub's own renderer (cmarkgfm) and looked at in headless
Chromium at 1280×800 — the verdict and what fails it on screen without scrolling, failing rows before any match,
matches and info events folded, engine citations linked to the pinned files, and a 60,000-character budget
that a 1,500-difference pair stays under while naming every failing tensor."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from browser import body_data, dump_dom, screenshot

from ckptdiff.formats.collapse import expand_pattern
from fixtures.generate import HERE as FIXTURES

cmarkgfm = pytest.importorskip("cmarkgfm")

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")
BUDGET = 60_000


def github_html(markdown: str) -> str:
    """What GitHub makes of a comment: cmark-gfm with its extensions. Unsafe (raw HTML kept) as GitHub keeps the
    <details> and <summary> of a comment; the tag filter drops what GitHub drops."""
    from cmarkgfm.cmark import Options

    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


#: A page like a PR comment's column at 1280 px wide, with a probe that measures what a reader sees first.
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; }}
.comment {{ max-width: 880px; margin: 24px auto; padding: 16px; border: 1px solid #d0d7de; }}
table {{ border-collapse: collapse; display: block; overflow: auto; }}
td, th {{ border: 1px solid #d0d7de; padding: 6px 13px; }}
</style></head><body><div class="comment">{body}</div><script>
const box = (el) => el ? el.getBoundingClientRect() : null;
const verdict = document.querySelector("h2");
const reasons = verdict.nextElementSibling.nextElementSibling;
document.body.dataset.viewport = window.innerHeight;
document.body.dataset.verdictBottom = box(verdict).bottom;
document.body.dataset.reasonsBottom = box(reasons).bottom;
const rows = [...document.querySelectorAll("tr")];
const first = (list, re) => list.findIndex((tr) => re.test(tr.textContent));
document.body.dataset.firstFailing = first(rows, /❌/);
document.body.dataset.firstMatch = first(rows, /\\bmatch\\b/);
const visible = rows.filter((tr) => tr.checkVisibility());  // a folded <details> hides its rows
document.body.dataset.visibleMatches = visible.filter((tr) => /\\bmatch\\b/.test(tr.textContent)).length;
document.body.dataset.visibleRows = visible.length;
document.body.dataset.folded = [...document.querySelectorAll("details")].filter((d) => !d.open).length;
</script></body></html>"""


def look(markdown: str, folder: Path, name: str) -> tuple[dict[str, str], str]:
    """The comment rendered by cmarkgfm, loaded in Chromium at 1280×800: the probe's measurements, and the page."""
    page = folder / f"{name}.html"
    page.write_text(PAGE.format(body=github_html(markdown)), encoding="utf-8")
    return body_data(dump_dom(page)), str(page)


def test_a_failing_pair_puts_the_verdict_and_failing_row_first_and_folds_the_rest(run_cli, tmp_path: Path) -> None:
    markdown = run_cli(PUBLISHED, TWO_AUX, "--engine", "all", "--format", "md").stdout
    assert markdown.startswith("## ckptdiff: incompatible ❌\n\n**incompatible** — what fails the gate:\n\n")
    reasons = markdown.split("\n\n")[2].splitlines()
    assert reasons[0] == "- `fc.weight`: **shape_mismatch** — dim 1: 192 vs 128"
    assert "- vllm B **fails**: `aux_count_mismatch` (error)" in reasons

    rendered = github_html(markdown)
    # the failing row is the first row of the first table; every match is inside a folded <details>
    tables = re.findall(r"<table>.*?</table>", rendered, re.S)
    first_rows = re.findall(r"<tr>.*?</tr>", tables[0], re.S)
    assert "fc.weight" in first_rows[1] and "shape_mismatch" in first_rows[1]
    folded = re.findall(r"<details><summary>([^<]*)</summary>(.*?)</details>", rendered, re.S)
    summaries = [summary for summary, _ in folded]
    assert summaries == [
        "14 matching tensors",
        "18 info events (loaded as trained)",  # not the conditional captures (vLLM A's, SGLang A's): shown beside
        "1 info finding",
        "Parameters per dtype",
    ]
    matches_block = folded[0][1]
    assert matches_block.count("<tr>") == 15 and "norm.weight" in matches_block
    outside = rendered.replace(matches_block, "")
    assert not re.search(r"<td>match</td>", outside)

    # engine citations link to the engine's file at the pinned tag
    links = set(re.findall(r'href="([^"]+)"', rendered))
    assert (
        "https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
        in links
    )
    assert "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/models/llama_eagle3.py" in links
    assert all(
        link.startswith(
            (
                "https://github.com/vllm-project/vllm/blob/v0.33.0/",
                "https://github.com/sgl-project/sglang/blob/v0.5.23/",
                "https://github.com/NVIDIA/TensorRT-LLM/blob/",
                "#",
            )
        )
        for link in links
    )

    seen, page = look(markdown, tmp_path, "two-aux")
    viewport = float(seen["viewport"])
    assert 0 < float(seen["verdictBottom"]) < float(seen["reasonsBottom"]) <= viewport, seen
    # visible rows: the header, fc.weight, embed_tokens; the matches are folded away
    assert seen["firstFailing"] == "1" and int(seen["firstMatch"]) > 1, seen
    assert seen["visibleMatches"] == "0" and int(seen["folded"]) == 4, seen
    screenshot(Path(page), tmp_path / "two-aux.png")


def write_header_only(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file whose data region is a hole: the header is real, the size is set by truncate."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(len(text).to_bytes(8, "little") + text)
        handle.truncate(8 + len(text) + offset)


def pair_with_1500_differences(root: Path) -> tuple[str, str]:
    """60 layers × 25 experts whose down_proj shapes differ, each by its own amount (no two rows collapse: about
    150 characters a row, 225 kB as a plain table), and 180 attention weights that match."""
    a, b = {}, {}
    for layer in range(60):
        for expert in range(25):
            k = layer * 25 + expert
            name = f"model.layers.{layer}.mlp.experts.{expert}.down_proj.weight"
            a[name] = ("BF16", [64, 32 + k % 97])
            b[name] = ("BF16", [64, 33 + k % 97 + k // 97])
        for projection in ("q_proj", "k_proj", "v_proj"):
            a[f"model.layers.{layer}.self_attn.{projection}.weight"] = ("BF16", [64, 64])
            b[f"model.layers.{layer}.self_attn.{projection}.weight"] = ("BF16", [64, 64])
    write_header_only(root / "a" / "model.safetensors", a)
    write_header_only(root / "b" / "model.safetensors", b)
    return str(root / "a"), str(root / "b")


def named_tensors(markdown: str) -> set[str]:
    """Every tensor name the comment spells, patterns expanded (code spans only)."""
    return {name for span in re.findall(r"`([^`]+)`", markdown) for name in expand_pattern(span)}


def test_1500_differences_stay_under_the_budget_naming_every_failing_tensor(run_cli, tmp_path: Path) -> None:
    a, b = pair_with_1500_differences(tmp_path / "pair")
    full = json.loads(run_cli(a, b, "--format", "json").stdout)
    failing = {row["name"] for row in full["tensors"] if row["status"] != "match"}
    assert len(failing) == 1500 and full["verdict"] == "incompatible"

    result = run_cli(a, b, "--format", "md")
    markdown = result.stdout
    assert result.returncode == 1
    assert len(markdown) <= BUDGET
    assert markdown.startswith("## ckptdiff: incompatible ❌\n\n**incompatible** — what fails the gate:\n\n")
    # the reasons name them all already, as one pattern
    assert "- **shape_mismatch** (1,500): `model.layers.{0..59}.mlp.experts.{0..24}.down_proj.weight`" in markdown
    # it says it was cut, what it left out, and where the full report is
    note = next(line for line in markdown.splitlines() if line.startswith("> **Shortened**"))
    assert "180 matching tensors" in note and "--format json" in note and "verdict is the whole report's" in note
    # every failing tensor is named in the Differences section, with the first rows in full
    differences = markdown.split("### Differences", 1)[1].split("### config.json", 1)[0]
    assert failing <= named_tensors(differences)
    assert "| `model.layers.0.mlp.experts.0.down_proj.weight` | \\[64, 32] BF16 " in differences.replace("  ", " ")

    seen, page = look(markdown, tmp_path, "p1500")
    assert float(seen["reasonsBottom"]) <= float(seen["viewport"]), seen
    assert seen["firstFailing"] == "1" and seen["firstMatch"] == "-1", seen  # matches are counted, not listed
    screenshot(Path(page), tmp_path / "p1500.png")


def test_names_that_share_no_pattern_are_counted_where_they_no_longer_fit(run_cli, tmp_path: Path) -> None:
    """2,500 failing names with no index in common and 90 characters each (225 kB of names alone): the report
    names as many as fit, counts the rest, and keeps the verdict."""
    a = {f"block_{i:04d}_{'x' * 80}.weight": ("F16", [4]) for i in range(2500)}
    b = {name: ("F16", [8]) for name in a}
    write_header_only(tmp_path / "a" / "m.safetensors", a)
    write_header_only(tmp_path / "b" / "m.safetensors", b)
    markdown = run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--format", "md").stdout
    assert len(markdown) <= BUDGET and markdown.startswith("## ckptdiff: incompatible ❌")
    counted = re.search(r"- \*\*shape_mismatch\*\* \(2,500\): .*, and ([0-9,]+) more$", markdown, re.M)
    assert counted is not None
    named = {name for name in named_tensors(markdown) if name.startswith("block_")}
    assert len(named) + int(counted[1].replace(",", "")) == 2500


def test_a_budget_with_no_room_left_for_names_counts_them_without_an_empty_list() -> None:
    from ckptdiff import RenderOptions, compare, render

    markdown = render(compare(PUBLISHED, TWO_AUX, engines=["vllm"]), "markdown", RenderOptions(budget=500))
    assert "- **shape_mismatch** (1): `fc.weight`" in markdown  # the verdict names it
    differences = markdown.split("### Differences", 1)[1].split("###", 1)[0]
    assert differences == "\n\n1 tensor differs (failing first):\n\n- **shape_mismatch** (1)\n\n"
    assert "the shapes and notes of the failing rows;" in markdown and "the first 0" not in markdown


def test_a_compatible_pair_is_short_and_says_so_first(run_cli, tmp_path: Path) -> None:
    markdown = run_cli(PUBLISHED, str(FIXTURES / "kimi-k25-eagle3-ours"), "--format", "md").stdout
    assert markdown.startswith("## ckptdiff: compatible ✅\n\n**compatible**: 15 match, 1 injected.\n")
    assert "Shortened" not in markdown
    rendered = github_html(markdown)
    assert "<summary>15 matching tensors</summary>" in rendered
    assert html.unescape(rendered).count("embed_tokens.weight") >= 1


def test_only_diffs_leaves_matches_out_and_says_so(run_cli) -> None:
    markdown = run_cli(PUBLISHED, TWO_AUX, "--format", "md", "--only-diffs").stdout
    assert "_14 matching tensors not listed (--only-diffs)._" in markdown and "<summary>14 matching" not in markdown


def test_a_conditional_verdict_says_its_condition_beside_the_engine_not_folded(run_cli) -> None:
    markdown = run_cli(PUBLISHED, "--engine", "vllm", "--engine", "sglang", "--format", "md").stdout
    rendered = html.unescape(github_html(markdown))
    folded = "".join(re.findall(r"<details>.*?</details>", rendered, re.S))
    assert "a 61-layer model of any class it knows" in rendered
    assert "aux_capture_conditional" not in folded  # the one notice that says on which targets "loads" holds
    assert "from_target" in folded  # the other info events stay folded


def test_a_side_of_one_tensor_is_counted_in_words(run_cli, tmp_path: Path) -> None:
    """The sides' totals said "1 file(s), 1 tensors, 1 parameters" (markdown and HTML alike)."""
    from fixtures.generate import write_safetensors

    write_safetensors(tmp_path / "one.safetensors", [("w", "BF16", [1])])
    one = str(tmp_path / "one.safetensors")
    markdown = run_cli(one, one, "--format", "markdown").stdout
    assert f"- **A**: `{one}` — 1 file, 1 tensor, 1 parameter, 2 B" in markdown
    page = run_cli(one, one, "--format", "html").stdout
    assert f"<code>{html.escape(one)}</code> — 1 file, 1 tensor, 1 parameter, 2 B</li>" in page
    two = run_cli(PUBLISHED, TWO_AUX, "--format", "markdown").stdout
    assert "— 1 file, 15 tensors, 89.60K parameters, 175.50 KiB" in two
