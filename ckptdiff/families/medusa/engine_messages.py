"""The words of Medusa's engine events: none of its own (no pinned engine loads it; see ckptdiff.families.engines)."""

from __future__ import annotations

EVENTS: dict[str, str] = {}
