"""Checkpoints on the Hugging Face Hub, read lazily: safetensors headers through ranged GETs, never the weights.

One run against ``org/name@rev``:

1. resolve ``rev`` to a commit and list every file with its size and LFS sha256 in one call
   (``/api/models/{repo}/revision/{rev}?blobs=true``); every later request is pinned to that commit;
2. download ``config.json`` and the index through ``hf_hub_download`` (the normal HF cache);
3. read each shard's header with one ranged GET sized for typical headers (or, with an index, for the tensors
   it lists), then only the missing remainder; shards in parallel on a pool of ``options.jobs`` threads.

Listings and headers are kept in :mod:`.header_cache` by repo + commit + file, so a second run pinned to a
commit makes no request and one on a branch makes one. ``--offline`` / ``HF_HUB_OFFLINE=1`` reads only caches.
All traffic goes through huggingface_hub: its endpoint, token, HTTP session, retry policy and error classes.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..checkpoint import (
    INDEX_SUFFIX,
    MAX_JSON_BYTES,
    Checkpoint,
    FileInfo,
    RelativePath,
    check_json_size,
    parse_config,
    parse_index,
    tensors_from_shards,
)
from ..errors import CkptdiffError, HeaderError, SourceError, scrub_secrets
from ..safetensors_header import (
    LENGTH_PREFIX_BYTES,
    MAX_HEADER_BYTES,
    SafetensorsHeader,
    parse_file_prefix,
    read_header_length,
)
from .header_cache import HeaderCache, ListedFile
from .wanted import Wanted, first_shard, shards_after_index

if TYPE_CHECKING:
    from . import HubSpec, SourceOptions

CONFIG_NAME = "config.json"
SINGLE_FILE_NAME = "model.safetensors"
#: The first ranged GET of a header: 97 % of the Hub's headers fit in 100 kB (huggingface_hub's measurement).
INITIAL_RANGE = 100_000
#: The smallest first GET when the index lets us estimate a shard's header (estimates carry their own margin).
MIN_ESTIMATED_RANGE = 16 * 1024
#: Retries for one request: status 408/429/5xx (honouring Retry-After) and dropped connections. A timeout or a
#: refused connection is reported at once.
MAX_RETRIES = 3
#: A body slower than this on average, past the timeout's grace, counts as a timeout (a trickling server).
MIN_BODY_RATE = 16 * 1024
#: Below this many shards the progress bar is not worth drawing.
PROGRESS_MIN_SHARDS = 4
LOGIN_HINT = "set HF_TOKEN or run `hf auth login`"
OFFLINE_HINT = "run once without --offline/HF_HUB_OFFLINE=1 to fill the cache"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: Weight files a repo may hold instead of safetensors, for the "not a safetensors repo" message.
_OTHER_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".npz", ".pkl")


def read_hub(
    spec: str, parsed: HubSpec, options: SourceOptions, *, wanted: AbstractSet[str] | Wanted | None = None
) -> Checkpoint:
    """Read a Hub checkpoint's metadata. With ``wanted``, a sharded repo reads only the shards holding them."""
    reader = _HubReader(spec, parsed, options)
    try:
        return reader.read(wanted)
    except CkptdiffError:
        raise
    except Exception as err:
        explained = reader.explain(err)
        if explained is None:
            raise
        raise explained from None


class _BodyInterrupted(Exception):
    """A transport error while reading a response body (kept apart from huggingface_hub's request retries)."""


class _HubReader:
    """One Hub checkpoint being read: its repo, the commit once resolved, and how to fetch (from SourceOptions and
    huggingface_hub's configuration, read when the run starts)."""

    def __init__(self, spec: str, parsed: HubSpec, options: SourceOptions) -> None:
        from huggingface_hub import constants

        self.spec = spec
        self.repo_id = parsed.repo_id
        self.revision = parsed.revision
        self.endpoint = constants.ENDPOINT
        self.offline = options.offline or constants.is_offline_mode()
        self.jobs = max(1, options.jobs)
        self.progress = options.progress
        self.timeout = float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
        self.etag_timeout = float(constants.HF_HUB_ETAG_TIMEOUT)
        self.hf_cache = constants.HF_HUB_CACHE
        self.cache = HeaderCache(self.hf_cache, self.repo_id)
        self.commit: str | None = None
        self._headers: dict[str, str] | None = None

    def _auth_headers(self) -> dict[str, str]:
        """huggingface_hub's headers (user agent, token from HF_TOKEN or the stored login), built once a run."""
        from huggingface_hub.utils import build_hf_headers

        if self._headers is None:
            self._headers = build_hf_headers()
        return dict(self._headers)

    # --- naming -----------------------------------------------------------------------------------------

    @property
    def where(self) -> str:
        if self.commit:
            return f"{self.repo_id}@{self.commit[:12]}"
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id

    def _source(self, path: str) -> str:
        return f"{self.where}:{path}"

    # --- the plan ---------------------------------------------------------------------------------------

    def read(self, wanted: AbstractSet[str] | Wanted | None) -> Checkpoint:
        commit, listing = self._resolve()
        self.commit = commit
        files = {f.path: f for f in listing}
        single, index, loose = _weights_plan(files, self.where)
        for name, what in ((CONFIG_NAME, "config.json"), (index, "index")):
            if name in files:  # refused before downloading: no real config or index is this big
                check_json_size(files[name].size, self._source(name), what=what)
        index_name = self._source(index) if index else self.where
        weight_map: dict[str, RelativePath] | None = None
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="ckptdiff-hub")
        small = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ckptdiff-hub-json")  # config, index
        try:
            config_job = small.submit(self._fetch_file, CONFIG_NAME) if CONFIG_NAME in files else None
            if index is not None:
                jobs, weight_map = self._start_sharded(pool, small, files, index, wanted)
            else:
                jobs = {name: pool.submit(self._header, files[name], None) for name in ([single] if single else loose)}
            headers = self._collect(jobs)
            config = None
            if config_job is not None:
                config = parse_config(Path(config_job.result()).read_bytes(), config_name=self._source(CONFIG_NAME))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            small.shutdown(wait=True, cancel_futures=True)
        order = sorted(headers)
        return Checkpoint(
            spec=self.spec,
            kind="hub",
            location=self.repo_id,
            revision=commit,
            tensors=tensors_from_shards(headers, weight_map=weight_map, index_name=index_name),
            config=config,
            files=tuple(FileInfo(name, files[name].size, files[name].sha256) for name in order),
            metadata={name: headers[name].metadata for name in order},
        )

    def _start_sharded(
        self,
        pool: ThreadPoolExecutor,
        small: ThreadPoolExecutor,
        files: dict[str, ListedFile],
        index: RelativePath,
        wanted: AbstractSet[str] | Wanted | None,
    ) -> tuple[dict[RelativePath, Future[SafetensorsHeader]], dict[str, RelativePath] | None]:
        """Header jobs for the shards the index names (with ``wanted``, see :meth:`_start_wanted`), and the weight
        map.

        The shards the listing shows are started while the index downloads, their first range sized from the
        index's size; the index then decides which are kept.
        """
        if wanted is not None:
            return self._start_wanted(pool, small, files, index, Wanted.of(wanted))
        index_name = self._source(index)
        index_job = small.submit(self._fetch_file, index)
        guesses = _shard_guesses(files, index)
        first = _first_range_from_index(files[index].size, len(guesses))
        early = {name: pool.submit(self._header, files[name], first) for name in guesses}
        weight_map = parse_index(Path(index_job.result()).read_bytes(), index_name=index_name)
        shards = sorted(set(weight_map.values()))
        missing = [shard for shard in shards if shard not in files]
        if missing:
            raise CkptdiffError(index_name, f"shard {missing[0]} listed in the index is not in the repo")
        jobs = {shard: early.pop(shard) for shard in shards if shard in early}
        if len(jobs) < len(shards):
            estimates = _header_estimates(weight_map)
            for shard in shards:
                if shard not in jobs:
                    jobs[shard] = pool.submit(self._header, files[shard], estimates[shard])
        for unused in early.values():
            unused.cancel()
        return jobs, weight_map

    def _start_wanted(
        self,
        pool: ThreadPoolExecutor,
        small: ThreadPoolExecutor,
        files: dict[str, ListedFile],
        index: RelativePath,
        wanted: Wanted,
    ) -> tuple[dict[RelativePath, Future[SafetensorsHeader]], dict[str, RelativePath] | None]:
        """The first shard's header; the index (and the shards it names) only when that header lacks a wanted
        tensor (:mod:`.wanted`). Without the index there is no weight map to check against."""
        first = first_shard(files, index)
        jobs: dict[RelativePath, Future[SafetensorsHeader]] = {}
        if first is not None:
            jobs[first] = pool.submit(self._header, files[first], None)
            if wanted.met_by(jobs[first].result().tensors.keys()):
                return jobs, None
        index_name = self._source(index)
        index_path = Path(small.submit(self._fetch_file, index).result())
        weight_map = parse_index(index_path.read_bytes(), index_name=index_name)
        shards = shards_after_index(wanted, weight_map, first)
        weight_map = {name: file for name, file in weight_map.items() if file in shards}
        missing = [shard for shard in shards if shard not in files]
        if missing:
            raise CkptdiffError(index_name, f"shard {missing[0]} listed in the index is not in the repo")
        estimates = _header_estimates(weight_map)
        for shard in shards:
            if shard not in jobs:
                jobs[shard] = pool.submit(self._header, files[shard], estimates[shard])
        return {shard: jobs[shard] for shard in shards}, weight_map

    def _collect(self, jobs: dict[RelativePath, Future[SafetensorsHeader]]) -> dict[RelativePath, SafetensorsHeader]:
        """Wait for the header jobs; on failure, stop the rest and raise the first failing file's error by name."""
        bar = None
        if self.progress and len(jobs) >= PROGRESS_MIN_SHARDS and sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=len(jobs), desc=self.repo_id, unit="shard", file=sys.stderr, leave=False)
        by_future = {future: name for name, future in jobs.items()}
        headers: dict[RelativePath, SafetensorsHeader] = {}
        try:
            for future in as_completed(by_future):
                if future.exception() is not None:
                    break
                headers[by_future[future]] = future.result()
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        if len(headers) < len(jobs):
            for future in jobs.values():
                future.cancel()
            wait(list(jobs.values()))
            failed = [name for name, future in sorted(jobs.items()) if not future.cancelled() and future.exception()]
            raise jobs[failed[0]].exception()  # type: ignore[misc]
        return headers

    # --- revision and listing ---------------------------------------------------------------------------

    def _resolve(self) -> tuple[str, list[ListedFile]]:
        revision = self.revision
        if revision and _COMMIT.match(revision):
            listing = self.cache.read_listing(revision)
            if listing is not None:
                return revision, listing
        if self.offline:
            commit = revision if revision and _COMMIT.match(revision) else self.cache.read_ref(revision)
            commit = commit or self._hf_cache_ref(revision)
            listing = (self.cache.read_listing(commit) or self._hf_snapshot_listing(commit)) if commit else None
            if commit is None or listing is None:
                raise SourceError(self.where, "not in the local cache and offline mode is on", OFFLINE_HINT)
            return commit, listing
        info = self._model_info(revision)
        commit = info.sha
        if not isinstance(commit, str) or not _COMMIT.match(commit):
            raise SourceError(self.where, f"the Hub at {self.endpoint} did not say which commit {revision!r} is")
        try:
            listing = [
                ListedFile(s.rfilename, s.size, s.lfs.sha256 if s.lfs is not None else None)
                for s in info.siblings or []
            ]
        except (AttributeError, TypeError) as err:
            raise SourceError(self.where, f"the Hub at {self.endpoint} sent a malformed file listing ({err})") from None
        malformed = next((f for f in listing if not _well_formed(f)), None)
        if malformed is not None:
            raise SourceError(self.where, f"the Hub at {self.endpoint} listed a malformed file entry {malformed}")
        if self.cache.read_listing(commit) != listing:
            self.cache.write_listing(commit, listing)
        if revision != commit and self.cache.read_ref(revision) != commit:
            self.cache.write_ref(revision, commit)
        return commit, listing

    def _model_info(self, revision: str | None) -> Any:
        """One call: the commit, and every file with its size and LFS sha256."""
        from huggingface_hub.hf_api import ModelInfo
        from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

        url = f"{self.endpoint}/api/models/{self.repo_id}"
        if revision:
            url += f"/revision/{quote(revision, safe='')}"
        with http_stream_backoff(
            "GET", url, headers=self._auth_headers(), params={"blobs": True}, timeout=self.timeout, **_retry_policy()
        ) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            body = bytearray()
            for chunk in response.iter_bytes():  # streamed, so an endless or bloated listing stops at the cap
                body += chunk
                if len(body) > MAX_JSON_BYTES:
                    raise SourceError(
                        self.where, f"the Hub at {self.endpoint} sent a file listing over {MAX_JSON_BYTES:,} bytes"
                    )
        try:
            return ModelInfo(**json.loads(body))
        except (AttributeError, KeyError, TypeError, ValueError) as err:  # not JSON, or not a model's info
            detail = f"{type(err).__name__}: {err}"
            raise SourceError(
                self.where, f"the Hub at {self.endpoint} sent a model info it cannot read ({detail})"
            ) from None

    def _hf_cache_ref(self, revision: str | None) -> str | None:
        """The commit a branch pointed at when huggingface_hub last downloaded from it (offline fallback)."""
        from huggingface_hub.file_download import repo_folder_name

        ref = Path(self.hf_cache) / repo_folder_name(repo_id=self.repo_id, repo_type="model") / "refs"
        try:
            commit = (ref / (revision or "main")).read_text().strip()
        except OSError:
            return None
        return commit if _COMMIT.match(commit) else None

    def _hf_snapshot_listing(self, commit: str) -> list[ListedFile] | None:
        """A listing rebuilt from a snapshot huggingface_hub downloaded (its blob names are the LFS sha256)."""
        from huggingface_hub.file_download import repo_folder_name

        snapshot = Path(self.hf_cache) / repo_folder_name(repo_id=self.repo_id, repo_type="model") / "snapshots"
        snapshot = snapshot / commit
        if not snapshot.is_dir():
            return None
        listing = []
        for path in sorted(snapshot.rglob("*")):
            if path.is_file():
                blob = os.path.basename(os.path.realpath(path))
                sha256 = blob if re.fullmatch(r"[0-9a-f]{64}", blob) else None
                listing.append(ListedFile(path.relative_to(snapshot).as_posix(), path.stat().st_size, sha256))
        # A snapshot holding only some files (say config.json) says nothing about the repo's weights.
        if not any(f.path.endswith((".safetensors", INDEX_SUFFIX)) for f in listing):
            return None
        return listing

    # --- files through the HF cache ---------------------------------------------------------------------

    def _fetch_file(self, name: str) -> str:
        """config.json or the index, through huggingface_hub's download cache, pinned to the commit."""
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
        from huggingface_hub.utils.tqdm import silent_tqdm

        assert self.commit is not None
        if self.offline:
            cached = try_to_load_from_cache(self.repo_id, name, revision=self.commit)
            if not isinstance(cached, str):
                raise SourceError(self._source(name), "not in the local cache and offline mode is on", OFFLINE_HINT)
            return cached
        return hf_hub_download(
            self.repo_id, name, revision=self.commit, etag_timeout=self.etag_timeout, tqdm_class=silent_tqdm
        )

    # --- headers ----------------------------------------------------------------------------------------

    def _header(self, listed: ListedFile, first_range: int | None) -> SafetensorsHeader:
        """One file's header: from our cache, from the HF cache, or by ranged GETs (then cached)."""
        from huggingface_hub import try_to_load_from_cache

        assert self.commit is not None
        source = self._source(listed.path)
        raw = self.cache.read_header(self.commit, listed.path)
        if raw is not None:
            try:
                return parse_file_prefix(raw, source=source, file_size=listed.size)
            except HeaderError:
                pass  # a damaged cache entry is a miss
        local = try_to_load_from_cache(self.repo_id, listed.path, revision=self.commit)
        if isinstance(local, str) and (listed.size is None or os.path.getsize(local) == listed.size):
            from .local import read_header_file

            return read_header_file(Path(local), source=source)
        if self.offline:
            raise SourceError(source, "header not in the local cache and offline mode is on", OFFLINE_HINT)
        prefix = self._fetch_prefix(listed, first_range or INITIAL_RANGE, source)
        header = parse_file_prefix(prefix, source=source, file_size=listed.size)
        self.cache.write_header(self.commit, listed.path, prefix)
        return header

    def _fetch_prefix(self, listed: ListedFile, first_range: int, source: str) -> bytes:
        """The 8-byte length and the JSON header: one ranged GET, then only the missing remainder."""
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(self.repo_id, listed.path, revision=self.commit)
        size = listed.size
        if size is not None and size < LENGTH_PREFIX_BYTES:
            read_header_length(b"", source=source, file_size=size)  # raises: too short
        stop = first_range if size is None else min(first_range, size)
        data = self._get_range(url, 0, max(stop, LENGTH_PREFIX_BYTES), source, needed=_needed_from_prefix)
        need = LENGTH_PREFIX_BYTES + read_header_length(data[:LENGTH_PREFIX_BYTES], source=source, file_size=size)
        if len(data) < need:
            data += self._get_range(url, len(data), need, source)
        if len(data) < need:
            raise HeaderError(source, f"header truncated: the server sent {len(data)} of {need} bytes")
        return bytes(data[:need])

    def _get_range(
        self,
        url: str,
        start: int,
        stop: int,
        source: str,
        *,
        needed: Callable[[bytes | bytearray], int | None] | None = None,
    ) -> bytes:
        """Bytes [start, stop) of a remote file (fewer at its end). A server that ignores Range and sends the
        whole body is read only as far as needed, then the connection is dropped."""
        from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

        headers = self._auth_headers()
        headers.update({"Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"})
        for attempt in range(MAX_RETRIES + 1):
            try:
                with http_stream_backoff("GET", url, headers=headers, timeout=self.timeout, **_retry_policy()) as resp:
                    if resp.status_code >= 400:
                        resp.read()
                        hf_raise_for_status(resp)
                    deadline = time.monotonic() + self.timeout + (stop - start) / MIN_BODY_RATE
                    return _read_body(resp, start, stop, source, needed, deadline=deadline)
            except _BodyInterrupted as interrupted:
                if attempt == MAX_RETRIES:
                    raise interrupted.__cause__ or interrupted from None
        raise AssertionError("unreachable")

    # --- errors -----------------------------------------------------------------------------------------

    def explain(self, err: BaseException) -> SourceError | None:
        """Turn a huggingface_hub / network error into one line naming the repo and what to do."""
        import httpx2
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            OfflineModeIsEnabled,
            RemoteEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        where = self.where
        if isinstance(err, GatedRepoError):
            return SourceError(
                where,
                "gated repo: this account has no access to its files",
                f"accept its conditions on the repo's Hub page, then {LOGIN_HINT}",
            )
        if isinstance(err, RevisionNotFoundError):
            asked = repr(self.revision) if self.revision else "the default branch"
            return SourceError(where, f"revision {asked} not found", "check the branch, tag or commit")
        if isinstance(err, RepositoryNotFoundError):
            return SourceError(
                where, f"repo not found on {self.endpoint}", f"check the name; if it is private, {LOGIN_HINT}"
            )
        if isinstance(err, RemoteEntryNotFoundError):
            return SourceError(where, "a file the Hub listed could not be downloaded (entry not found)", "retry")
        if isinstance(err, (OfflineModeIsEnabled, LocalEntryNotFoundError)):
            return SourceError(where, "not in the local cache and offline mode is on", OFFLINE_HINT)
        if isinstance(err, HfHubHTTPError):
            status = err.response.status_code if getattr(err, "response", None) is not None else None
            if status in (401, 403):
                return SourceError(
                    where, f"access denied (HTTP {status})", f"{LOGIN_HINT} with a token that can read it"
                )
            if status == 429:
                return SourceError(where, "rate limited by the Hub (HTTP 429)", f"wait and retry, or {LOGIN_HINT}")
            if status is not None and status >= 500:
                return SourceError(where, f"the Hub answered HTTP {status}", "retry later")
            return SourceError(where, f"the Hub answered HTTP {status}", scrub_secrets(str(err).splitlines()[0]))
        if isinstance(err, httpx2.TimeoutException):
            return SourceError(
                where,
                f"timed out talking to {self.endpoint}",
                "check the network or raise HF_HUB_DOWNLOAD_TIMEOUT; --offline reads only the cache",
            )
        if isinstance(err, httpx2.TooManyRedirects):
            return SourceError(where, f"too many redirects from {self.endpoint}", "a redirect loop; check HF_ENDPOINT")
        if isinstance(err, (httpx2.ReadError, httpx2.RemoteProtocolError)):
            return SourceError(where, f"the connection to {self.endpoint} broke off mid-transfer", "retry later")
        if isinstance(err, (httpx2.TransportError, ConnectionError)):
            return SourceError(
                where,
                f"cannot reach {self.endpoint}",
                "check the network or HF_ENDPOINT; --offline reads only the cache",
            )
        return None


def _well_formed(listed: ListedFile) -> bool:
    """A listing entry as the Hub sends it: a file path, a byte count (if any), a sha256 string (if any)."""
    return (
        isinstance(listed.path, str)
        and bool(listed.path)
        and (listed.size is None or (type(listed.size) is int and listed.size >= 0))
        and (listed.sha256 is None or isinstance(listed.sha256, str))
    )


def _retry_policy() -> dict[str, Any]:
    """huggingface_hub's backoff (408/429/5xx, honouring Retry-After) and retries of dropped connections; a refused
    connection or a timeout fails at once (the timeout already waited long enough)."""
    import httpx2

    return {
        "max_retries": MAX_RETRIES,
        "base_wait_time": 0.5,
        "max_wait_time": 4,
        "retry_on_exceptions": (httpx2.ReadError, httpx2.RemoteProtocolError, httpx2.WriteError),
    }


def _needed_from_prefix(data: bytes | bytearray) -> int | None:
    """How many bytes from the start of the file a header needs, once its 8-byte length has arrived (None for a
    length the reader would refuse anyway: then the caller stops at its range and the reader says why)."""
    if len(data) < LENGTH_PREFIX_BYTES:
        return None
    length = int.from_bytes(data[:LENGTH_PREFIX_BYTES], "little")
    return LENGTH_PREFIX_BYTES + length if length <= MAX_HEADER_BYTES else None


def _read_body(
    response: Any,
    start: int,
    stop: int,
    source: str,
    needed: Callable[[bytes | bytearray], int | None] | None,
    *,
    deadline: float | None = None,
) -> bytes:
    """The bytes [start, stop) from a 206 (checked against Content-Range) or from a 200 that ignored Range."""
    import httpx2

    if response.status_code == 206:
        content_range = response.headers.get("Content-Range", "")
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
        if match is None or int(match.group(1)) != start:
            raise SourceError(source, f"the server answered bytes {start}- with Content-Range {content_range!r}")
        skip = 0
    elif response.status_code == 200:
        skip = start  # the whole body from byte 0: skip to start, and stop reading as soon as we can
    else:
        raise SourceError(source, f"unexpected HTTP {response.status_code} to a ranged GET")
    want = stop - start
    partial = response.status_code == 206
    limit = want  # a 200 from byte 0 goes on to the end of the header: cheaper than asking again
    data = bytearray()
    try:
        for chunk in response.iter_raw():
            if skip:
                dropped = min(skip, len(chunk))
                chunk = chunk[dropped:]
                skip -= dropped
            data += chunk
            if deadline is not None and time.monotonic() > deadline:
                raise httpx2.ReadTimeout(f"{len(data)} bytes of {want} before the deadline: the server trickles")
            if partial:
                if len(data) > want:
                    break  # more than the range: stop reading (the connection is dropped)
                continue  # read a 206 to its end so the connection goes back to the pool
            if needed is not None and start == 0 and limit == want:
                limit = needed(data) or want
            if len(data) >= limit:
                break
    except (httpx2.ReadError, httpx2.RemoteProtocolError) as err:
        raise _BodyInterrupted(str(err)) from err
    return bytes(data[:limit])


def _weights_plan(
    files: dict[str, ListedFile], where: str
) -> tuple[RelativePath | None, RelativePath | None, list[RelativePath]]:
    """Which weight files to read: (single file, index, loose shards) — the same rules as a local folder."""
    if SINGLE_FILE_NAME in files:
        return SINGLE_FILE_NAME, None, []
    indexes = sorted(p for p in files if "/" not in p and p.endswith(INDEX_SUFFIX))
    if len(indexes) > 1:
        preferred = "model" + INDEX_SUFFIX
        if preferred not in indexes:
            raise SourceError(where, f"several indexes ({', '.join(indexes)}); name the one to use")
        indexes = [preferred]
    if indexes:
        return None, indexes[0], []
    loose = sorted(p for p in files if "/" not in p and p.endswith(".safetensors"))
    if loose:
        return None, None, loose
    others = [p for p in sorted(files) if p.endswith(_OTHER_WEIGHTS)]
    shown = others or sorted(files)
    has = f"it has {', '.join(shown[:6])}{' …' if len(shown) > 6 else ''}" if shown else "it has no files"
    if others:
        has += " (not safetensors)"
    raise SourceError(where, "not a safetensors repo: no model.safetensors or *.safetensors.index.json", has)


def _shard_guesses(files: dict[str, ListedFile], index: RelativePath) -> list[RelativePath]:
    """Root files named like the index's shards (``model-00001-of-00009.safetensors`` for ``model.*``)."""
    stem = index[: -len(INDEX_SUFFIX)]
    return sorted(p for p in files if "/" not in p and p.startswith(stem + "-") and p.endswith(".safetensors"))


def _first_range_from_index(index_size: int | None, shards: int) -> int:
    """An index entry is about 2/3 of the header entry for the same tensor: size the first GET from it."""
    if not index_size or not shards:
        return INITIAL_RANGE
    return max(MIN_ESTIMATED_RANGE, int(1.5 * index_size / shards) + 8192)


def _header_estimates(weight_map: dict[str, RelativePath]) -> dict[RelativePath, int]:
    """A generous guess of each shard's header size from the tensor names the index gives it."""
    estimates: dict[RelativePath, int] = {}
    for name, shard in weight_map.items():
        estimates[shard] = estimates.get(shard, 4096) + len(name.encode()) + 110
    return {shard: max(MIN_ESTIMATED_RANGE, int(total * 1.2)) for shard, total in estimates.items()}
