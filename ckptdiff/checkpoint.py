"""A checkpoint as ckptdiff sees it: tensor metadata, config and provenance. Pure data and checks, no I/O."""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Iterable, Iterator, KeysView, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Literal

import msgspec

from .config_values import check_config_values
from .dtypes import DTYPE_BITS, DType
from .errors import CkptdiffError, IndexError_, printable_name, quoted_name
from .limits import MAX_JSON_BYTES
from .safetensors_header import SafetensorsHeader, TensorEntry, TensorSpan, decode_unescaped, same_text, text_end
from .strict_json import DuplicateKeyError, has_lone_surrogate, reject_duplicate_keys

#: A file inside a checkpoint, relative to its folder or repo root, with forward slashes.
RelativePath = str
#: A 40-hex commit, or None for local checkpoints.
Revision = str | None
SourceKind = Literal["local", "hub", "cache", "store"]

#: How the files ckptdiff reads weights from are named: safetensors files and their index, torch archives and
#: the index ``transformers`` writes beside them.
SAFETENSORS_SUFFIX = ".safetensors"
INDEX_SUFFIX = ".safetensors.index.json"
TORCH_SUFFIXES = (".bin", ".pt", ".pth")
TORCH_INDEX_SUFFIX = ".bin.index.json"
#: A path ending like this names one weight file or index, not a folder.
WEIGHT_FILE_SUFFIXES = (SAFETENSORS_SUFFIX, INDEX_SUFFIX, *TORCH_SUFFIXES, TORCH_INDEX_SUFFIX)
#: The model's settings, beside its weights.
CONFIG_NAME = "config.json"


class TensorInfo(TensorSpan, frozen=True, gc=False):
    """One tensor of a checkpoint: where it lives and what it is. Offsets are absolute in its file.

    A msgspec Struct, built by a constructor in C and kept out of the cyclic collector (no cycles: ``gc=False``):
    a Kimi-K2 checkpoint has ~140 k of them.
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    file: RelativePath
    data_offsets: tuple[int, int]


class FileInfo(msgspec.Struct, frozen=True):
    """One weight file: its size and, where known without reading it, its sha256."""

    path: RelativePath
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    """Everything ckptdiff knows about one side of a comparison."""

    spec: str  # the source's display-safe identity: what the user typed, less any credentials (sources.display_spec)
    kind: SourceKind
    location: str  # a resolved path, or a repo id
    revision: Revision
    tensors: Mapping[str, TensorInfo]
    config: Mapping[str, Any] | None = None
    files: tuple[FileInfo, ...] = ()
    #: The spec as typed, credentials and all: only to reopen the source (--values); never printed.
    source_spec: str | None = field(default=None, repr=False, compare=False)

    @property
    def parameters(self) -> int:
        shapes: Iterator[tuple[int, ...]] = map(attrgetter("shape"), self.tensors.values())
        counts: Iterator[int] = map(math.prod, shapes)
        return sum(counts)

    @property
    def nbytes(self) -> int:
        spans: list[tuple[int, int]] = list(map(attrgetter("data_offsets"), self.tensors.values()))
        ends: Iterator[int] = map(itemgetter(1), spans)
        begins: Iterator[int] = map(itemgetter(0), spans)
        return sum(ends) - sum(begins)

    def dtype_totals(self) -> dict[DType, tuple[int, int]]:
        """Parameters and bytes per dtype, sorted by dtype name."""
        if isinstance(self.tensors, HeaderTensors):
            return self.tensors.dtype_totals()
        # One pass in the order the tensors were read (their memory order): faster than column passes here.
        totals: dict[DType, list[int]] = {}
        for info in self.tensors.values():
            begin, end = info.data_offsets
            found = totals.get(info.dtype)
            if found is None:
                found = totals[info.dtype] = [0, 0]
            found[0] += math.prod(info.shape)
            found[1] += end - begin
        return {dtype: (totals[dtype][0], totals[dtype][1]) for dtype in sorted(totals)}


def config_at(config: Mapping[str, Any] | None, path: Iterable[str]) -> Any:
    """The value at a nested path of a config (``("text_config", "hidden_size")``), or None where a step is
    missing or not an object."""
    holder: Any = config
    for key in path:
        holder = holder.get(key) if isinstance(holder, Mapping) else None
    return holder


class HeaderTensors(Mapping[str, TensorInfo]):
    """A checkpoint's tensors as its safetensors shard headers hold them, with no object of their own.

    One merged name → header entry map (``entries``, the decoder's own objects); a :class:`TensorInfo` is built
    only for a name asked for. Comparing, counting and summing use the entries and the headers: a Kimi-K2 side
    has 140 k tensors, and building an object for each cost as much as decoding them.
    """

    __slots__ = ("entries", "shards", "_located")

    def __init__(self, entries: dict[str, TensorEntry], shards: tuple[tuple[RelativePath, SafetensorsHeader], ...]):
        self.entries = entries
        #: (file, header) per shard, in file order.
        self.shards = shards
        self._located: dict[str, tuple[RelativePath, int]] | None = None

    def __getitem__(self, name: str) -> TensorInfo:
        entry = self.entries[name]
        file, start = self._where()[name]
        begin, end = entry.data_offsets
        return TensorInfo(name, entry.dtype, entry.shape, file, (start + begin, start + end))

    def _where(self) -> dict[str, tuple[RelativePath, int]]:
        """Each name's file and the file's data start, built on the first lookup of a tensor's place."""
        if self._located is None:
            located: dict[str, tuple[RelativePath, int]] = {}
            for file, header in self.shards:
                located.update(dict.fromkeys(header.tensors, (file, header.data_start)))
            self._located = located
        return self._located

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def keys(self) -> KeysView[str]:
        return self.entries.keys()

    def __repr__(self) -> str:
        return f"HeaderTensors({len(self.entries)} tensors in {len(self.shards)} shards)"

    def dtype_totals(self) -> dict[DType, tuple[int, int]]:
        """Parameters and bytes per dtype, sorted by dtype name, from each header's byte totals: a header's
        tensors hold exactly their spans' bits (validated), so parameters are bytes × 8 ÷ bits."""
        nbytes: dict[DType, int] = {}
        for _, header in self.shards:
            for dtype, count in header.dtype_bytes.items():
                nbytes[dtype] = nbytes.get(dtype, 0) + count
        return {dtype: (nbytes[dtype] * 8 // DTYPE_BITS[dtype], nbytes[dtype]) for dtype in sorted(nbytes)}


#: What one side learnt of a shard's tensors under a weight map: (the header's tensors, weight map, whether every
#: name of the shard is indexed to it). The other side's same-named shard with the same objects, or the same names
#: under the same map, reuses the answer.
ShardTensors = tuple["Mapping[str, TensorEntry]", "Mapping[str, RelativePath] | None", bool]


class ShardRecords(dict[RelativePath, ShardTensors]):
    """One side's :data:`ShardTensors` by shard file, and the name → entry map it merged them into."""

    entries: dict[str, TensorEntry] | None = None


def tensors_from_shards(
    headers: Mapping[RelativePath, SafetensorsHeader],
    *,
    weight_map: Mapping[str, RelativePath] | None = None,
    index_name: str = "index",
    known: ShardRecords | None = None,
    into: ShardRecords | None = None,
) -> HeaderTensors:
    """Merge shard headers into one name → tensor map, checking them against the index if there is one.

    ``known``: what the other side found of a shard with these very decoded tensors (same file name), reused
    (and its merged map, when every shard's tensors are the other side's); ``into``: where each shard's findings
    and the merged map are recorded for such reuse.
    """
    if known is not None and known.entries is not None and headers and _all_known(headers, known, len(known.entries)):
        return _with_known_entries(headers, weight_map, index_name, known, known.entries)
    entries: dict[str, TensorEntry] = {}
    indexed = weight_map is not None  # so far, every stored (name, shard) pair is the index's
    same_index: bool | None = None  # whether the other side's weight map is this one (asked once, if needed)
    stored = 0
    shards = []
    for file in sorted(headers):
        header = headers[file]
        entries.update(header.tensors)
        stored += len(header.tensors)
        shards.append((file, header))
        shard_indexed = False  # not asked once a shard has failed it (an error is raised below)
        if indexed and weight_map is not None:
            built = known.get(file) if known is not None else None
            if built is not None and same_index is None:  # an equal map (another index file's bytes) answers alike
                same_index = built[1] is weight_map or built[1] == weight_map
            # the other side's answer holds for the same names under the same map: its very tensors, or a shard it
            # found indexed whose names are these (a small map's keys compared, not the index's 140 k looked up)
            if same_index and built is not None and (built[0] is header.tensors or _same_names(built, header.tensors)):
                shard_indexed = built[2]
            else:
                shard_indexed = _indexed_to(header.tensors, file, weight_map)
        if into is not None:
            into[file] = (header.tensors, weight_map, shard_indexed)
        indexed = indexed and shard_indexed
    tensors = HeaderTensors(entries, tuple(shards))
    if into is not None:
        into.entries = entries
    if len(entries) != stored:
        _refuse_name_in_two_shards({file: headers[file].tensors for file in headers}, index_name)
    if weight_map is not None and not (indexed and stored == len(weight_map)):
        check_against_index(tensors, weight_map, index_name)
    return tensors


def _all_known(headers: Mapping[RelativePath, SafetensorsHeader], known: ShardRecords, count: int) -> bool:
    """Whether every shard's tensors are the other side's same-named shard's, and as many in all as it merged."""
    found = 0
    for file, header in headers.items():
        built = known.get(file)
        if built is None or built[0] is not header.tensors:
            return False
        found += len(header.tensors)
    return found == count


def _with_known_entries(
    headers: Mapping[RelativePath, SafetensorsHeader],
    weight_map: Mapping[str, RelativePath] | None,
    index_name: str,
    known: ShardRecords,
    entries: dict[str, TensorEntry],
) -> HeaderTensors:
    """These shards' tensors when each is the other side's same-named shard's and they add up to all it merged:
    its merged map, as it is (no name is in two shards: it was checked there); checked against this index."""
    tensors = HeaderTensors(entries, tuple((file, headers[file]) for file in sorted(headers)))
    if weight_map is None:
        return tensors
    theirs = known[next(iter(headers))][1]  # the other side's one weight map
    if theirs is weight_map or theirs == weight_map:
        if all(known[file][2] for file in headers) and len(entries) == len(weight_map):
            return tensors
    elif all(_indexed_to(header.tensors, file, weight_map) for file, header in headers.items()):
        if len(entries) == len(weight_map):
            return tensors
    check_against_index(tensors, weight_map, index_name)
    return tensors


def _same_names(built: ShardTensors, tensors: Mapping[str, TensorEntry]) -> bool:
    """Whether a shard the other side found indexed to its file holds exactly these names."""
    return built[2] and built[0].keys() == tensors.keys()


def _indexed_to(names: Iterable[str], file: RelativePath, weight_map: Mapping[str, RelativePath]) -> bool:
    """Whether the index names ``file`` for every one of these names: a C-level subset test."""
    return dict.fromkeys(names, file).items() <= weight_map.items()


def merge_tensor_maps(
    per_file: Mapping[RelativePath, Mapping[str, TensorInfo]],
    weight_map: Mapping[str, RelativePath] | None,
    index_name: str,
) -> dict[str, TensorInfo]:
    """Merge per-file tensor maps (of torch archives), refusing a name in two files and checking the index."""
    tensors: dict[str, TensorInfo] = {}
    for file in sorted(per_file):
        tensors.update(per_file[file])
    if len(tensors) != sum(map(len, per_file.values())):
        _refuse_name_in_two_shards(per_file, index_name)
    if weight_map is not None:
        check_against_index(tensors, weight_map, index_name)
    return tensors


def _refuse_name_in_two_shards(names_by_file: Mapping[RelativePath, Iterable[str]], index_name: str) -> None:
    """Raise for the first name stored in two files, in the order the files are merged (sorted)."""
    first_in: dict[str, RelativePath] = {}
    for file in sorted(names_by_file):
        for name in names_by_file[file]:
            if name in first_in:
                both = f"{printable_name(first_in[name])} and {printable_name(file)}"
                raise IndexError_(index_name, f"tensor {quoted_name(name)} is stored in two shards: {both}")
            first_in[name] = file


def check_against_index(
    tensors: Mapping[str, TensorInfo], weight_map: Mapping[str, RelativePath], index_name: str
) -> None:
    """Every name the index lists is stored in the shard it names, and every stored name is listed."""
    for name, file in weight_map.items():
        found = tensors.get(name)
        if found is None:
            listed = f"tensor {quoted_name(name)} is listed in the index for {printable_name(file)}"
            raise IndexError_(index_name, f"{listed} but {printable_name(file)} does not hold it")
        if found.file != file:
            listed, stored = printable_name(file), printable_name(found.file)
            raise IndexError_(index_name, f"tensor {quoted_name(name)} is listed in {listed} but stored in {stored}")
    for name, info in tensors.items():
        if name not in weight_map:
            raise IndexError_(
                index_name, f"tensor {quoted_name(name)} is in shard {printable_name(info.file)} but not in the index"
            )


def check_shard_path(path: str, *, index_name: str) -> RelativePath:
    """A shard path from an index must stay inside the checkpoint: relative, no '..', no drive."""
    if not isinstance(path, str) or not path or not path.isprintable():
        raise IndexError_(index_name, f"shard path {quoted_name(path)} is not a file name")
    normal = posixpath.normpath(path.replace("\\", "/"))  # normalised first: "./C:/x" is a drive path too
    if normal.startswith("/") or (len(normal) > 1 and normal[1] == ":"):
        raise IndexError_(index_name, f"shard path {quoted_name(path)} is absolute; it must be inside the checkpoint")
    if ".." in normal.split("/"):
        raise IndexError_(index_name, f"shard path {quoted_name(path)} escapes the checkpoint folder")
    return normal


def check_json_size(size: int | None, where: str, *, what: str, error: type[CkptdiffError] = CkptdiffError) -> None:
    """Refuse a JSON file too big to be a config or an index before reading (or downloading) any of it."""
    if size is not None and size > MAX_JSON_BYTES:
        raise error(where, f"{what} is {size:,} bytes, over the {MAX_JSON_BYTES:,}-byte limit for a JSON file")


def parse_index(raw: bytes, *, index_name: str) -> dict[str, RelativePath]:
    """Validate a ``*.safetensors.index.json`` and return its weight_map (tensor name → shard path)."""
    return read_index(raw, index_name=index_name).weight_map


class ParsedIndex(msgspec.Struct, frozen=True):
    """An index's text, its validated weight map, and how many members its top-level object has."""

    raw: bytes
    weight_map: dict[str, RelativePath]
    members: int


def read_index(raw: bytes, *, index_name: str) -> ParsedIndex:
    """:func:`parse_index`, keeping what :func:`weight_map_as_in` compares another index's text with."""
    document = _load_json(raw, index_name, what="index", error=IndexError_, unique_keys=True)
    if not isinstance(document, dict):
        raise IndexError_(index_name, "index is not a JSON object")
    weight_map = document.get("weight_map")
    if not isinstance(weight_map, dict):
        raise IndexError_(index_name, "index has no 'weight_map' object")
    return ParsedIndex(raw, _checked_weight_map(weight_map, index_name), len(document))


def _checked_weight_map(weight_map: dict[Any, Any], index_name: str) -> dict[str, RelativePath]:
    if set(map(type, weight_map.values())) == {str}:
        # ~60 shard paths for ~140 k names: check each once, in the order the index first names it
        paths = dict.fromkeys(weight_map.values())
        normalised = {path: check_shard_path(path, index_name=index_name) for path in paths}
        if all(path == shard for path, shard in normalised.items()):
            return weight_map
        return {name: normalised[path] for name, path in weight_map.items()}
    return {name: check_shard_path(path, index_name=index_name) for name, path in weight_map.items()}


_WEIGHT_MAP_KEY = b'"weight_map"'
_JSON_SPACE = b" \t\r\n"


def weight_map_as_in(raw: bytes, other: ParsedIndex) -> dict[str, RelativePath] | None:
    """``other``'s weight map when index ``raw`` is ``other``'s text but for the members before a last
    ``"weight_map"`` member (another ``metadata`` total size, say): those members are parsed and checked as a
    whole index is, the map's text is not (it is ``other``'s, already checked). None otherwise: ``raw`` is parsed.

    The text from the first ``"weight_map"`` on is the same in both; in ``other`` it holds only the weight map
    (its members before it are all but one), and in ``raw`` what precedes it is valid before such a last member.
    """
    at, theirs = raw.find(_WEIGHT_MAP_KEY), other.raw.find(_WEIGHT_MAP_KEY)
    end, other_end = text_end(raw, _JSON_SPACE), text_end(other.raw, _JSON_SPACE)
    if min(at, theirs, end, other_end) < 0 or not same_text(raw, at, end, other.raw, theirs, other_end):
        return None
    if _members_before(other.raw[:theirs]) != other.members - 1 or _members_before(raw[:at]) is None:
        return None
    return other.weight_map


def _members_before(head: bytes) -> int | None:
    """How many members an index's top-level object has before its last, ``"weight_map"``, member when it
    starts with ``head``; None when ``head`` is not such a start."""
    try:
        document = _load_json(head + _WEIGHT_MAP_KEY + b": {}}", "index", what="index", unique_keys=True)
    except CkptdiffError:
        return None
    if not isinstance(document, dict) or next(reversed(document), None) != "weight_map" or document["weight_map"]:
        return None
    return len(document) - 1


def parse_config(raw: bytes, *, config_name: str) -> dict[str, Any]:
    document = _load_json(raw, config_name, what="config.json")
    if not isinstance(document, dict):
        raise CkptdiffError(config_name, "config.json is not a JSON object")
    check_config_values(document, config_name)
    return document


def _load_json(
    raw: bytes, where: str, *, what: str, error: type[CkptdiffError] = CkptdiffError, unique_keys: bool = False
) -> Any:
    plain = _decode_plain(raw) if unique_keys else None
    if plain is not None:
        return plain
    try:
        text = raw.decode("utf-8")
        document = json.loads(text, object_pairs_hook=reject_duplicate_keys if unique_keys else None)
    except UnicodeDecodeError:
        raise error(where, f"{what} is not valid UTF-8") from None
    except DuplicateKeyError as dup:
        raise error(where, f"{what} has duplicate key {quoted_name(dup.args[0])}") from None
    except RecursionError:
        raise error(where, f"{what} nests too deeply") from None
    except ValueError as err:
        raise error(where, f"{what} is not valid JSON ({str(err)[:80]})") from None
    if has_lone_surrogate(text, document):
        raise error(where, f"{what} has a string with a lone surrogate escape (not valid Unicode)")
    return document


def _decode_plain(raw: bytes) -> Any | None:
    """A JSON document without escapes and without a key named twice, decoded in C; None for anything else."""
    return decode_unescaped(raw, msgspec.json.decode, _strings_in)


def _strings_in(value: Any) -> int:
    """Strings in a decoded JSON value, keys included."""
    if type(value) is dict:
        items = list(value.values())
        count = len(items)
    elif type(value) is list:
        items, count = value, 0
    else:
        return int(type(value) is str)
    types = list(map(type, items))
    count += types.count(str)
    if types.count(dict) or types.count(list):  # an index nests little: recurse into the few containers only
        count += sum(_strings_in(item) for item, kind in zip(items, types) if kind is dict or kind is list)
    return count
