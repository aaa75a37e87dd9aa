"""The policy's setting names, shared by the policy and the config file, which is read before anything heavy loads."""

from __future__ import annotations

FAIL_ON_CHOICES: tuple[str, ...] = ("error", "warning")
#: Policy fields that hold lists of patterns, in the order reports name them.
PATTERN_FIELDS: tuple[str, ...] = ("ignore", "allow_missing", "allow_extra", "allow_dtype_change", "allow_event")
