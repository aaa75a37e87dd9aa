"""Which shards to read when a caller wants only some tensors (``--base``): the first shard, then the index.

A base model's embedding sits in its first shard in every real layout, and a shard header costs a few kB
where the index costs up to 12.5 MB (Kimi-K2). So the first shard in sort order is read first, and the index
only when that header does not hold every wanted tensor; the index then names the shards that do
(:func:`ckptdiff.sources.planner.read_checkpoint` follows this for every store).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

import msgspec

from ..checkpoint import RelativePath


class Wanted(msgspec.Struct, frozen=True):
    """Tensors a caller needs: each group is satisfied by any one of its names (a role the base may store under
    several names, e.g. ``model.embed_tokens.weight`` or ``language_model.model.embed_tokens.weight``)."""

    groups: tuple[frozenset[str], ...]

    @classmethod
    def of(cls, wanted: AbstractSet[str] | Iterable[AbstractSet[str]] | Wanted) -> Wanted:
        """From a Wanted, from groups, or from plain names (each name a group of its own)."""
        if isinstance(wanted, Wanted):
            return wanted
        if isinstance(wanted, AbstractSet) and all(isinstance(name, str) for name in wanted):
            return cls(tuple(frozenset((name,)) for name in sorted(wanted)))
        return cls(tuple(frozenset(group) for group in wanted))

    @property
    def names(self) -> frozenset[str]:
        return frozenset().union(*self.groups)

    def met_by(self, stored: AbstractSet[str]) -> bool:
        """Whether ``stored`` holds a name of every group."""
        return all(not group.isdisjoint(stored) for group in self.groups)

    def shards(self, weight_map: Mapping[str, RelativePath]) -> set[RelativePath]:
        """The shards the index says hold any wanted name."""
        return {weight_map[name] for name in self.names if name in weight_map}


def shards_after_index(
    wanted: Wanted, weight_map: Mapping[str, RelativePath], first: RelativePath | None
) -> list[RelativePath]:
    """The shards to read once the index is known: those holding wanted names, plus the first shard (already
    read) when the index lists it."""
    shards = wanted.shards(weight_map)
    if first is not None and first in set(weight_map.values()):
        shards.add(first)
    return sorted(shards)
