"""What a user allows: rules that leave names out or accept differences, and when warnings fail the gate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FailOn = Literal["error", "warning"]


@dataclass(frozen=True)
class Policy:
    ignore: tuple[str, ...] = ()  # globs of tensor names left out of the comparison
    allow_missing: tuple[str, ...] = ()  # globs: absent from B is fine
    allow_extra: tuple[str, ...] = ()  # globs: present only in B is fine
    allow_dtype_change: tuple[str, ...] = ()  # "*" or "FROM:TO" pairs
    fail_on: FailOn = "error"
