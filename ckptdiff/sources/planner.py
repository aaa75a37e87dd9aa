"""Which files make up a checkpoint and reading their metadata, once for every store: a Source → a Checkpoint.

One run: list the files; choose the weights (``model.safetensors``, an index and its shards, loose
``.safetensors`` files, then torch ``.bin``/``.pt``); read config.json and the index whole (size-capped); read
every needed shard's header, narrowed to the shards holding ``wanted`` tensors, sized from the index. A remote
source's reads overlap on a pool of ``source.jobs`` threads (or one pool shared by both sides of a comparison):
config.json and the index download beside the shard headers, and with an index the shards the listing already
shows start before the index has arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed, wait
from typing import Any, TypeVar

import msgspec

from ..checkpoint import (
    CONFIG_NAME,
    INDEX_SUFFIX,
    SAFETENSORS_SUFFIX,
    TORCH_INDEX_SUFFIX,
    TORCH_SUFFIXES,
    WEIGHT_FILE_SUFFIXES,
    Checkpoint,
    FileInfo,
    RelativePath,
    TensorInfo,
    check_json_size,
    merge_tensor_maps,
    parse_config,
    parse_index,
    read_index,
    tensors_from_shards,
)
from ..errors import CkptdiffError, IndexError_, SourceError, printable_name, scrub_secrets
from ..progress import Bar, Progress
from .base import INITIAL_RANGE, ListedFile, Listing, Source
from .wanted import Wanted, shards_after_index

SINGLE_FILE_NAME = "model.safetensors"
#: The smallest first read when the index lets us estimate a shard's header (estimates carry their own margin).
MIN_ESTIMATED_RANGE = 16 * 1024
#: Weight files a checkpoint may hold in formats ckptdiff does not read, named in the "no weights" message.
_OTHER_WEIGHTS = (".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".npz", ".pkl")
#: Formats people point ckptdiff at by mistake, by suffix: named, with what ckptdiff reads instead.
_FORMAT_NAMES = {".gguf": "GGUF (llama.cpp)", ".onnx": "ONNX", ".h5": "HDF5 (Keras)", ".msgpack": "Flax msgpack"}
_READABLE = "ckptdiff reads safetensors files, folders and indexes, and torch .bin/.pt/.pth files"

T = TypeVar("T")
#: The most shards started before their index arrives: real checkpoints have tens to a few hundred, and a listing
#: showing more files named like shards is no guide to which the index names.
MOST_GUESSED_SHARDS = 1024
#: The most loose .safetensors files (no index) read as one checkpoint.
MOST_LOOSE_SHARDS = 4096


class WeightPlan(msgspec.Struct, frozen=True):
    """The weight files to read: an index and the shards it names, or a list of files; safetensors or torch."""

    index: RelativePath | None
    files: tuple[RelativePath, ...]  # without an index: every file is read (one, or loose shards)
    torch: bool = False


def choose_weights(listing: Listing, source: Source) -> WeightPlan:
    """The same rules for every store: the named file, else model.safetensors, an index, loose shards, torch."""
    files, named = listing.files, listing.named
    if named is not None:
        if named.endswith(INDEX_SUFFIX):
            return WeightPlan(named, ())
        if named.endswith(SAFETENSORS_SUFFIX):
            return WeightPlan(None, (named,))
        if named.endswith(TORCH_INDEX_SUFFIX):
            return WeightPlan(named, (), torch=True)
        if named.endswith(TORCH_SUFFIXES):
            return WeightPlan(None, (named,), torch=True)
        known = next((name for suffix, name in _FORMAT_NAMES.items() if named.lower().endswith(suffix)), None)
        if known is not None:
            raise SourceError(source.name_of(named), f"is a {known} file", _READABLE)
        raise SourceError(source.name_of(named), "is not named like a weight file", _READABLE)
    if SINGLE_FILE_NAME in files:
        return WeightPlan(None, (SINGLE_FILE_NAME,))
    root = sorted(p for p in files if "/" not in p)
    indexes = [p for p in root if p.endswith(INDEX_SUFFIX)]
    if len(indexes) > 1:
        preferred = "model" + INDEX_SUFFIX
        if preferred not in indexes:
            raise SourceError(source.name_of(), f"several indexes ({', '.join(indexes)}); name the one to use")
        indexes = [preferred]
    if indexes:
        return WeightPlan(indexes[0], ())
    loose = tuple(p for p in root if p.endswith(SAFETENSORS_SUFFIX))
    if len(loose) > MOST_LOOSE_SHARDS:  # each would be read: no checkpoint is that many files without an index
        raise SourceError(
            source.name_of(),
            f"holds {len(loose):,} .safetensors files and no index: not one checkpoint ckptdiff reads whole",
            "name the checkpoint's file or its *.safetensors.index.json",
        )
    if loose:  # no index: every safetensors file is a shard, and no tensor may appear twice
        return WeightPlan(None, loose)
    # Legacy torch weights (pytorch_model.bin or its sharded index), read without running pickle code.
    from . import torch_pickle

    if torch_pickle.TORCH_INDEX_NAME in files:
        return WeightPlan(torch_pickle.TORCH_INDEX_NAME, (), torch=True)
    if torch_pickle.TORCH_SINGLE_FILE_NAME in files:
        return WeightPlan(None, (torch_pickle.TORCH_SINGLE_FILE_NAME,), torch=True)
    others = [p for p in root if p.endswith(_OTHER_WEIGHTS)]
    shown = others or root
    hint = f"it holds: {', '.join(shown[:6])}{' …' if len(shown) > 6 else ''}" if shown else "it holds no files"
    if others:
        hint += " (not safetensors)"
    else:
        hint = _weights_below(listing, source) or (_asked_for(listing, source) if listing.asked else hint)
    raise SourceError(source.name_of(), "no safetensors weights (model.safetensors or *.safetensors.index.json)", hint)


def _asked_for(listing: Listing, source: Source) -> str:
    """What a web server (no listing to read, no folder page) was asked for and had, and the spec to give."""
    missing = ", ".join(name for name in listing.asked if name not in listing.files)
    found = ", ".join(sorted(listing.files))
    example = source.spec_of("SUBFOLDER/" + SINGLE_FILE_NAME)
    give = f"give the URL of the weights' file or index, e.g. {example}"
    return f"found {found}, none of {missing}; a web server lists no folder: {give}"


def _weights_below(listing: Listing, source: Source) -> str | None:
    """ "its weights are in a subfolder: give SPEC" when they are (a repo's drafter/, a run's checkpoint-100/)."""
    # each path scrubbed whole before it is cut at its last "/": a token in a listed name (a hostile server's)
    # may hold a "/", and the printed line's scrubbing would no longer see all of it in the folder's part
    paths = map(scrub_secrets, source.files_below(listing))
    folders = sorted({p.rpartition("/")[0] for p in paths if p.endswith(WEIGHT_FILE_SUFFIXES)})
    if not folders:
        return None
    named = ", ".join(source.spec_of(folder) for folder in folders[:3]) + (" …" if len(folders) > 3 else "")
    if len(folders) == 1:
        return f"its weights are in a subfolder: give {named}"
    return f"its weights are in subfolders: give one of {named}"


def narrow_to_wanted(
    weight_map: Mapping[str, RelativePath], wanted: AbstractSet[str] | None
) -> tuple[list[RelativePath], Mapping[str, RelativePath]]:
    """The shards to read and the part of the weight map they cover: all of them, or those holding ``wanted``."""
    if wanted is None:
        return sorted(set(weight_map.values())), weight_map
    shards = sorted({weight_map[name] for name in wanted if name in weight_map})
    keep = set(shards)
    return shards, {name: file for name, file in weight_map.items() if file in keep}


def read_checkpoint(
    source: Source,
    *,
    wanted: AbstractSet[str] | Wanted | None = None,
    progress: Progress | None = None,
    pool: Executor | None = None,
) -> Checkpoint:
    """Read a checkpoint's metadata from any store. With ``wanted``, read only the shards holding those tensors:
    the first shard, and the index and the shards it names only when that one lacks some (:mod:`.wanted`).

    ``pool``: where a remote source's header reads run, shared with other reads of the same run (both sides of a
    comparison: one bound on the requests in flight); by default a pool of ``source.jobs`` threads of its own.
    ``progress``: a bar of the weight files read (:mod:`ckptdiff.progress`), or None.
    """
    listing = source.list_files()
    plan = choose_weights(listing, source)
    files = listing.files
    config_entry = files.get(CONFIG_NAME)
    checks = ((config_entry, "config.json", CkptdiffError), (files.get(plan.index or ""), "index", IndexError_))
    for entry, what, error in checks:
        if entry is not None:  # refused before downloading anything: no real config or index is this big
            check_json_size(entry.size, source.name_of(entry.path), what=what, error=error)
    own_pool = source.remote and pool is None
    if not source.remote:
        pool = _Inline()
    elif pool is None:
        pool = ThreadPoolExecutor(source.jobs, "ckptdiff-read")
    small: Executor = ThreadPoolExecutor(2, "ckptdiff-read-json") if source.remote else _Inline()
    read_one = _torch_reader(source) if plan.torch else source.read_header
    bar = progress(source.display, None, "shard") if progress is not None else None
    if bar is not None:
        read_one = _advancing(read_one, bar)
    try:
        config_job = small.submit(_read_config, source, config_entry) if config_entry is not None else None
        weight_map: Mapping[str, RelativePath] | None = None
        if plan.index is not None:
            jobs, weight_map = _start_indexed(source, pool, small, files, plan.index, wanted, read_one, plan.torch)
        else:
            jobs = {name: pool.submit(read_one, files[name], None) for name in plan.files}
        if bar is not None:
            bar.set_total(len(jobs))
        per_file = _collect(jobs)
        config = config_job.result() if config_job is not None else None
    finally:
        if bar is not None:
            bar.close()
        if own_pool:
            pool.shutdown(wait=True, cancel_futures=True)
        small.shutdown(wait=True, cancel_futures=True)
        source.finish_reading()
    index_name = source.name_of(plan.index) if plan.index else source.name_of()
    order = sorted(per_file)
    tensors: Mapping[str, TensorInfo]
    if plan.torch:
        tensors = merge_tensor_maps({name: per_file[name].tensors for name in order}, weight_map, index_name)
    else:
        shared = source.shared
        tensors = tensors_from_shards(
            per_file,
            weight_map=weight_map,
            index_name=index_name,
            known=shared.known_tensors() if shared is not None else None,
            into=shared.tensors_to_record() if shared is not None else None,
        )
    sizes = {name: per_file[name].file_size for name in order}
    described = source.describe(plan.index or plan.files[0])
    return Checkpoint(
        spec=source.display,
        source_spec=source.spec,
        kind=described.kind,
        location=described.location,
        revision=described.revision,
        tensors=tensors,
        config=config,
        files=tuple(FileInfo(name, _size(files.get(name), sizes[name]), _sha256(files.get(name))) for name in order),
    )


def _start_indexed(
    source: Source,
    pool: Executor,
    small: Executor,
    files: Mapping[RelativePath, ListedFile],
    index: RelativePath,
    wanted: AbstractSet[str] | Wanted | None,
    read_one: Callable[[ListedFile, int | None], Any],
    torch: bool,
) -> tuple[dict[RelativePath, Future[Any]], Mapping[str, RelativePath] | None]:
    """Jobs for the shards the index names (only those holding ``wanted``), and the weight map they cover.

    Reading every shard of a remote safetensors checkpoint, the ones the listing shows are started while the
    index downloads, their first range sized from the index's size; the index then decides which are kept.
    """
    if wanted is not None and not torch:
        return _start_wanted(source, pool, small, files, index, Wanted.of(wanted), read_one)
    if wanted is not None:
        wanted = Wanted.of(wanted).names
    index_name = source.name_of(index)
    index_job = small.submit(source.read_small, files[index], what="index", error=IndexError_)
    early: dict[RelativePath, Future[Any]] = {}
    if wanted is None and source.remote and not torch:
        guesses = _guessed_shards(files, index)
        early = {name: pool.submit(read_one, files[name], first) for name, first in guesses.items()}
    shards, weight_map = narrow_to_wanted(_weight_map(source, index_job.result(), index_name), wanted)
    entries = {shard: _shard_entry(source, files, shard, index_name) for shard in shards}
    jobs = {shard: early.pop(shard) for shard in shards if shard in early}
    if len(jobs) < len(shards):
        # a local read needs no estimate (it reads the length first); 140 k names cost ~20 ms to estimate
        estimates = _header_estimates(weight_map) if source.remote else {}
        for shard in shards:
            if shard not in jobs:
                jobs[shard] = pool.submit(read_one, entries[shard], estimates.get(shard))
    for unused in early.values():
        unused.cancel()
    return jobs, weight_map


def _start_wanted(
    source: Source,
    pool: Executor,
    small: Executor,
    files: Mapping[RelativePath, ListedFile],
    index: RelativePath,
    wanted: Wanted,
    read_one: Callable[[ListedFile, int | None], Any],
) -> tuple[dict[RelativePath, Future[Any]], Mapping[str, RelativePath] | None]:
    """The first shard's header; the index, and the shards it names, only when that header lacks a wanted tensor
    (:mod:`.wanted`). Without the index there is no weight map to check the header against."""
    guesses = _shard_guesses(files, index)  # the first in sort order holds the embedding in every real layout
    first = guesses[0] if guesses else None
    jobs: dict[RelativePath, Future[Any]] = {}
    if first is not None:
        jobs[first] = pool.submit(read_one, files[first], None)
        if wanted.met_by(jobs[first].result().tensors.keys()):
            return jobs, None
    index_name = source.name_of(index)
    raw = small.submit(source.read_small, files[index], what="index", error=IndexError_).result()
    weight_map = parse_index(raw, index_name=index_name)
    shards = shards_after_index(wanted, weight_map, first)
    keep = set(shards)
    weight_map = {name: file for name, file in weight_map.items() if file in keep}
    estimates = _header_estimates(weight_map) if source.remote else {}
    for shard in shards:
        if shard not in jobs:
            jobs[shard] = pool.submit(read_one, _shard_entry(source, files, shard, index_name), estimates.get(shard))
    return {shard: jobs[shard] for shard in shards}, weight_map


def _weight_map(source: Source, raw: bytes, index_name: str) -> dict[RelativePath, RelativePath]:
    """The index's weight map; side B of a local pair whose index bytes are A's reuses A's (:mod:`.shared_shards`)."""
    shared = source.shared
    weight_map = shared.weight_map_for(raw) if shared is not None else None
    if weight_map is None:
        index = read_index(raw, index_name=index_name)
        weight_map = index.weight_map
        if shared is not None:
            shared.remember_index(index)
    return weight_map


def _shard_entry(
    source: Source, files: Mapping[RelativePath, ListedFile], shard: RelativePath, index_name: str
) -> ListedFile:
    """A shard the index names: from the listing, else by asking the store (one in a subfolder); absent, refused."""
    entry = files.get(shard) or source.stat(shard)
    if entry is None:
        shown = printable_name(shard)
        if source.is_folder(shard) or any(path.startswith(f"{shard}/") for path in files):
            raise IndexError_(index_name, f"shard {shown} listed in the index is a folder, not a file")
        raise IndexError_(index_name, f"shard {shown} listed in the index is {source.absent}")
    return entry


def _collect(jobs: Mapping[RelativePath, Future[T]]) -> dict[RelativePath, T]:
    """Wait for the per-file jobs; on failure, stop the rest and raise the first failing file's error by name."""
    by_future = {future: name for name, future in jobs.items()}
    results: dict[RelativePath, T] = {}
    for future in as_completed(by_future):
        if future.exception() is not None:
            break
        results[by_future[future]] = future.result()
    if len(results) < len(jobs):
        for future in jobs.values():
            future.cancel()
        wait(list(jobs.values()))
        failed = [name for name, future in sorted(jobs.items()) if not future.cancelled() and future.exception()]
        error = jobs[failed[0]].exception()
        assert error is not None  # a job that failed holds its exception
        raise error
    return results


def _advancing(read_one: Callable[[ListedFile, int | None], T], bar: Bar) -> Callable[[ListedFile, int | None], T]:
    def read(entry: ListedFile, first_range: int | None) -> T:
        result = read_one(entry, first_range)
        bar.advance()
        return result

    return read


def _torch_reader(source: Source) -> Callable[[ListedFile, int | None], Any]:
    from . import torch_pickle

    def read(entry: ListedFile, _first_range: int | None) -> _TorchFile:
        name = source.name_of(entry.path)
        local = source.local_path(entry.path)
        if local is not None:
            archive = torch_pickle.read_archive(local, source=name)
        else:
            with source.open_file(entry) as handle:
                archive = torch_pickle.read_archive_from(handle, name, entry.size or 0)
        return _TorchFile(archive.tensor_infos(entry.path), archive.file_size)

    return read


class _TorchFile(msgspec.Struct, frozen=True):
    tensors: dict[str, TensorInfo]
    file_size: int


def _read_config(source: Source, entry: ListedFile) -> dict[str, Any]:
    raw = source.read_small(entry, what="config.json")
    return parse_config(raw, config_name=source.name_of(CONFIG_NAME))


def _size(entry: ListedFile | None, read: int | None) -> int | None:
    return entry.size if entry is not None and entry.size is not None else read


def _sha256(entry: ListedFile | None) -> str | None:
    return entry.sha256 if entry is not None else None


def _shard_guesses(files: Mapping[RelativePath, ListedFile], index: RelativePath) -> list[RelativePath]:
    """Root files named like the index's shards (``model-00001-of-00009.safetensors`` for ``model.*``)."""
    stem = index[: -len(INDEX_SUFFIX)]
    return sorted(p for p in files if "/" not in p and p.startswith(stem + "-") and p.endswith(SAFETENSORS_SUFFIX))


def _guessed_shards(files: Mapping[RelativePath, ListedFile], index: RelativePath) -> dict[RelativePath, int]:
    """The shards started before the index arrives (:func:`_shard_guesses`), each with its first range; none when
    the listing shows more than :data:`MOST_GUESSED_SHARDS` (the index alone then says which to read)."""
    guesses = _shard_guesses(files, index)
    if len(guesses) > MOST_GUESSED_SHARDS:
        return {}
    return dict.fromkeys(guesses, _first_range_from_index(files[index].size, len(guesses)))


def _first_range_from_index(index_size: int | None, shards: int) -> int:
    """An index entry is about 2/3 of the header entry for the same tensor: size the first read from it."""
    if not index_size or not shards:
        return INITIAL_RANGE
    return max(MIN_ESTIMATED_RANGE, int(1.5 * index_size / shards) + 8192)


def _header_estimates(weight_map: Mapping[str, RelativePath]) -> dict[RelativePath, int]:
    """A generous guess of each shard's header size from the tensor names the index gives it."""
    estimates: dict[RelativePath, int] = {}
    for name, shard in weight_map.items():
        estimates[shard] = estimates.get(shard, 4096) + len(name.encode()) + 110
    return {shard: max(MIN_ESTIMATED_RANGE, int(total * 1.2)) for shard, total in estimates.items()}


class _Inline(Executor):
    """Runs each job as it is submitted: a local disk's reads are CPU work, which threads would only contend on."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as err:  # kept in the future: raised in the order the planner asks for results
            future.set_exception(err)
        return future
