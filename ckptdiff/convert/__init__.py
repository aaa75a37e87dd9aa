"""``ckptdiff convert``: write the drafter checkpoint a target engine loads as trained, and prove it.

:mod:`.targets` (what each engine's loader reads), :mod:`.plan` (every output tensor from a named input tensor,
the config patch, the engine's loader replayed on the plan), :mod:`.tokenizers` (the vocabulary check),
:mod:`.layout` (shards, headers, offsets), :mod:`.write` (streaming, bounded memory), :mod:`.prove` (read back,
engine check, bytes), :mod:`.run` (OUT.partial → OUT), :mod:`.render` (the plan as table, markdown, JSON).
"""
