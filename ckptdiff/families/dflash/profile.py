"""DFlash in a comparison: the generic comparison of its tensors (no family-specific checks yet)."""

from __future__ import annotations

from ..model import Profile
from .detect import detect

PROFILE = Profile(name="dflash", detect=detect)
