"""Matching tensor names across two checkpoints: user renames, a profile's canonical naming, "did you mean".

Both sides are mapped to one naming before rows are matched: first the user's ``--rename REGEX=REPLACEMENT``
rules (in order), then the profile's canonical names. Each ``TensorInfo`` keeps its original name, so a row
can show what each side calls the tensor.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from .checkpoint import Checkpoint, TensorInfo
from .errors import CkptdiffError, printable, quoted_name
from .report import Finding, NotePart, TensorRow

if TYPE_CHECKING:
    from .families.model import Convention, Profile


class RenameRule(msgspec.Struct, frozen=True):
    """``--rename REGEX=REPLACEMENT``: ``re.sub`` on every tensor name of both sides, before matching."""

    pattern: re.Pattern[str]
    replacement: str
    text: str  # as the user wrote it
    #: Where the user gave it, as its errors name it: ``renames`` (``compare()``'s parameter), ``--rename`` (the
    #: command line's option) or a config file's ``FILE: rename``.
    where: str = "renames"

    def apply(self, name: str) -> str:
        return self.pattern.sub(self.replacement, name)


def parse_rename(text: str, where: str = "renames") -> RenameRule:
    """``'REGEX=REPLACEMENT'``; the last ``=`` splits them, so a regex may hold ``=`` (``(?=…)``). ``where`` is how
    the user gave it, for its errors (:attr:`RenameRule.where`)."""
    pattern, sep, replacement = text.rpartition("=")
    if not sep or not pattern:
        hint = "e.g. '^model\\.layers\\.0\\.=midlayer.'"
        raise CkptdiffError(where, f"{_as_typed(text)} is not REGEX=REPLACEMENT", hint)
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise CkptdiffError(where, f"{_as_typed(pattern)} is not a regular expression: {err}") from None
    try:
        compiled.sub(replacement, "")  # compiles the template: bad escapes and group references fail here
    except (re.error, IndexError) as err:
        raise CkptdiffError(where, f"replacement {_as_typed(replacement)} is invalid: {err}") from None
    return RenameRule(compiled, replacement, text, where)


def _as_typed(text: str) -> str:
    """A rule's part in quotes as the user typed it (Python's quoting doubled each backslash), control characters
    escaped."""
    return f"'{printable(text)}'"


class NamedSide(msgspec.Struct, frozen=True):
    """One side's tensors under the names rows match on (``TensorInfo.name`` stays the original)."""

    tensors: Mapping[str, TensorInfo]
    convention: Convention | None


def name_side(
    checkpoint: Checkpoint, label: str, profile: Profile | None, renames: Sequence[RenameRule] = ()
) -> NamedSide:
    if not renames:  # nothing to rename: the side's own map, as it is
        renamed: Mapping[str, TensorInfo] = checkpoint.tensors
    else:
        renamed = _renamed(checkpoint, label, renames)
    if profile is None:
        return NamedSide(renamed, None)
    convention = profile.naming_convention(renamed)
    if convention is None and not (checkpoint.config is not None and profile.detect(checkpoint.config)):
        return NamedSide(renamed, None)  # neither named nor configured like this architecture: keep its names
    canonical: dict[str, TensorInfo] = {}
    for name, info in renamed.items():
        key = profile.canonical_name(name)
        if key in canonical:  # two conventions mixed in one checkpoint: keep its names as they are
            return NamedSide(renamed, None)
        canonical[key] = info
    return NamedSide(canonical, convention)


def _renamed(checkpoint: Checkpoint, label: str, renames: Sequence[RenameRule]) -> dict[str, TensorInfo]:
    renamed: dict[str, TensorInfo] = {}
    where = renames[-1].where  # one run's rules come from one place: the flags replace the config file's
    for original, info in checkpoint.tensors.items():
        name = original
        for rule in renames:
            name = rule.apply(name)
        if not name and original:  # a name the checkpoint itself leaves empty is its own (safetensors allows it)
            raise CkptdiffError(where, f"turns {label}'s {quoted_name(original)} into an empty name")
        if name in renamed:
            other = renamed[name].name
            both = f"{quoted_name(other)} and {quoted_name(original)}"
            raise CkptdiffError(where, f"turns both {both} of {label} into {quoted_name(name)}")
        renamed[name] = info
    return renamed


def convention_findings(a: NamedSide, b: NamedSide) -> list[Finding]:
    if a.convention is None or b.convention is None or a.convention == b.convention:
        return []
    params = {"a": a.convention.label, "b": b.convention.label}
    return [Finding("warning", "naming_conventions_differ", params=params)]


#: Above this many names only on one side, per-row "did you mean" notes would drown the report (and keep the
#: table from collapsing layer patterns); a whole-model renaming calls for --rename instead.
MAX_SUGGESTIONS = 1000
#: Candidates compared by string similarity for one name: its neighbours in name order and reversed-name order.
_NEIGHBOURS = 3

Key = tuple[tuple[int, ...], str]


class _Candidates:
    """The unmatched tensors of one side with one shape and dtype, searchable by name similarity."""

    def __init__(self, rows: list[TensorRow]) -> None:
        self.forward = sorted(rows, key=lambda r: r.name)
        self.backward = sorted(rows, key=lambda r: r.name[::-1])
        self._forward_keys = [r.name for r in self.forward]
        self._backward_keys = [r.name[::-1] for r in self.backward]

    def closest(self, name: str) -> TensorRow:
        """The most similar name; only near neighbours (shared prefix or suffix) are scored, so this scales."""
        import difflib  # only when a name is unmatched: a run whose names all match never loads it

        if len(self.forward) <= 2 * _NEIGHBOURS:
            pool = self.forward
        else:
            pool = []
            for ordered, keys, key in (
                (self.forward, self._forward_keys, name),
                (self.backward, self._backward_keys, name[::-1]),
            ):
                at = bisect.bisect_left(keys, key)
                pool += ordered[max(0, at - _NEIGHBOURS) : at + _NEIGHBOURS]
        return max(pool, key=lambda r: (difflib.SequenceMatcher(None, name, r.name).ratio(), r.name))


def suggest_counterparts(rows: Iterable[TensorRow]) -> tuple[TensorRow, ...]:
    """A name only on one side gets "did you mean …?" when the other side has an unmatched same-shaped tensor."""
    rows = tuple(rows)
    only: dict[str, list[TensorRow]] = {"a": [], "b": []}
    for row in rows:
        if row.status == "only_in_a" and row.a is not None:
            only["a"].append(row)
        elif row.status == "only_in_b" and row.b is not None:
            only["b"].append(row)
    if not only["a"] or not only["b"] or max(len(only["a"]), len(only["b"])) > MAX_SUGGESTIONS:
        return rows
    groups: dict[str, dict[Key, _Candidates]] = {}
    for side, side_rows in only.items():
        keyed: dict[Key, list[TensorRow]] = {}
        for row in side_rows:
            stored = getattr(row, side)
            keyed.setdefault((stored.shape, stored.dtype), []).append(row)
        groups[side] = {key: _Candidates(members) for key, members in keyed.items()}
    notes: dict[int, NotePart] = {}
    for side, other, label in (("a", "b", "B"), ("b", "a", "A")):
        for row in only[side]:
            stored = getattr(row, side)
            candidates = groups[other].get((stored.shape, stored.dtype))
            if candidates is not None:
                best = candidates.closest(row.name)
                notes[id(row)] = NotePart("did_you_mean", side=label, name=_shown(best, other))
    return tuple(_with_note(row, notes[id(row)]) if id(row) in notes else row for row in rows)


def _shown(row: TensorRow, side: str) -> str:
    own = getattr(row, side)
    return own.name if own is not None and own.name else row.name


def _with_note(row: TensorRow, note: NotePart) -> TensorRow:
    return msgspec.structs.replace(row, notes=(*row.notes, note))
