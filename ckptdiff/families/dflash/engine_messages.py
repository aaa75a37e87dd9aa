"""The words of DFlash's engine events: none of its own yet (no engine's DFlash loading is modelled)."""

from __future__ import annotations

EVENTS: dict[str, str] = {}
