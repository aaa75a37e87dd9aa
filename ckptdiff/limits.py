"""Limits every reader shares: the biggest JSON file read, the slowest body accepted (light: no other import)."""

#: The most bytes ckptdiff reads of a config.json or an index: the limit the reference puts on a header.
MAX_JSON_BYTES = 100_000_000
#: The slowest average rate a body may arrive at, past its read timeout's grace, on any transport: slower is
#: a trickling server, reported as a timeout.
MIN_BODY_RATE = 16 * 1024
