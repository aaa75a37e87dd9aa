"""Medusa heads (FasterDecoding/Medusa, ``medusa_num_heads`` extra decoding heads on a frozen target): detected,
reported, and not replayed, since no pinned engine registers a loader for them."""
