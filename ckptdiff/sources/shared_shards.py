"""Side A's validated shard headers and index, reused by side B of a local pair wherever B's bytes are A's (or A's
but for a header's metadata, or for the index members before its weight map); a remote pair, whose sides are read
at once, shares its shard headers both ways."""

from __future__ import annotations

import threading

from ..checkpoint import ParsedIndex, RelativePath, ShardRecords, weight_map_as_in
from ..safetensors_header import SafetensorsHeader, with_own_metadata


class SharedShards:
    """What side A decoded and built, by shard file name, for side B (read after A) to reuse.

    B reuses a shard's header when its bytes equal A's same-named shard's, byte for byte: the decode and its
    validation would give the same header, so they are skipped (B's file size is still checked). Where the bytes
    are A's but for a flat ``__metadata__`` object (another producer, format or note), B takes A's decoded
    tensors with its own metadata (``safetensors_header.with_own_metadata``). What A found of a shard's tensors
    under its index (whether every name of the shard is indexed to it) is reused when B's index is A's too and B's
    shard holds A's tensors or the same names, and
    A's merged name map when every shard's tensors are A's. Only A's records are kept, and only while the pair is
    read.

    ``both_ways``: the two sides are read at the same time (a remote pair). Whichever side decodes a shard first
    records it, and the other reuses it as above; what the order was never changes a result. Only shard headers
    are shared so: the index and merged-map reuse need A read whole before B.
    """

    def __init__(self, *, both_ways: bool = False) -> None:
        self.both_ways = both_ways
        self.recording = not both_ways  # reading A: remember; then B: look up
        self._lock = threading.Lock()
        self._headers: dict[RelativePath, tuple[bytes, SafetensorsHeader]] = {}
        #: Both ways: the shards whose first decode the other side has taken (the second side keeps nothing).
        self._taken: set[RelativePath] = set()
        #: Per shard, the tensors A merged, A's weight map and whether the shard's names were all indexed to it
        #: there, and A's merged map (``tensors_from_shards``).
        self.tensors = ShardRecords()
        self._index: ParsedIndex | None = None
        #: B's shards whose header was A's, and those whose tensors were A's under metadata of their own (what the
        #: decode-skipping paths did, for tests and benchmarks).
        self.reused: list[RelativePath] = []
        self.reused_tensors: list[RelativePath] = []
        self.reused_index = False

    def remember(self, file: RelativePath, raw: bytes, header: SafetensorsHeader) -> None:
        if self.recording:
            self._headers[file] = (raw, header)
        elif self.both_ways:
            with self._lock:
                if file not in self._taken:
                    self._headers.setdefault(file, (raw, header))

    def header_for(self, file: RelativePath, raw: bytes) -> SafetensorsHeader | None:
        """A's validated header of the same-named shard if B's bytes are exactly A's, or its tensors under B's own
        metadata if the bytes differ only there; else None.

        A's record of the shard is let go as B reads it (B reads each shard once): where headers differ, A's
        decode is freed before B's next shard is decoded, so peak memory stays near a pair read without sharing.
        """
        if self.recording:
            return None
        with self._lock:
            found = self._headers.pop(file, None)
            if found is not None:
                self._taken.add(file)
        if found is not None and found[0] == raw:
            self.reused.append(file)
            return found[1]
        own = with_own_metadata(found[1], raw, like=found[0]) if found is not None else None
        if own is None:  # A's record of its tensors is kept: B's shard may hold the same names (tensors_from_shards)
            return None
        self.reused_tensors.append(file)
        return own

    def known_tensors(self) -> ShardRecords | None:
        """A's records of its shards' tensors, for B to reuse (``tensors_from_shards``' ``known``)."""
        return self.tensors if not self.recording and not self.both_ways else None

    def tensors_to_record(self) -> ShardRecords | None:
        """Where A records its shards' tensors (``tensors_from_shards``' ``into``)."""
        return self.tensors if self.recording else None

    def remember_index(self, index: ParsedIndex) -> None:
        if self.recording:
            self._index = index

    def weight_map_for(self, raw: bytes) -> dict[str, RelativePath] | None:
        """A's parsed weight map if B's index bytes are exactly A's (same shard names: B's shard paths are A's),
        or A's but for the members before the weight map (``checkpoint.weight_map_as_in``); else None."""
        if self.recording or self.both_ways:
            return None
        found, self._index = self._index, None  # B reads its index once: A's is let go
        if found is None:
            return None
        weight_map = found.weight_map if found.raw == raw else weight_map_as_in(raw, found)
        self.reused_index = weight_map is not None
        return weight_map

    def done_recording(self) -> None:
        """Side A is read: from now on, look up."""
        self.recording = False
