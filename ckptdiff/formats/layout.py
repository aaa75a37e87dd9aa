"""Terminal layout: text wrapped at the words of names, prose and paths, hanging paragraphs, and tables whose
columns fit a width (or, narrower, rows on lines of their own), with what a CI log's guard would escape escaped
before anything is measured."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from itertools import accumulate

from ..errors import inert_at, inert_in_ci_log, inert_marks

#: Paints a text in the colour of a key (a status, a severity), or leaves it as it is.
Painter = Callable[[str, str], str]
GAP = "  "
#: Notes shrink to this width before anything else wraps (narrower, they go under their row); names to this one.
NOTE_FLOOR = 24
NAME_FLOOR = 24


#: A tensor name breaks after a dot (never inside a ``{0..60}`` index set); prose after a space (never inside
#: a ``[64, 192]`` shape) or after a dot that a letter follows (a name it quotes; not ``1.00``); a line naming a
#: path or a repo (``SRC: /runs/exp-3/step-1200``) after a space (not in a shape) or a slash.
_NAME_WORDS = re.compile(r"(?:\{[^}]*\}|[^.{])+\.?|.")
_PROSE_WORDS = re.compile(r"(?:\[[0-9, ]*\]|[^\s.]|\.(?![A-Za-z_]))+(?:\.(?=[A-Za-z_]))?\s*|\.|\s+")
_PATH_WORDS = re.compile(r"\[[0-9, ]*\][^\s/]*\s*|[^\s/]*/+|[^\s/]+\s*|\s+")


def columns_of(text: str) -> int:
    """How many terminal columns ``text`` takes: a wide (CJK, emoji) character two, a combining mark or a
    zero-width one none, colour codes none."""
    if "\033" in text:
        text = re.sub(r"\033\[[0-9;]*m", "", text)
    if text.isascii():
        return len(text)
    return sum(_char_columns(c) for c in text)


def _char_columns(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def words(text: str, name: bool = False, path: bool = False) -> list[str]:
    return (_PATH_WORDS if path else _NAME_WORDS if name else _PROSE_WORDS).findall(text)


def wrap(text: str, width: int | None, name: bool = False, path: bool = False) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words; a word wider than the line is broken
    inside (:func:`_broken`), since a terminal would cut it anyway, without the indent."""
    if width is None or columns_of(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for word in (piece for whole in words(text, name, path) for piece in _broken(whole, width)):
        if line and columns_of((line + word).rstrip()) > width:
            lines.append(line.rstrip())
            line = word.lstrip()
        else:
            line += word
    return lines + [line.rstrip()] if line.strip() or not lines else lines


def _broken(word: str, width: int) -> list[str]:
    """A word wider than ``width`` in pieces that fit: after its slashes (a source path an event cites), then its
    dots (a tensor name's part), then, as the last resort, between characters (a 70-character name part at 40
    columns), never inside a colour code."""
    if columns_of(word.rstrip()) <= width:
        return [word]
    for pattern in (_PATH_WORDS, _NAME_WORDS):
        parts = pattern.findall(word)
        if len(parts) > 1:
            return [piece for part in parts for piece in _broken(part, width)]
    pieces, piece = [], ""
    for token in re.findall(r"\033\[[0-9;]*m|.", word, re.DOTALL):
        if piece and not token.startswith("\033") and columns_of(piece + token) > width:
            pieces.append(piece)
            piece = ""
        piece += token
    return [*pieces, piece]


def hang(
    first: str,
    text: str,
    width: int | None,
    indent: str | None = None,
    *,
    guard: bool = False,
    path: bool = False,
) -> list[str]:
    """``first`` + text wrapped to ``width``, continuation lines under ``indent``, measured in the columns a
    terminal shows (colour codes in ``text`` take none); ``path``: the text names a path, which may break after
    a ``/``.
    ``guard``: what the CI-log guard (:func:`.errors.inert_in_ci_log`) would escape in a line is escaped in the
    text, which is wrapped again, so the lines keep to the width."""
    indent = first if indent is None else indent
    while True:
        lines = _hang(first, text, width, indent, path)
        if not guard:
            return lines
        marks, offset = [], 0
        for number, line in enumerate(lines):
            prefix = len(first if number == 0 else indent)
            offset = text.find(line[prefix:], offset)
            if offset < 0:  # a line that is no piece of the text (not met): left to the guard as it is
                return lines
            marks += [offset + mark - prefix for mark in inert_marks(line) if mark >= prefix]
            offset += len(line) - prefix
        if not marks:
            return lines
        text = inert_at(text, marks)


def _hang(first: str, text: str, width: int | None, indent: str, path: bool) -> list[str]:
    if width is None or len(first) + columns_of(text) <= width:
        return [first + text]
    available = max(width - len(indent), 20)
    head, *rest = wrap(text, max(width - len(first), 20), path=path)
    if not rest:
        return [first + head]
    # wrap the text after the first line again at the continuation width (rejoining the lines would put a space
    # where a path was broken after a dot)
    remainder = text[len(head) :].lstrip() if text.startswith(head) else " ".join(rest)
    return [first + head] + [indent + line for line in wrap(remainder, available, path=path)]


def grid(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    shrink: Sequence[tuple[Sequence[int], int]] = (),
    names: Sequence[int] = (),
    paint_column: tuple[int, Sequence[str], Painter] | None = None,
    below: Sequence[Sequence[str]] = (),
    guard: bool = False,
) -> list[str]:
    """A plain table (headers, dashes, rows) that fits ``width``: the columns of each ``shrink`` stage in turn, the
    widest first, give up room down to the stage's floor (or their longest word) by wrapping their cells between
    words; ``names`` columns wrap after dots. ``below[i]``: lines printed under row ``i``. ``guard``: what the
    CI-log guard (:func:`.errors.inert_in_ci_log`) would escape in a printed line is escaped in its cell before
    the columns are measured, so that no escape pushes the rest of its line out of its columns."""
    # first what would start a line as it is, then what wrapping brings to a line's start or a "##" cell puts
    # before a "[" one (each round escapes more, so the rounds end)
    cells = [[_inert_cell(cell) if guard else cell for cell in row] for row in rows]
    while True:
        columns = list(zip(headers, *cells)) if cells else [(h,) for h in headers]
        widths = [max(map(columns_of, column)) for column in columns]
        if width is not None:
            widths = _fit(columns, widths, width, shrink, names)
        body = [[wrap(cell, widths[i], i in names) for i, cell in enumerate(row)] for row in cells]
        marked = [_inert_marks(row, pieces) for row, pieces in zip(cells, body)] if guard else []
        if not any(marked):
            break
        cells = [[inert_at(cell, marks.get(i, ())) for i, cell in enumerate(row)] for row, marks in zip(cells, marked)]
    lines = [_line([wrap(h, widths[i]) for i, h in enumerate(headers)], widths), GAP.join("-" * w for w in widths)]
    for number, pieces in enumerate(body):
        if paint_column is not None:
            column, keys, paint = paint_column
            pieces[column] = [paint(text.ljust(widths[column]), keys[number]) for text in pieces[column]]
        lines.append(_line(pieces, widths))
        lines += below[number] if number < len(below) else []
    return lines


def fits(lines: Sequence[str], width: int) -> bool:
    """Whether every printed line of ``lines`` (a grid's row may hold several) keeps to ``width``."""
    return all(_visible(part) <= width for line in lines for part in line.split("\n"))


def blocks(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    paths: Sequence[int] = (),
    guard: bool = False,
) -> list[str]:
    """A table for a terminal too narrow for its columns: each row as lines of its own, its first cell, then each
    other (non-empty) cell under it after its header (``  dtype    BF16``), continued under its text; ``paths``
    columns may break after a ``/``."""
    label = max(map(len, headers[1:]), default=0) + 2
    lines: list[str] = []
    for row in rows:
        lines += hang("", row[0], width, "  ", guard=guard)
        for i, (header, cell) in enumerate(zip(headers[1:], row[1:]), start=1):
            if cell:
                lines += hang(f"  {header:<{label}}", cell, width, " " * (label + 2), guard=guard, path=i in paths)
    return lines


def _inert_cell(cell: str) -> str:
    """A cell as it would read at the start of a line of the log (most have nothing the guard looks for)."""
    return inert_in_ci_log(cell) if ":" in cell or "#" in cell else cell


def _inert_marks(row: Sequence[str], pieces: Sequence[Sequence[str]]) -> dict[int, list[int]]:
    """Where the guard would escape a character in the printed lines of a row (its cells wrapped into
    ``pieces``), as positions in the cells, by column. The padding between cells is spaces, which the guard reads
    past, so the text of the cells alone decides."""
    found: dict[int, list[int]] = {}
    if not any(":" in cell or "#" in cell for cell in row):  # most rows: nothing the guard looks for
        return found
    # where each piece starts in its cell (wrapping drops only the spaces between words)
    at: list[list[int]] = []
    for cell, column in zip(row, pieces):
        starts, offset = [], 0
        for piece in column:
            offset = cell.index(piece, offset)
            starts.append(offset)
            offset += len(piece)
        at.append(starts)
    for k in range(max(map(len, pieces))):
        parts = [column[k] if k < len(column) else "" for column in pieces]
        line_starts = list(accumulate((len(part) + 1 for part in parts[:-1]), initial=0))
        for mark in inert_marks(" ".join(parts)):
            i = max(i for i, start in enumerate(line_starts) if start <= mark)
            found.setdefault(i, []).append(at[i][k] + mark - line_starts[i])
    return found


def _fit(
    columns: Sequence[Sequence[str]],
    widths: list[int],
    width: int,
    shrink: Sequence[tuple[Sequence[int], int]],
    names: Sequence[int],
) -> list[int]:
    """Take the excess a character at a time from the widest column of each stage in turn."""
    excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
    if excess <= 0:
        return widths
    shrinkable = {i for stage, _ in shrink for i in stage}
    smallest = {i: max(columns_of(w.strip()) for c in columns[i] for w in words(c, i in names)) for i in shrinkable}
    widths = list(widths)
    for stage, floor in shrink:
        while excess > 0:
            roomy = [i for i in stage if widths[i] > max(smallest[i], floor)]
            if not roomy:
                break
            widest = max(roomy, key=lambda i: widths[i])  # the first in the stage among equals
            widths[widest] -= 1
            excess -= 1
    return widths  # if still too wide, every word is as narrow as it goes: the terminal wraps the rest


def _line(cells: Sequence[Sequence[str]], widths: Sequence[int]) -> str:
    height = max(len(cell) for cell in cells)
    out = []
    for k in range(height):
        parts = [cell[k] if k < len(cell) else "" for cell in cells]
        out.append(GAP.join(_pad(part, w) for part, w in zip(parts, widths)).rstrip())
    return "\n".join(out)


def _visible(text: str) -> int:
    """How many columns ``text`` takes on screen (its colour codes none)."""
    return columns_of(text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(width - _visible(text), 0)


def grid_or_blocks(
    lines: list[str],
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    paths: Sequence[int] = (),
    paint_column: tuple[int, Sequence[str], Painter] | None = None,
    below: Sequence[Sequence[str]] = (),
    guard: bool = False,
) -> list[str]:
    """``lines`` (a :func:`grid` of ``headers`` and ``rows``) where they fit ``width``, else each row on lines of
    its own (:func:`blocks`; ``paint_column`` as :func:`grid` paints it), ``below[i]`` after row ``i``: a terminal
    narrower than the columns' longest words."""
    if width is None or fits(lines, width):
        return lines
    out: list[str] = []
    for number, row in enumerate(rows):
        if paint_column is not None:
            column, keys, paint = paint_column
            row = [*row[:column], paint(row[column], keys[number]), *row[column + 1 :]]
        out += blocks(headers, [row], width, paths=paths, guard=guard)
        out += below[number] if number < len(below) else []
    return out
