"""The documentation holds together: every relative link points to a file and heading that exist, every page is
one click from the manual's map, and the README stays a short front door whose set-up commands are what CI runs.

Heading anchors are computed the way GitHub renders them (lower case, punctuation dropped, spaces → hyphens,
``-1``, ``-2`` for repeats), so a link that works here works on the repository's page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *DOCS.glob("*.md")])
# Pages written on other branches of the same release; linked already, checked once they exist.
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for the lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[tuple[int, str]]:
    links = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(INLINE_CODE.sub("``", line)):  # a link inside inline code is an example
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked here
                links.append((number, target))
    return links


def broken_links(page: Path) -> list[str]:
    """``line: target: defect`` for each relative link of ``page`` whose file or heading does not exist."""
    problems = []
    for number, target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            problems.append(f"{number}: {target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{number}: {target}: no heading #{anchor} in {destination.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_points_to_an_existing_file_and_heading(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_checker_catches_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Sub section: `--flag` (two)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#sub-section---flag-two) [ok](#page)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) `[code](not-a-link.md)`\n"
        "```\n[fenced](also-not-a-link.md)\n```\n"
    )
    assert broken_links(page) == ["4: missing.md: no such file", "4: other.md#nowhere: no heading #nowhere in other.md"]


def test_github_slugs_of_the_headings_the_docs_use() -> None:
    assert github_slug("Specs: what A, B and `--base` can be") == "specs-what-a-b-and---base-can-be"
    assert github_slug("Shapes from each side's own config.json") == "shapes-from-each-sides-own-configjson"
    assert github_slug("`-o` never leaves half a report") == "-o-never-leaves-half-a-report"


def test_every_docs_page_is_one_click_from_the_map_and_the_readme() -> None:
    from_index = {target.partition("#")[0] for _, target in relative_links(DOCS / "index.md")}
    from_readme = {target.partition("#")[0] for _, target in relative_links(REPO / "README.md")}
    for page in DOCS.glob("*.md"):
        if page.name != "index.md":
            assert page.name in from_index, f"docs/index.md does not link to {page.name}"
            assert f"docs/{page.name}" in from_readme, f"README.md does not link to docs/{page.name}"
    assert "docs/index.md" in from_readme


def test_the_readme_is_a_short_front_door_with_the_commands_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "pip install -e . && ckptdiff fixtures/kimi-k2-eagle3-published fixtures/kimi-k25-eagle3-ours\n" in readme
    ci_test_command = next(
        line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("pip install -e")
    )
    assert ci_test_command + "\n" in readme


def test_contributings_layout_table_names_every_module() -> None:
    """CONTRIBUTING.md's layout table is complete: a top-level module by its path, a package by its folder's row,
    and every module in it (a nested package's too) by its file name in that row. A new module adds itself."""
    rows = [line for line in (REPO / "CONTRIBUTING.md").read_text().splitlines() if line.startswith("| `ckptdiff")]
    package = REPO / "ckptdiff"
    unnamed = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if path.parent == package:
            named = path.name == "__init__.py" or any(f"`{relative}`" in row for row in rows)
        else:
            parts = path.relative_to(REPO).parts
            folders = [f"{'/'.join(parts[:n])}/" for n in range(2, len(parts))]
            listed = [row for folder in folders for row in rows if row.startswith(f"| `{folder}`")]
            named = bool(listed) and (path.name == "__init__.py" or any(f"`{path.name}`" in row for row in listed))
        if not named:
            unnamed.append(relative)
    assert unnamed == []
