"""Proving a written output before it is renamed into place: it reads back as planned, the engine loads it, and
every tensor holds its input tensor's bytes.

1. ckptdiff reads the output back (its own reader) and the ``safetensors`` package opens every shard: names,
   dtypes, shapes and offsets must be the plan's, and the index must name every tensor's shard. The package
   opens files only through numpy (or torch), which the base install leaves out: there the package's check is
   not run and the proof says so (``safetensors_check``); ckptdiff's reader, held to the package's rules by a
   differential fuzz test, still reads every shard back.
2. The target engine's loader is replayed on it (``ckptdiff OUT --engine E``): no error, no parameter left
   random or missing, no written tensor skipped.
3. Every copied tensor's bytes equal its input's: compared byte for byte with a file on disk, or, for a
   tensor that came from the Hub or a store, by the sha256 of what was received (rereading it would fetch it
   twice). A cast tensor is compared by value (both widened by numpy).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CkptdiffError, printable_name
from ..families.eagle3.spec import DrafterSpec
from ..sources.base import Source
from ..sources.tensor_read import TENSOR_CHUNK, read_tensor
from .layout import INDEX_FILE, METADATA
from .plan import Plan, PlannedTensor, engine_problems, replay_engine
from .write import Written, numpy_dtype

NO_NUMPY = "not run: the safetensors package opens files only through numpy (pip install 'ckptdiff[values]')"


@dataclass
class Proof:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    engine_outcome: str = ""
    bytes_compared: int = 0
    tensors_by_bytes: int = 0
    tensors_by_digest: int = 0
    tensors_by_value: int = 0
    #: "passed", or why the safetensors package did not open the shards (it needs numpy: the values extra)
    safetensors_check: str = "passed"

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "proven": self.ok,
            "problems": self.problems,
            "engine_check": self.engine_outcome,
            "engine_warnings": self.warnings,
            "tensors_compared_by_bytes": self.tensors_by_bytes,
            "tensors_compared_by_sha256": self.tensors_by_digest,
            "tensors_compared_by_value": self.tensors_by_value,
            "bytes_compared": self.bytes_compared,
            "safetensors_check": self.safetensors_check,
        }


def prove(plan: Plan, folder: Path, sources: dict[str, Source], written: Written) -> Proof:
    proof = Proof()
    from ..sources import resolve

    readback = resolve(str(folder))
    _check_layout(plan, readback.tensors, proof)
    _check_with_safetensors(plan, folder, proof)
    if proof.problems:
        return proof
    result = replay_engine(plan, readback)
    proof.engine_outcome = result.outcome
    proof.problems.extend(engine_problems(result, [t.name for t in plan.tensors], plan.allowed_events))
    from ..formats.messages import event_message

    proof.warnings.extend(
        f"{plan.engine} [{e.code}], accepted by --allow-event: {event_message(e)}"
        for e in result.events
        if e.severity == "warning" and e.code in plan.allowed_events
    )
    for tensor in plan.tensors:
        _check_bytes(plan, tensor, folder, sources[tensor.origin.side], written, proof)
        if tensor.name.rpartition(".")[2] == "d2t":
            _check_d2t(plan, tensor, folder, proof)
    return proof


#: The little-endian struct codes of the integer dtypes an engine takes d2t in (targets.py's ``d2t_dtypes``).
_D2T_CODES = {"I64": "q", "I32": "i", "I16": "h", "I8": "b", "U64": "Q", "U32": "I", "U16": "H", "U8": "B"}


def _check_d2t(plan: Plan, tensor: PlannedTensor, folder: Path, proof: Proof) -> None:
    """Every draft id ``i`` maps to target id ``i + d2t[i]`` inside the vocabulary the engine sizes the logits
    with (the output config's vocab_size): vLLM scatters the draft logits there, SGLang's hot_token_id indexes
    the target's; past it is an out-of-range index when the drafter first proposes, below 0 another token."""
    vocab = DrafterSpec.of(plan.config).vocab
    code = _D2T_CODES.get(tensor.dtype)
    if vocab is None or code is None:
        return
    begin, end = plan.shards.offsets[tensor.name]
    draft_id = 0
    for piece in _pieces(folder / tensor.file, begin, end):
        for (offset,) in struct.iter_unpack(f"<{code}", piece):
            if not 0 <= draft_id + offset < vocab.value:
                proof.problems.append(
                    f"{printable_name(tensor.name)}: draft id {draft_id} maps to target id {draft_id + offset} "
                    f"(offset {offset}), outside the target's vocabulary ({vocab} in the output's config.json)"
                )
                return
            draft_id += 1


def _check_layout(plan: Plan, tensors: Any, proof: Proof) -> None:
    names = set(tensors)
    planned = {t.name: t for t in plan.tensors}
    if names != set(planned):
        missing, extra = sorted(set(planned) - names), sorted(names - set(planned))
        proof.problems.append(f"read back, the output's tensors are not the plan's (missing {missing}, extra {extra})")
        return
    for name, tensor in planned.items():
        info = tensors[name]
        got = (info.dtype, tuple(info.shape), info.file, tuple(info.data_offsets))
        want = (tensor.dtype, tensor.shape, tensor.file, plan.shards.offsets[name])
        if got != want:
            proof.problems.append(f"read back, {printable_name(name)} is {got}, planned {want}")


def _check_with_safetensors(plan: Plan, folder: Path, proof: Proof) -> None:
    import importlib.util

    from safetensors import safe_open

    if importlib.util.find_spec("numpy") is None:
        proof.safetensors_check = NO_NUMPY
        return

    planned_by_name = {t.name: t for t in plan.tensors}
    for shard in plan.shards.shards:
        path = folder / shard.file
        shown = printable_name(str(path))
        try:
            with safe_open(str(path), framework="numpy") as opened:
                if set(opened.keys()) != set(shard.names):
                    proof.problems.append(f"{shown}: the safetensors package reads other tensors than planned")
                if opened.metadata() != METADATA:
                    proof.problems.append(f"{shown}: metadata {opened.metadata()}, planned {METADATA}")
                for name in shard.names:
                    piece = opened.get_slice(name)
                    planned = planned_by_name[name]
                    if (piece.get_dtype(), tuple(piece.get_shape())) != (planned.dtype, planned.shape):
                        proof.problems.append(
                            f"{shown}: the safetensors package reads {printable_name(name)} otherwise than planned"
                        )
        except Exception as err:  # noqa: BLE001 - the package's own refusal is the finding
            proof.problems.append(f"{shown}: the safetensors package refuses it: {err}")
        if path.stat().st_size != shard.size:
            proof.problems.append(f"{shown}: {path.stat().st_size} bytes, planned {shard.size}")
    if plan.shards.indexed:
        index = json.loads((folder / INDEX_FILE).read_text())
        if index.get("weight_map") != dict(sorted(plan.shards.file_of.items())):
            proof.problems.append(
                f"{printable_name(str(folder / INDEX_FILE))}: its weight_map is not the shards written"
            )


def _check_bytes(
    plan: Plan, tensor: PlannedTensor, folder: Path, source: Source, written: Written, proof: Proof
) -> None:
    begin, end = plan.shards.offsets[tensor.name]
    out_path = folder / tensor.file
    origin = tensor.origin.tensor
    name, was = printable_name(tensor.name), printable_name(origin.name)  # as the plan's table writes them
    if "cast" in tensor.transforms:
        import numpy as np

        before = np.frombuffer(read_tensor(source, origin), dtype=numpy_dtype(origin.dtype))
        with open(out_path, "rb") as handle:
            handle.seek(begin)
            after = np.frombuffer(handle.read(end - begin), dtype=numpy_dtype(tensor.dtype))
        if before.shape != after.shape or not np.array_equal(before.astype(np.float64), after.astype(np.float64)):
            proof.problems.append(f"{name}: its values are not {was}'s")
        proof.tensors_by_value += 1
        return
    if tensor.name in written.digests:
        digest = hashlib.sha256()
        for piece in _pieces(out_path, begin, end):
            digest.update(piece)
        if digest.hexdigest() != written.digests[tensor.name]:
            proof.problems.append(
                f"{name}: its bytes are not those received from {printable_name(source.name_of(origin.file))}"
            )
        proof.tensors_by_digest += 1
        proof.bytes_compared += end - begin
        return
    path = source.disk_path(origin.file)
    if path is None:
        raise CkptdiffError(source.name_of(origin.file), "was copied without a digest and is not on disk")
    if not same_bytes(out_path, begin, path, origin.data_offsets[0], end - begin):
        proof.problems.append(f"{name}: its bytes are not {was}'s in {printable_name(str(path))}")
    proof.tensors_by_bytes += 1
    proof.bytes_compared += end - begin


def same_bytes(a: Path, a_begin: int, b: Path, b_begin: int, length: int) -> bool:
    """Whether ``length`` bytes of file ``a`` from ``a_begin`` equal file ``b``'s from ``b_begin``: read into two
    reused buffers, compared by memcmp (bytearray equality), so memory stays at two pieces."""
    first, second = bytearray(TENSOR_CHUNK), bytearray(TENSOR_CHUNK)
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_RDONLY)
    try:
        done = 0
        while done < length:
            want = min(TENSOR_CHUNK, length - done)
            got_a = _read_into(fa, first, want, a_begin + done)
            got_b = _read_into(fb, second, want, b_begin + done)
            if got_a != want or got_b != want:
                return False
            equal = first == second if want == TENSOR_CHUNK else first[:want] == second[:want]
            if not equal:
                return False
            done += want
        return True
    finally:
        os.close(fa)
        os.close(fb)


def _read_into(descriptor: int, buffer: bytearray, want: int, offset: int) -> int:
    view, got = memoryview(buffer), 0
    while got < want:
        count = os.preadv(descriptor, [view[got:want]], offset + got)
        if count == 0:
            break
        got += count
    return got


def _pieces(path: Path, begin: int, end: int) -> Any:
    """The bytes [begin, end) of a file in TENSOR_CHUNK pieces, into one reused buffer (bounded memory)."""
    buffer = bytearray(TENSOR_CHUNK)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        position = begin
        while position < end:
            view = memoryview(buffer)[: min(TENSOR_CHUNK, end - position)]
            count = os.preadv(descriptor, [view], position)
            if count == 0:
                yield b""
                return
            yield view[:count]
            position += count
    finally:
        os.close(descriptor)
