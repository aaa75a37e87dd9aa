"""Each format's one escaping function makes outside text inert: markdown (checked by rendering it with
markdown-it-py), JUnit XML (parsed back) and the terminal table (no control characters)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints
from ckptdiff.formats import render
from ckptdiff.formats.junit import escape as xml_escape
from ckptdiff.formats.markdown import escape as md_escape
from ckptdiff.policy import Policy

MARKUP = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](https://evil.example)",
    "![img](https://evil.example/x.png)",
    "<https://evil.example>",
    "https://evil.example/a",
    "www.evil.example",
    "mail@evil.example",
    "@octocat",
    "`",
    "``",
    "|",
    "\\|",
    "&amp;",
    "&#60;b&#62;",
    "*em*",
    "~~s~~",
    "\n",
    "\r\n# heading\n",
    "\x1b[2J",
    "\x07",
    "\u202e",
    "\ud800",
    "\x00",
]
outside_text = st.lists(
    st.one_of(st.sampled_from(MARKUP), st.text(max_size=8), st.characters(codec=None)), max_size=8
).map("".join)

GFM = MarkdownIt("gfm-like", {"html": True, "linkify": False})
MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9]")
EMAIL = re.compile(r"\w@[\w-]+\.\w")


def inline_html_links_and_text(markdown: str) -> tuple[list[str], list[str], list[str]]:
    """The raw HTML, links and plain text a GFM renderer makes of ``markdown``."""
    html, links, texts = [], [], []
    for token in GFM.parse(markdown):
        if token.type == "html_block":
            html.append(token.content)
        for child in token.children or []:
            if child.type == "html_inline":
                html.append(child.content)
            elif child.type in ("link_open", "image"):
                links.append(str(child.attrs))
            elif child.type == "text":
                texts.append(child.content)
    return html, links, texts


@settings(max_examples=300, deadline=None)
@given(outside_text)
@example("_<script>alert(1)</script>_@0")  # the emphasis ends at "_" and left "@0" a mention (hypothesis, once)
@example("a_b_@user")
def test_markdown_text_renders_as_the_same_characters_and_nothing_else(text: str) -> None:
    for escaped in (md_escape(text), md_escape(text, table=True)):
        html, links, texts = inline_html_links_and_text(f"- **info** note: {escaped}")
        assert html == [] and links == []
        assert not any(MENTION.search(part) or EMAIL.search(part) for part in texts)
        # GFM's extended autolinks start at a scheme's "://" or "www.": in the source, each is broken by an escape
        assert not re.search(r"(?i)[a-z0-9]://|www\.", escaped)


@settings(max_examples=300, deadline=None)
@given(outside_text)
def test_markdown_code_spans_hold_the_text_and_keep_table_columns(text: str) -> None:
    cell = md_escape(text, code=True, table=True)
    table = f"| name | status |\n|---|---|\n| {cell} | match |\n"
    tokens = GFM.parse(table)
    cells = [t for t in tokens if t.type == "inline"]
    assert len(cells) == 4  # two headers, two cells: a "|" in the name shifts nothing
    codes = [c for c in cells[2].children or [] if c.type == "code_inline"]
    assert len(codes) == 1 and not [c for c in cells[2].children or [] if c.type == "html_inline"]


@settings(max_examples=300, deadline=None)
@given(outside_text)
def test_xml_escape_always_gives_a_well_formed_document(text: str) -> None:
    element = ET.Element("testcase", name=xml_escape(text))
    element.text = xml_escape(text)
    ET.fromstring(ET.tostring(element, encoding="unicode"))


#: ``<details><summary>14 matching tensors</summary>`` and ``</details>``: the markdown report's folds.
FOLDING = re.compile(r"<details><summary>[A-Za-z0-9 ,()]+</summary>|</details>")


def checkpoint(names: list[str]) -> Checkpoint:
    return Checkpoint("x", "local", "x", None, {n: TensorInfo(n, "F32", (4,), "m", (0, 16)) for n in names})


@settings(max_examples=60, deadline=None)
@given(st.lists(outside_text.filter(bool), min_size=1, max_size=4, unique=True))
def test_every_format_carries_hostile_names_inertly(names: list[str]) -> None:
    report = compare_checkpoints(
        checkpoint(names), checkpoint(names[1:]), policy=Policy(allow_missing=(names[0],), ignore=("@x|<y>",))
    )
    markdown = render(report, "markdown")
    html, links, texts = inline_html_links_and_text(markdown)
    # the only raw HTML is the report's own folding, whose summaries are its own words and counts
    assert all(FOLDING.fullmatch(block.strip()) for block in html), html
    assert links == [] and not any(MENTION.search(part) for part in texts)
    table = render(report, "table")
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", table)
    ET.fromstring(render(report, "junit").split("\n", 1)[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(outside_text.filter(bool), min_size=1, max_size=4, unique=True))
def test_json_carries_any_name_exactly(names: list[str]) -> None:
    import json

    report = compare_checkpoints(checkpoint(names), checkpoint(names))
    text = render(report, "json")
    text.encode("utf-8")  # lone surrogates come out escaped, so the report is always writable
    # JSON has one spelling for a high then a low surrogate, \ud800\udc00, and it means the character they pair
    # into: a name holding both (a pickle's key can) comes back with them joined, as any JSON reader sees it
    joined = [name.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass") for name in names]
    assert [row["name"] for row in json.loads(text)["tensors"]] == [joined[names.index(n)] for n in sorted(names)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("\\\t\nt n x0u")), max_size=6), min_size=2, max_size=2))
@example(["\t", "\\t"])
@example(["\\\n", "\\\\n"])
def test_two_names_never_look_the_same(pair: list[str]) -> None:
    """A name shown escaped reads one way: a tab is ``\\t``, a backslash and a ``t`` are ``\\\\t``."""
    from ckptdiff.errors import printable_name

    a, b = pair
    assert (printable_name(a) == printable_name(b)) == (a == b)
    assert printable_name(a).isprintable()


def test_a_backslash_and_t_and_a_tab_look_different_in_the_table_and_markdown() -> None:
    tab, backslash_t = "x\tTab.weight", "x\\tTab.weight"
    report = compare_checkpoints(checkpoint([tab, backslash_t]), checkpoint([]))

    table = render(report, "table").splitlines()
    assert any(line.startswith("x\\tTab.weight ") for line in table)  # the tab, escaped
    assert any(line.startswith("x\\\\tTab.weight ") for line in table)  # the backslash, doubled
    markdown = render(report, "markdown")
    assert "- `x\\tTab.weight`: **only_in_a**" in markdown and "- `x\\\\tTab.weight`: **only_in_a**" in markdown
