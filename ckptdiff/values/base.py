"""Which tensors of each side --values checks against the base (with ``--base``): the embedding pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..checkpoint import Checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from ..profiles import Profile

#: (side label, tensor name in that side, tensor name in the base)
EmbedJob = tuple[str, str, str]


def embed_pairs_for(profile: Profile | None, base: Checkpoint) -> list[tuple[str, str]]:
    """Which of a side's tensors must equal which of the base's: the profile's injected weights, else embeds."""
    if profile is not None and profile.injected:
        return [(weight.name, weight.base_name) for weight in profile.injected if "embed" in weight.name]
    base_embeds = [name for name in base.tensors if name.endswith("embed_tokens.weight")]
    if len(base_embeds) != 1:
        return []
    return [("embed_tokens.weight", base_embeds[0]), ("model.embed_tokens.weight", base_embeds[0])]


def embed_jobs(sides: dict[str, Checkpoint], base: Checkpoint, embed_pairs: list[tuple[str, str]]) -> list[EmbedJob]:
    """The pairs present, with equal shapes, in a side (by label) and the base."""
    jobs = []
    for label, side in sides.items():
        for own, base_name in embed_pairs:
            mine, theirs = side.tensors.get(own), base.tensors.get(base_name)
            if mine is not None and theirs is not None and mine.shape == theirs.shape:
                jobs.append((label, own, base_name))
    return jobs
