"""Architecture knowledge as data: which weights a checkpoint may leave out because the engine injects them.

A profile is chosen by name (``--profile eagle3``) or detected from either side's config.json. Checkpoints of
an architecture without a profile get the plain generic comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Config = Mapping[str, Any]


@dataclass(frozen=True)
class InjectedWeight:
    """A frozen weight the serving engine takes from the base model when the checkpoint has none."""

    name: str  # the tensor name in this architecture's checkpoints
    base_name: str  # where the engine finds it in the base (target) model
    note: str  # what the report says on the row


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    detect: Callable[[Config], bool]
    injected: tuple[InjectedWeight, ...] = ()

    def injected_weight(self, name: str) -> InjectedWeight | None:
        for weight in self.injected:
            if weight.name == name:
                return weight
        return None


def _registry() -> dict[str, Profile]:
    from .eagle3 import EAGLE3

    return {profile.name: profile for profile in (EAGLE3,)}


def profile_names() -> tuple[str, ...]:
    return tuple(_registry())


def get_profile(name: str) -> Profile | None:
    """A profile by name; ``none`` means the generic comparison."""
    if name == "none":
        return None
    return _registry()[name]


def detect_profile(*configs: Config | None) -> Profile | None:
    """The first profile whose detector accepts any of the given configs."""
    for profile in _registry().values():
        if any(config is not None and profile.detect(config) for config in configs):
            return profile
    return None
