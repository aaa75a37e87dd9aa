"""Bytes of a safetensors header → validated tensor metadata. No I/O: local and remote sources share it.

The rules follow the format's reference implementation (``safetensors`` crate): an 8-byte little-endian
header length, a UTF-8 JSON object, known dtypes, non-negative integer dims, and data offsets that tile
the data region from 0 with no gaps or overlaps.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

import msgspec

from .dtypes import DTYPE_BITS, DType
from .errors import HeaderError, quoted_name
from .strict_json import MAX_JSON_DEPTH, DuplicateKeyError, has_lone_surrogate, nesting_depth, reject_duplicate_keys

T = TypeVar("T")

#: Where the source's bytes are named in errors: a path, or ``org/name@commit:file``.
SourceName = str

LENGTH_PREFIX_BYTES = 8
#: The reference implementation's limit on the JSON header.
MAX_HEADER_BYTES = 100_000_000
#: The reference's size type (``usize``, 64 bits): a dim or an offset above it is not a number it reads, and a
#: shape whose running element count or bit count passes it overflows there.
_MAX_NUMEL = 2**64 - 1

#: A non-negative JSON integer: a dim or a byte offset. Past 2**63 - 1 (msgspec bounds no further) the fast path
#: leaves the header to the precise checks, which hold it to the reference's 2**64 - 1.
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class TensorSpan(msgspec.Struct, frozen=True, gc=False):
    """What every tensor record (a header entry, a checkpoint's tensor) derives from its shape and byte span.

    No fields of its own: subclasses declare ``shape`` and ``data_offsets`` as fields, each in its own place in
    the field order (so here they are read-only properties to the type checker, not fields).
    """

    if TYPE_CHECKING:

        @property
        def shape(self) -> tuple[int, ...]: ...

        @property
        def data_offsets(self) -> tuple[int, int]: ...

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]


class TensorEntry(TensorSpan, frozen=True, gc=False, forbid_unknown_fields=True):
    """One tensor as a header describes it; offsets are relative to the data region.

    Also the type :data:`_DECODER` builds straight from the JSON, checking the field types as it parses: a dtype
    of the spec, dims and offsets that are non-negative integers, no other keys. (No reference cycles: ``gc=False``
    keeps ~140 k of them per checkpoint out of the cyclic collector's passes.)
    """

    if TYPE_CHECKING:
        dtype: DType
    else:  # the spec's dtypes, a Literal built from the table at run time: the decoder refuses any other
        dtype: Literal[tuple(DTYPE_BITS)]
    shape: tuple[_Count, ...]
    data_offsets: tuple[_Count, _Count]


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated header: its tensors, its ``__metadata__`` map and the layout of the file."""

    tensors: Mapping[str, TensorEntry]
    metadata: Mapping[str, str]
    header_length: int  # bytes of JSON after the 8-byte prefix
    #: Where the text of a flat ``__metadata__`` object is in the JSON, when the header was decoded as plain
    #: (:func:`parse_header`'s fast path): another header with the same text around its own metadata has these
    #: tensors (:func:`with_own_metadata`).
    metadata_span: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    #: The header these very tensors were decoded for, when they are another's (:func:`with_own_metadata`): what
    #: derives from the tensors alone is asked of it, computed once for both.
    tensors_of: SafetensorsHeader | None = field(default=None, repr=False, compare=False)
    #: The data length and bytes per dtype, when the decode that validated the tensors added them up as it went.
    totals: tuple[int, dict[DType, int]] | None = field(default=None, repr=False, compare=False)

    @property
    def data_start(self) -> int:
        """Absolute file offset where tensor data begins."""
        return LENGTH_PREFIX_BYTES + self.header_length

    @cached_property  # asked for by the size check and by the file's listing, and for B when B reuses A's header
    def data_length(self) -> int:
        if self.tensors_of is not None:
            return self.tensors_of.data_length
        if self.totals is not None:
            return self.totals[0]
        return max(map(itemgetter(1), map(attrgetter("data_offsets"), self.tensors.values())), default=0)

    @cached_property  # a checkpoint's per-dtype totals add these up (its tensors have no objects of their own)
    def dtype_bytes(self) -> dict[DType, int]:
        """Bytes of tensor data per dtype."""
        if self.tensors_of is not None:
            return self.tensors_of.dtype_bytes
        if self.totals is not None:
            return self.totals[1]
        totals: dict[DType, int] = {}
        for entry in self.tensors.values():
            begin, end = entry.data_offsets
            totals[entry.dtype] = totals.get(entry.dtype, 0) + end - begin
        return totals

    @property
    def file_size(self) -> int:
        """The size the file must have for this header."""
        return self.data_start + self.data_length


def read_header_length(prefix: bytes, *, source: SourceName, file_size: int | None = None) -> int:
    """Decode and check the 8-byte length that starts every safetensors file."""
    if len(prefix) < LENGTH_PREFIX_BYTES:
        raise HeaderError(source, f"file too short for a safetensors header ({len(prefix)} bytes, need at least 8)")
    length = int.from_bytes(prefix[:LENGTH_PREFIX_BYTES], "little")
    if length > MAX_HEADER_BYTES:
        raise HeaderError(source, f"header length {length} exceeds the {MAX_HEADER_BYTES}-byte limit")
    if length < 2:
        raise HeaderError(source, f"header length {length} is too small for a JSON object")
    if file_size is not None and LENGTH_PREFIX_BYTES + length > file_size:
        raise HeaderError(source, f"header length {length} runs past the end of the {file_size}-byte file")
    return length


def parse_header(raw_json: bytes, *, source: SourceName, file_size: int | None = None) -> SafetensorsHeader:
    """Validate the JSON part of a header (the bytes after the length prefix)."""
    plain = _decode_plain(raw_json)
    if plain is None:  # anything unusual, valid or not: the precise checks accept it or name its defect
        return parse_header_precisely(raw_json, source=source, file_size=file_size)
    tensors, metadata, totals, span = plain
    header = SafetensorsHeader(tensors, metadata, len(raw_json), metadata_span=span, totals=totals)
    _check_file_size(header, totals[0], file_size, source)
    return header


def with_own_metadata(header: SafetensorsHeader, raw_json: bytes, like: bytes) -> SafetensorsHeader | None:
    """The header of ``raw_json`` when its text is ``like``'s but for a flat ``__metadata__`` object of its own,
    ``like`` being the text ``header`` was decoded from as plain: ``header``'s tensors (the same text, up to the
    trailing spaces that pad it, decodes to the same validated entries) with its own metadata and length. None
    otherwise: ``raw_json`` is parsed.

    The metadata is found and decoded as the fast path finds and decodes it; the file's size is the caller's to
    check, against the returned header.
    """
    theirs, mine = header.metadata_span, _metadata_span(raw_json)
    # the text after the metadata may end in more or fewer spaces: writers pad the header to 8 bytes
    end, other_end = text_end(raw_json, b" "), text_end(like, b" ")
    if theirs is None or mine is None or end < 0 or other_end < 0:
        return None
    if not (
        same_text(raw_json, 0, mine[0], like, 0, theirs[0])
        and same_text(raw_json, mine[1], end, like, theirs[1], other_end)
    ):
        return None
    metadata = _decode_metadata(raw_json[mine[0] : mine[1]])
    if metadata is None:
        return None
    return SafetensorsHeader(header.tensors, metadata, len(raw_json), mine, tensors_of=header.tensors_of or header)


def parse_header_precisely(raw_json: bytes, *, source: SourceName, file_size: int | None = None) -> SafetensorsHeader:
    """:func:`parse_header` by rules checked one at a time, each defect named: the path for any header that is
    not plain (:func:`_decode_plain`), and the reference its fast path is tested against."""
    try:
        text = raw_json.decode("utf-8")
    except UnicodeDecodeError as err:
        raise HeaderError(source, f"header is not valid UTF-8 (byte {err.start})") from None
    if not text.lstrip(" \t\r\n").startswith("{"):  # JSON whitespace may lead, as the reference allows
        raise HeaderError(source, "header does not start with '{' (not a safetensors file?)")
    try:
        return _parse_document(text, source, header_length=len(raw_json), file_size=file_size)
    except HeaderError:
        _check_depth(text, source)  # too-deep nesting is reported before any other defect it causes
        raise


def _parse_document(text: str, source: SourceName, *, header_length: int, file_size: int | None) -> SafetensorsHeader:
    document = _load_json_object(text, source)
    metadata = _parse_metadata(document.pop("__metadata__", None), source)
    tensors: dict[str, TensorEntry] = {}
    nested = False
    for name, entry in document.items():
        if not name.isprintable():  # a name with ESC, BEL or newlines could forge lines on a user's terminal
            raise HeaderError(source, f"tensor name {quoted_name(name)} has control or unprintable characters")
        tensors[name] = _parse_entry(name, entry, source)
        nested = nested or len(entry) != 3
    if nested:  # only an entry's extra keys can nest deeper than a plain header's three levels
        _check_depth(text, source)
    _check_layout(tensors, source)

    header = SafetensorsHeader(tensors=tensors, metadata=metadata, header_length=header_length)
    _check_file_size(header, header.data_length, file_size, source)
    return header


def check_file_size(header: SafetensorsHeader, file_size: int | None, *, source: SourceName) -> None:
    """Refuse a file whose size is not the one its (validated) header describes."""
    _check_file_size(header, header.data_length, file_size, source)


def _check_file_size(header: SafetensorsHeader, data_length: int, file_size: int | None, source: SourceName) -> None:
    end = header.data_start + data_length
    if file_size is not None and end != file_size:
        raise HeaderError(
            source, f"data region ends at byte {end} but the file has {file_size} bytes (truncated or trailing data)"
        )


def same_text(text: bytes, start: int, end: int, other: bytes, other_start: int, other_end: int) -> bool:
    """Whether ``text[start:end]`` is ``other[other_start:other_end]``, compared in place (no copy of either)."""
    return end - start == other_end - other_start and text.startswith(memoryview(other)[other_start:other_end], start)


#: Past this many trailing spaces a text is not padding: :func:`text_end` gives up on it.
_MAX_PADDING = 64


def text_end(text: bytes, spaces: bytes) -> int:
    """Where ``text`` ends once trailing padding (these bytes, a few) is left off; -1 when it has more."""
    end = len(text)
    while end and text[end - 1] in spaces:
        end -= 1
        if len(text) - end > _MAX_PADDING:
            return -1
    return end


#: Decodes a header whose ``__metadata__`` value was replaced by ``null``, into entries checked as they parse.
_DECODER = msgspec.json.Decoder(dict[str, TensorEntry | None])
_JSON_STRING = rb'"(?:[^"\\]|\\.)*"'
_STRING_PAIR = rb"\s*" + _JSON_STRING + rb"\s*:\s*" + _JSON_STRING + rb"\s*"
#: ``"__metadata__": {"k": "v", ...}``, a flat object of strings (escapes allowed: writers put JSON in values).
_FLAT_METADATA = re.compile(rb'"__metadata__"\s*:\s*(\{(?:' + _STRING_PAIR + rb"(?:," + _STRING_PAIR + rb")*|\s*)\})")


def _decode_metadata(raw: bytes) -> dict[str, str] | None:
    """A flat ``__metadata__`` object's text decoded as the precise path decodes it; None if it refuses."""
    try:
        text = raw.decode("utf-8")
        metadata = json.loads(text, object_pairs_hook=reject_duplicate_keys)
    except (UnicodeDecodeError, ValueError, DuplicateKeyError):
        return None
    return None if has_lone_surrogate(text, metadata) else metadata


def _metadata_span(raw: bytes) -> tuple[int, int] | None:
    """Where the first ``"__metadata__"`` key's value is, when that value is a flat object of strings."""
    at = raw.find(b'"__metadata__"')
    found = _FLAT_METADATA.match(raw, at) if at >= 0 else None
    return found.span(1) if found is not None else None


def _decode_plain(
    raw: bytes,
) -> tuple[dict[str, TensorEntry], dict[str, str], tuple[int, dict[DType, int]], tuple[int, int] | None] | None:
    """The tensors, metadata, data length and bytes per dtype of a plain valid header, typed by the decoder and
    checked in one pass; None when the header is anything else (invalid, or valid but unusual), for the precise
    checks to decide.

    "Plain": ``__metadata__`` absent or a flat object of strings (its span in ``raw`` is returned too); no
    backslash anywhere else (so no escapes: every quote delimits a string, and no surrogates); every entry exactly
    dtype, shape and data_offsets; no empty tensor.
    It accepts only what the precise path accepts, with the same result (tests/test_header_fast_path.py).
    """
    at = raw.find(b'"__metadata__"')
    metadata: dict[str, str] = {}
    span = None
    if at >= 0:  # decoded on its own, by the precise path's decoder (it is small): the rest must be plain
        span = _metadata_span(raw)
        metadata_or_none = _decode_metadata(raw[span[0] : span[1]]) if span is not None else None
        if span is None or metadata_or_none is None:
            return None
        metadata, raw = metadata_or_none, raw[: span[0]] + b"null" + raw[span[1] :]
    document = decode_unescaped(raw, _DECODER.decode, _header_strings)
    if document is None or (at >= 0 and document.pop("__metadata__", 0) is not None):  # not the top level's
        return None
    # ASCII without DEL has no unprintable character the decoder lets into a string (it refuses raw controls)
    if not (raw.isascii() and b"\x7f" not in raw) and not all(map(str.isprintable, document)):
        return None
    totals: dict[DType, int] = {}
    data_length = _plain_entries(document, totals)
    if data_length is None:
        return None
    return cast(dict[str, TensorEntry], document), metadata, (data_length, totals), span  # no None: checked


def _header_strings(document: dict[str, TensorEntry | None]) -> int:
    """The JSON strings of a decoded header: five an entry (name, three keys, dtype), one for a null metadata."""
    return 5 * len(document) - 4 * ("__metadata__" in document)


def decode_unescaped(raw: bytes, decode: Callable[[bytes], T], strings_in: Callable[[T], int]) -> T | None:
    """``raw`` decoded in C when it has no escapes and no key named twice; None for anything else (invalid, or
    valid but unusual), for a precise path to decide. Without backslashes every quote delimits a string, so the
    text's quotes count its strings; a key named twice leaves the document (``strings_in``) with fewer."""
    if b"\\" in raw:
        return None
    try:
        document = decode(raw)
    except msgspec.DecodeError:
        return None
    return document if raw.count(b'"') == 2 * strings_in(document) else None


def _plain_entries(document: dict[str, TensorEntry | None], totals: dict[DType, int]) -> int | None:
    """The data length when every entry is a tensor (not null) that is not empty, whose bits are exactly its
    span, and the spans tile the data region from 0; None otherwise. ``totals`` gets the bytes per dtype."""
    expected = 0  # where the next span starts while the entries come in data order (as writers write them); -1 after
    for entry in document.values():  # one pass: faster here than C-level passes over the columns
        if entry is None:
            return None
        numel = math.prod(entry.shape)
        begin, end = entry.data_offsets
        dtype = entry.dtype
        nbytes = end - begin
        # an empty tensor may hide an overflowing prefix: the precise checks see it; the bits must be whole bytes
        # and exactly the span (so each end is past its begin)
        if not 0 < numel <= _MAX_NUMEL or numel * DTYPE_BITS[dtype] != nbytes * 8 or nbytes * 8 > _MAX_NUMEL:
            return None
        totals[dtype] = totals.get(dtype, 0) + nbytes
        expected = end if begin == expected else -1
    if expected >= 0:
        return expected
    data_length = 0
    for begin, end in sorted(map(attrgetter("data_offsets"), document.values())):
        if begin != data_length:
            return None
        data_length = end
    return data_length


def parse_file_prefix(prefix: bytes, *, source: SourceName, file_size: int | None = None) -> SafetensorsHeader:
    """Parse a header from the first bytes of a file (length prefix + at least the whole JSON)."""
    return parse_header(header_json(prefix, source=source, file_size=file_size), source=source, file_size=file_size)


def header_json(prefix: bytes, *, source: SourceName, file_size: int | None = None) -> bytes:
    """The header's JSON, not yet decoded, from the first bytes of a file (length prefix + at least the JSON)."""
    length = read_header_length(prefix, source=source, file_size=file_size)
    raw = prefix[LENGTH_PREFIX_BYTES : LENGTH_PREFIX_BYTES + length]
    if len(raw) < length:
        raise HeaderError(source, f"header truncated: {len(raw)} of {length} bytes")
    return raw


def _check_depth(text: str, source: SourceName) -> None:
    # A valid header nests three deep; scan only when brackets are unusually many.
    if text.count("[") + text.count("{") > 3 * MAX_JSON_DEPTH and nesting_depth(text) > MAX_JSON_DEPTH:
        raise HeaderError(source, f"header JSON nests deeper than {MAX_JSON_DEPTH} levels")


def _load_json_object(text: str, source: SourceName) -> dict[str, Any]:
    # json's C scanner guards its own recursion (RecursionError); parse_header runs the depth scan on failure.
    try:
        document = json.loads(text, object_pairs_hook=reject_duplicate_keys)
    except DuplicateKeyError as dup:
        raise HeaderError(source, f"header has duplicate key {quoted_name(str(dup))}") from None
    except RecursionError:
        raise HeaderError(source, "header JSON nests too deeply") from None
    except ValueError as err:
        raise HeaderError(source, f"header is not valid JSON ({_short(err)})") from None
    if not isinstance(document, dict):
        raise HeaderError(source, f"header JSON is a {type(document).__name__}, not an object")
    if has_lone_surrogate(text, document):
        raise HeaderError(source, "header has a string with a lone surrogate escape (not valid Unicode)")
    return document


def _parse_metadata(raw: Any, source: SourceName) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise HeaderError(source, "__metadata__ must map strings to strings")
    return raw


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_NUMEL


def _parse_entry(name: str, entry: Any, source: SourceName) -> TensorEntry:
    where = f"tensor {quoted_name(name)}"
    if not isinstance(entry, dict):
        raise HeaderError(source, f"{where}: entry is not an object")
    missing = [key for key in ("dtype", "shape", "data_offsets") if key not in entry]
    if missing:
        raise HeaderError(source, f"{where}: missing {', '.join(missing)}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise HeaderError(source, f"{where}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_count(dim) for dim in shape):
        beyond = isinstance(shape, list) and any(isinstance(dim, int) and dim > _MAX_NUMEL for dim in shape)
        defect = "has a dim over 2**64 - 1" if beyond else "is not a list of non-negative integers"
        raise HeaderError(source, f"{where}: shape {_short(shape)} {defect}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)):
        beyond = isinstance(offsets, list) and any(isinstance(o, int) and o > _MAX_NUMEL for o in offsets)
        defect = "has an offset over 2**64 - 1" if beyond else "is not a pair of non-negative integers"
        raise HeaderError(source, f"{where}: data_offsets {_short(offsets)} {defect}")
    begin, end = offsets
    if end < begin:
        raise HeaderError(source, f"{where}: data_offsets [{begin}, {end}] end before they begin")
    numel = 1
    for dim in shape:
        numel *= dim
        if numel > _MAX_NUMEL:
            raise HeaderError(source, f"{where}: shape {shape} overflows the element count")
    bits = numel * DTYPE_BITS[dtype]
    if bits > _MAX_NUMEL:  # the reference counts a tensor's size in bits
        raise HeaderError(source, f"{where}: shape {shape} × {dtype} overflows the bit count")
    if bits % 8:
        raise HeaderError(source, f"{where}: {numel} × {dtype} is not a whole number of bytes")
    if bits // 8 != end - begin:
        raise HeaderError(
            source,
            f"{where}: {dtype}{shape} needs {bits // 8} bytes but data_offsets [{begin}, {end}] span {end - begin}",
        )
    return TensorEntry(dtype=dtype, shape=tuple(shape), data_offsets=(begin, end))


def _check_layout(tensors: Mapping[str, TensorEntry], source: SourceName) -> None:
    """Offsets must tile the data region from 0: sorted, contiguous, no overlap."""
    expected = 0
    spans = sorted([(entry.data_offsets, position, name) for position, (name, entry) in enumerate(tensors.items())])
    for (begin, end), _, name in spans:
        if begin != expected:
            problem = "overlaps the previous tensor" if begin < expected else f"leaves a gap after byte {expected}"
            if expected == 0:
                problem = "does not start the data region at 0"
            raise HeaderError(source, f"tensor {name!r}: data_offsets [{begin}, {end}] {problem}")
        expected = end


def _short(value: Any, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
