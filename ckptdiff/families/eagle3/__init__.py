"""EAGLE-3 drafters: detection, spec, checks, per-engine load rules and their words (see ckptdiff.families)."""
