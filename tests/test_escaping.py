"""Each format's one escaping function makes outside text inert: markdown (checked by rendering it with
markdown-it-py), JUnit XML (parsed back) and the terminal table (no control characters)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
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
# the first name is a policy's glob too, which may not be blank (an unset variable's)
@given(st.lists(outside_text.filter(bool), min_size=1, max_size=4, unique=True).filter(lambda names: names[0].strip()))
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


#: A name holding a tab and one holding a backslash and a ``t``, as every table and sentence writes them.
TAB, BACKSLASH_T = "x\tTab.weight", "x\\tTab.weight"
SHOWN = {TAB: "x\\tTab.weight", BACKSLASH_T: "x\\\\tTab.weight"}


def test_a_note_quotes_a_name_as_its_row_writes_it_in_every_format() -> None:
    """Each name only on one side; its note suggests the other: ``did you mean B's x\\\\tTab.weight?``."""
    import json

    report = compare_checkpoints(checkpoint([TAB]), checkpoint([BACKSLASH_T]))
    rows = {TAB: ("only_in_a", "B", SHOWN[BACKSLASH_T]), BACKSLASH_T: ("only_in_b", "A", SHOWN[TAB])}
    for name, (status, side, other) in rows.items():
        note = f"did you mean {side}'s {other}? (same shape and dtype)"
        assert re.search(rf"^{re.escape(SHOWN[name])} .* {status}  {re.escape(note)}$", render(report, "table"), re.M)
        assert f"::{SHOWN[name]}: " in render(report, "github") and f"({note})" in render(report, "github")
        html = render(report, "html").replace("<wbr>", "")  # the text a reader sees
        assert f"<code>{SHOWN[name]}</code></td>" in html and f"<td>{note.replace(chr(39), '&#x27;')}</td>" in html
        junit = ET.fromstring(render(report, "junit").split("\n", 1)[1])
        (case,) = [case for case in junit.iter("testcase") if case.get("name") == SHOWN[name]]
        assert case.find("failure").get("message") == f"{status}: {note}"  # type: ignore[union-attr]
        # markdown as a renderer shows it: the name's code span and the note's escaped text read the same
        tokens = GFM.parse(render(report, "markdown"))
        texts = ["".join(c.content for c in t.children or []) for t in tokens if t.type == "inline"]
        assert f"{SHOWN[name]}: {status} — {note}" in texts  # what fails the gate
        at = texts.index(SHOWN[name])  # the table's row
        assert texts[at + 3 : at + 5] == [f"{status} ❌", note]
        # JSON: the name exactly, and the note's words as every format has them
        (document,) = [row for row in json.loads(render(report, "json"))["tensors"] if row["name"] == name]
        assert document["note"] == note


def test_a_finding_quotes_names_as_the_table_writes_them_in_every_format(run_cli, tmp_path) -> None:
    """``--values`` names the largest changes; ``--rename`` gave one of them an escape character."""
    import json

    np = pytest.importorskip("numpy")
    from safetensors.numpy import save_file

    for side, plus in (("a", 0), ("b", 1)):
        (tmp_path / side).mkdir()
        tensors = {BACKSLASH_T: np.arange(4, dtype=np.float32) + plus, "y.weight": np.ones(4, np.float32) + plus}
        save_file(tensors, str(tmp_path / side / "model.safetensors"))
    escape_y, shown_y = "\x1by.weight", "\\x1by.weight"
    args = (str(tmp_path / "a"), str(tmp_path / "b"), "--values", "--rename", "^y=\x1by", "-v")
    largest = f"largest: {shown_y} (rel L2 1, cos 1.000000, max |Δ| 1), {SHOWN[BACKSLASH_T]} (rel L2 0.535"

    table = run_cli(*args).stdout
    assert f"\n{shown_y} " in table and f"\n{SHOWN[BACKSLASH_T]} " in table and largest in table
    tokens = GFM.parse(run_cli(*args, "--format", "markdown").stdout)
    texts = ["".join(c.content for c in t.children or []) for t in tokens if t.type == "inline"]
    assert shown_y in texts and SHOWN[BACKSLASH_T] in texts and any(largest in text for text in texts)
    html = run_cli(*args, "--format", "html").stdout.replace("<wbr>", "")  # as a reader sees it
    assert f"<code>{SHOWN[BACKSLASH_T]}</code></td>" in html and largest in html
    junit = run_cli(*args, "--format", "junit").stdout
    assert f'name="{SHOWN[BACKSLASH_T]}"' in junit and largest in junit
    document = json.loads(run_cli(*args, "--format", "json").stdout)
    assert {row["name"] for row in document["tensors"]} == {BACKSLASH_T, escape_y}  # the names as they are
    (changed,) = [f for f in document["findings"] if f["code"] == "values_changed"]
    assert largest in changed["message"] and changed["params"]["largest"][0]["tensor"] == escape_y


def test_a_file_name_reads_the_same_in_the_report_in_its_findings_and_in_an_error_line(run_cli, tmp_path) -> None:
    import json

    from test_markdown_report import write_header_only

    folder = tmp_path / "x\\t\x1b"  # a backslash and a t, then an escape character
    shown = f"{tmp_path}/x\\\\t\\x1b"
    write_header_only(folder / "model.safetensors", {"w": ("F16", [4])})

    table = run_cli(str(folder), str(folder), "-v").stdout
    assert table.startswith(f"A: {shown}\n") and f"[config_missing] A ({shown}) has no config.json" in table
    document = json.loads(run_cli(str(folder), str(folder), "--format", "json").stdout)
    assert document["a"]["spec"] == str(folder)  # the name as it is; its words write it as the table does
    assert document["findings"][0]["message"] == f"A ({shown}) has no config.json; configs not compared"

    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    broken = run_cli(str(folder), str(folder))
    assert broken.returncode == 2 and broken.stderr.startswith(f"ckptdiff: {shown}/model.safetensors: header is not")


def test_an_error_line_quotes_a_tensor_name_as_a_report_writes_it(run_cli, tmp_path) -> None:
    import json

    from test_markdown_report import write_header_only

    shard, tensor = "x.safetensors", "w\\t"  # a backslash and a t
    write_header_only(tmp_path / "m" / shard, {"v": ("F16", [4]), tensor: ("F16", [4])})
    index = {"metadata": {}, "weight_map": {"v": shard}}  # w\t is stored but not listed
    (tmp_path / "m" / "model.safetensors.index.json").write_text(json.dumps(index))

    broken = run_cli(str(tmp_path / "m"), str(tmp_path / "m"))

    assert broken.returncode == 2
    assert "tensor 'w\\\\t' is in shard x.safetensors but not in the index" in broken.stderr


def test_a_results_repr_names_a_failing_tensor_as_the_table_does() -> None:
    from ckptdiff.result import Result

    result = Result.of(compare_checkpoints(checkpoint([TAB, BACKSLASH_T]), checkpoint([])))

    assert result.failing()[:2] == [f"{SHOWN[TAB]} only_in_a", f"{SHOWN[BACKSLASH_T]} only_in_a"]
    assert "\t" not in repr(result)
