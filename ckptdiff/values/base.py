"""Which tensors of each side --values checks against the base (with ``--base``): the embedding pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..checkpoint import Checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from ..families.model import Profile

#: (side label, tensor name in that side, tensor name in the base)
EmbedJob = tuple[str, str, str]


def embed_pairs_for(
    profile: Profile | None, base: Checkpoint, a: Checkpoint, b: Checkpoint
) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """Which of a side's tensors must equal which of the base's, under each side's own naming and the base's layout
    (:func:`ckptdiff.base_layouts.value_pairs`), and why a role a side carries could not be paired."""
    from ..base_layouts import value_pairs

    pairs, unpaired = value_pairs(profile, a, b, base)
    return list(dict.fromkeys((pair.own, pair.base) for pair in pairs)), unpaired


def embed_jobs(sides: dict[str, Checkpoint], base: Checkpoint, embed_pairs: list[tuple[str, str]]) -> list[EmbedJob]:
    """The pairs present, with equal shapes, in a side (by label) and the base."""
    jobs = []
    for label, side in sides.items():
        for own, base_name in embed_pairs:
            mine, theirs = side.tensors.get(own), base.tensors.get(base_name)
            if mine is not None and theirs is not None and mine.shape == theirs.shape:
                jobs.append((label, own, base_name))
    return jobs
