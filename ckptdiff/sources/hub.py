"""Checkpoints on the Hugging Face Hub as a Source: a pinned commit, cached listings and headers, ranged GETs.

One run against ``org/name@rev``:

1. resolve ``rev`` to a commit and list every file with its size and LFS sha256 in one call
   (``/api/models/{repo}/revision/{rev}?blobs=true``); every later request is pinned to that commit;
2. read ``config.json`` and the index whole with one GET each (the listing gave their commit and size, so no HEAD
   first), or from the HF cache when a download put them there;
3. read each shard's header with one ranged GET sized for typical headers (or, with an index, for the tensors
   it lists), then only the missing remainder (the planner runs shards in parallel: both sides of a comparison
   share one pool of ``options.jobs`` threads, so every shard of both can be in flight at once).

Listings, headers, config.json and the index are kept in :mod:`.header_cache` by repo + commit + file, so a
second run pinned to a commit makes no request and one on a branch makes one. ``--offline`` /
``HF_HUB_OFFLINE=1`` reads only caches. All traffic goes through huggingface_hub: its endpoint and URL template,
headers and token (:func:`.hub_http.request_headers`), HTTP session, retry policy and error classes; its
download module is loaded only to look in its cache, when the repo has a folder there.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..checkpoint import INDEX_SUFFIX, RelativePath, check_json_size
from ..errors import DISK_WRITE_ERRNOS, CkptdiffError, DiskWriteError, HeaderError, SourceError, printable
from ..limits import MAX_JSON_BYTES
from ..safetensors_header import SafetensorsHeader
from .base import INITIAL_RANGE, Described, ListedFile, Listing, Source, needed_from_prefix
from .header_cache import HeaderCache
from .hub_errors import OFFLINE_HINT, explain_hub_error
from .hub_http import get_range, load_session, request_headers, stream_range
from .hub_listing import COMMIT, ListingCall

if TYPE_CHECKING:
    from ..progress import Progress
    from . import HubSpec, SourceOptions

__all__ = ["INITIAL_RANGE", "HubSource"]

#: What to do when the Hugging Face cache cannot take a download.
HF_CACHE_HINT = "free space there, or point HF_HOME or HF_HUB_CACHE at a disk with room"

#: What a subfolder spec may name instead of a folder: one weight file or index.
_WEIGHT_SUFFIXES = (".safetensors", INDEX_SUFFIX, ".bin", ".pt", ".pth", ".bin.index.json")


class HubSource(Source):
    """One Hub checkpoint: its repo (and subfolder), the commit once resolved, and how to fetch (from
    SourceOptions and huggingface_hub's configuration, read when the run starts)."""

    absent = "not in the repo"
    at_one_commit = True
    downloads_into = "the Hugging Face cache"

    def __init__(self, spec: str, parsed: HubSpec, options: SourceOptions) -> None:
        from . import check_hub_endpoint

        check_hub_endpoint()
        from huggingface_hub import constants

        self.spec = spec
        self.repo_id = parsed.repo_id
        self.revision = parsed.revision
        self.subfolder = parsed.subfolder.strip("/") if parsed.subfolder else ""
        self.may_be_a_path = not parsed.explicit  # a bare org/name, not hf://
        self.listing = ListingCall.of(self.repo_id, self.revision)
        self.endpoint = self.listing.endpoint  # for messages: an HF_ENDPOINT may carry credentials
        self.offline = options.offline or constants.is_offline_mode()
        self.jobs = max(1, options.jobs)
        self.timeout = self.listing.timeout
        self.etag_timeout = float(constants.HF_HUB_ETAG_TIMEOUT)
        #: This repo's folder in huggingface_hub's cache (named as its ``repo_folder_name`` names it).
        self.hf_cache_folder = Path(constants.HF_HUB_CACHE, "--".join(("models", *self.repo_id.split("/"))))
        self.url_template = constants.HUGGINGFACE_CO_URL_TEMPLATE
        self.cache = HeaderCache(self.repo_id)  # $HF_HOME/ckptdiff, read now (tests move HF_HOME per run)
        self.commit: str | None = None
        self._headers: dict[str, str] | None = None

    def _auth_headers(self) -> dict[str, str]:
        """huggingface_hub's headers (user agent, token from HF_TOKEN or the stored login), built once a run."""
        if self._headers is None:
            from ..version import __version__

            self._headers = request_headers(__version__)
        return dict(self._headers)

    def _file_url(self, file: RelativePath) -> str:
        """A file's URL at the commit, from huggingface_hub's URL template (as its ``hf_hub_url`` builds it)."""
        revision = quote(self.commit or "main", safe="")
        return self.url_template.format(repo_id=self.repo_id, revision=revision, filename=quote(self._repo_path(file)))

    # --- naming -----------------------------------------------------------------------------------------

    @property
    def where(self) -> str:
        return f"{self.repo_id}@{self.commit[:12]}" if self.commit else self.listing.where

    def _repo_path(self, file: RelativePath) -> str:
        return f"{self.subfolder}/{file}" if self.subfolder else file

    def name_of(self, file: RelativePath | None = None) -> str:
        if file is None:
            return f"{self.where}:{self.subfolder}" if self.subfolder else self.where
        return f"{self.where}:{self._repo_path(file)}"

    def describe(self, weights: RelativePath | None = None) -> Described:
        return Described("hub", self.repo_id, self.commit)

    def spec_of(self, folder: RelativePath) -> str:
        revision = f"@{self.revision}" if self.revision else ""
        return f"hf://{self.repo_id}{revision}/{self._repo_path(folder)}"

    def prepare(self) -> None:
        """huggingface_hub's HTTP session (httpx2 with it: most of a run's imports), unless the run may need no
        request: offline, or a commit whose listing is cached."""
        pinned = self.revision is not None and COMMIT.match(self.revision) is not None
        if not self.offline and not (pinned and self.cache.has_listing(self.revision or "")):
            load_session()

    def finish_reading(self) -> None:
        self.cache.flush()  # one pack for what this read fetched (the header cache's module says why)

    def pin(self, revision: str | None) -> None:
        self.commit = revision
        if self.subfolder.endswith(_WEIGHT_SUFFIXES):  # hf://org/name/sub/model.safetensors: files are in sub/
            self.subfolder = self.subfolder.rpartition("/")[0]

    def explain(self, err: BaseException) -> CkptdiffError | None:
        explained = explain_hub_error(err, where=self.where, endpoint=self.endpoint, revision=self.revision)
        if explained is not None and self.may_be_a_path and self.commit is None and _repo_unconfirmed(err):
            # `runs/ckpt-100` looks like a repo id: unless the Hub knew the repo, say no such path exists either
            defect = f"{explained.defect}, and there is no local file or folder of that name"
            return SourceError(explained.where, defect, explained.hint)
        return explained

    # --- the Source interface ---------------------------------------------------------------------------

    def list_files(self) -> Listing:
        self.commit, listing = self._resolve()
        return self.listing_of(listing)

    def listing_of(self, listing: list[ListedFile]) -> Listing:
        """The files of this spec's folder (or the file it names) in the repo's listing."""
        if not self.subfolder:
            return Listing({f.path: f for f in listing})
        exact = next((f for f in listing if f.path == self.subfolder), None)
        if exact is not None and exact.path.endswith(_WEIGHT_SUFFIXES):  # hf://org/name/sub/model.safetensors
            self.subfolder, _, named = exact.path.rpartition("/")
            prefix = self.subfolder + "/" if self.subfolder else ""
        else:
            named, prefix = None, self.subfolder + "/"
        inside = [ListedFile(f.path[len(prefix) :], f.size, f.sha256) for f in listing if f.path.startswith(prefix)]
        files = {f.path: f for f in inside}
        if not files:
            raise SourceError(self.name_of(), "no such folder in the repo")
        return Listing(files, named)

    def read_small(self, file: ListedFile, *, what: str, error: type[CkptdiffError] = CkptdiffError) -> bytes:
        """config.json or the index: from our cache, from the HF cache, or by one GET pinned to the commit (the
        listing already gave its commit and size, so no HEAD is needed first), then cached."""
        assert self.commit is not None
        repo_path = self._repo_path(file.path)
        cached = self.cache.read_file(self.commit, repo_path)
        if cached is not None and (file.size is None or len(cached) == file.size):  # else damaged: a miss
            return cached
        local = self.local_path(file.path)
        if local is not None:
            return local.read_bytes()
        if self.offline:
            raise SourceError(self.name_of(file.path), "not in the local cache and offline mode is on", OFFLINE_HINT)
        check_json_size(file.size, self.name_of(file.path), what=what, error=error)
        stop = (
            min(file.size, MAX_JSON_BYTES) + 1 if file.size else MAX_JSON_BYTES + 1
        )  # the time allowed scales with it
        data = self._get(file.path, 0, stop, ranged=False)
        check_json_size(len(data), self.name_of(file.path), what=what, error=error)
        self.cache.write_file(self.commit, repo_path, data)
        return data

    def read_range(self, file: RelativePath, start: int, stop: int) -> bytes:
        return self._get(file, start, stop, ranged=True)

    def stream_range(self, file: RelativePath, start: int, stop: int, chunk_size: int) -> Iterator[bytes]:
        """One ranged GET pinned to the commit, its body handed on as it arrives (or the file from the HF cache)."""
        local = self.local_path(file)
        if local is not None:
            yield from _local_pieces(local, self.name_of(file), start, stop, chunk_size)
            return
        if self.offline:
            raise SourceError(self.name_of(file), "not in the local cache and offline mode is on", OFFLINE_HINT)
        if self.commit is None:
            self.list_files()
        url, headers = self._file_url(file), self._auth_headers()
        yield from stream_range(
            url, start, stop, self.name_of(file), headers=headers, timeout=self.timeout, chunk_size=chunk_size
        )

    def _get(self, file: RelativePath, start: int, stop: int, *, ranged: bool) -> bytes:
        url = self._file_url(file)
        needed = needed_from_prefix if start == 0 and file.endswith(".safetensors") else None
        headers, timeout = self._auth_headers(), self.timeout
        return get_range(
            url, start, stop, self.name_of(file), headers=headers, timeout=timeout, needed=needed, ranged=ranged
        )

    def read_header(self, file: ListedFile, first_range: int | None = None) -> SafetensorsHeader:
        """One file's header: from our cache, from the HF cache, or by ranged GETs (then cached). Each way names
        the file (:meth:`name_of`) where it reads or refuses it, once."""
        assert self.commit is not None
        repo_path = self._repo_path(file.path)
        cached = self.cache.read_header(self.commit, repo_path)
        if cached is not None:
            try:
                return self.decode_prefix(file, cached)
            except HeaderError:
                pass  # a damaged cache entry is a miss
        local = self.local_path(file.path)
        if local is not None and (file.size is None or os.path.getsize(local) == file.size):
            from .local import read_header_file

            return read_header_file(local, source=self.name_of(file.path))
        if self.offline:
            defect = "header not in the local cache and offline mode is on"
            raise SourceError(self.name_of(file.path), defect, OFFLINE_HINT)
        prefix = self.read_prefix(file, first_range or INITIAL_RANGE)
        header = self.decode_prefix(file, prefix)
        self.cache.write_header(self.commit, repo_path, prefix)
        return header

    def local_path(self, file: RelativePath) -> Path | None:
        """The file in huggingface_hub's cache, if a download put it there (its lookup, which loads its download
        module, only when the repo has a folder there)."""
        if not self.hf_cache_folder.is_dir():
            return None
        from huggingface_hub import try_to_load_from_cache

        local = try_to_load_from_cache(self.repo_id, self._repo_path(file), revision=self.commit)
        return Path(local) if isinstance(local, str) else None

    def stat(self, file: RelativePath) -> ListedFile | None:
        return None  # the listing is the whole repo: a file it lacks is not there

    def fetch_to(
        self, folder: Path, files: Iterable[RelativePath], progress: Progress | None = None
    ) -> dict[RelativePath, Path]:
        """The files through huggingface_hub's download cache (``folder`` is not used: the HF cache is shared),
        with its own progress bars when there is a ``progress`` (bars at all)."""
        from huggingface_hub import hf_hub_download
        from huggingface_hub.utils.tqdm import silent_tqdm

        if self.commit is None:
            self.list_files()
        bars = None if progress is not None else silent_tqdm
        paths = {}
        for file in files:
            name = self._repo_path(file)
            try:
                with warnings.catch_warnings():
                    # its "not enough free disk space" estimate, several lines: a download that fails says it in one
                    warnings.filterwarnings("ignore", message="Not enough free disk space", category=UserWarning)
                    downloaded = hf_hub_download(
                        self.repo_id, name, revision=self.commit, local_files_only=self.offline, tqdm_class=bars
                    )
            except OSError as err:
                if err.errno not in DISK_WRITE_ERRNOS and not isinstance(err, PermissionError):
                    raise  # the network's and the Hub's own errors: explained by the caller
                # huggingface_hub removes its partial download; the line names the cache it could not write into
                defect = f"cannot take the download of {self.name_of(file)}: {err.strerror or err}"
                raise DiskWriteError(str(self.hf_cache_folder), defect, HF_CACHE_HINT) from None
            paths[file] = Path(downloaded)
        return paths

    # --- revision and listing ---------------------------------------------------------------------------

    def _resolve(self) -> tuple[str, list[ListedFile]]:
        revision = self.revision
        if revision and COMMIT.match(revision):
            listing = self.cache.read_listing(revision)
            if listing is not None:
                return revision, listing
        if self.offline:
            commit = revision if revision and COMMIT.match(revision) else self._cached_ref(revision)
            commit = commit or self._hf_cache_ref(revision)
            listing = (self.cache.read_listing(commit) or self._hf_snapshot_listing(commit)) if commit else None
            if commit is None or listing is None:
                raise SourceError(self.where, "not in the local cache and offline mode is on", OFFLINE_HINT)
            return commit, listing
        commit, listing = self._listing_call()
        commit = self.checked_commit(commit, listing)
        if self.cache.read_listing(commit) != listing:
            self.cache.write_listing(commit, listing)
        for name in _ref_names(revision):
            if name != commit and self.cache.read_ref(name) != commit:
                self.cache.write_ref(name, commit)
        return commit, listing

    def _cached_ref(self, revision: str | None) -> str | None:
        """The commit ``revision`` pointed at when a run last resolved it; the default branch's or ``main``'s
        (one branch, :func:`_ref_names`) also from a cache that a version keeping them apart wrote."""
        return next(filter(None, map(self.cache.read_ref, _ref_names(revision))), None)

    def checked_commit(self, commit: Any, listing: list[ListedFile]) -> str:
        """The commit of a listing call's answer; refused when the Hub named none or listed a malformed file."""
        revision = f"revision {printable(repr(self.revision))}" if self.revision else "the default branch"
        if not isinstance(commit, str) or not commit:
            raise SourceError(self.where, f"the Hub at {self.endpoint} named no commit for {revision}")
        if not COMMIT.match(commit):
            shown = printable(repr(commit if len(commit) <= 64 else commit[:64] + "…"))
            raise SourceError(
                self.where,
                f"the Hub at {self.endpoint} named {shown} as the commit of {revision}, "
                "which is not a commit hash (40 hexadecimal digits)",
            )
        defect = next(filter(None, map(_entry_defect, listing)), None)
        if defect is not None:
            raise SourceError(self.where, f"the Hub at {self.endpoint} listed a malformed file entry: {defect}")
        return commit

    def _listing_call(self) -> tuple[Any, list[ListedFile]]:
        """The listing call's answer: the commit the Hub named, and its files."""
        commit, entries = self.listing.send(self._auth_headers())
        return commit, [ListedFile(*entry) for entry in entries]

    def _hf_cache_ref(self, revision: str | None) -> str | None:
        """The commit a branch pointed at when huggingface_hub last downloaded from it (offline fallback)."""
        ref = self.hf_cache_folder / "refs"
        try:
            commit = (ref / (revision or DEFAULT_BRANCH)).read_text().strip()
        except OSError:
            return None
        return commit if COMMIT.match(commit) else None

    def _hf_snapshot_listing(self, commit: str) -> list[ListedFile] | None:
        """A listing rebuilt from a snapshot huggingface_hub downloaded: paths and sizes, no sha256 (a blob's name
        is only a name: --values takes a hash only from the Hub's own listing)."""
        snapshot = self.hf_cache_folder / "snapshots" / commit
        if not snapshot.is_dir():
            return None
        listing = []
        for path in sorted(snapshot.rglob("*")):
            if path.is_file():
                listing.append(ListedFile(path.relative_to(snapshot).as_posix(), path.stat().st_size, None))
        # A snapshot holding only some files (say config.json) says nothing about the repo's weights.
        if not any(f.path.endswith((".safetensors", INDEX_SUFFIX)) for f in listing):
            return None
        return listing


#: The Hub's default branch: huggingface_hub reads and caches ``revision=None`` as this (its DEFAULT_REVISION).
DEFAULT_BRANCH = "main"


def _ref_names(revision: str | None) -> tuple[str | None, ...]:
    """The names a revision's commit is kept under in the header cache: a bare ``org/name`` (None) and
    ``org/name@main`` are one branch, as they are to huggingface_hub, whose cache has one ``refs/main`` for both;
    kept under both names, a run on either serves the other offline."""
    if revision is None or revision == DEFAULT_BRANCH:
        return (revision, DEFAULT_BRANCH if revision is None else None)
    return (revision,)


def _local_pieces(path: Path, where: str, start: int, stop: int, chunk_size: int) -> Iterator[bytes]:
    """Bytes [start, stop) of a file on disk in pieces (:func:`.local.pieces_of`)."""
    from .local import pieces_of

    return pieces_of(path, where, start, stop, chunk_size)


def _entry_defect(listed: ListedFile) -> str | None:
    """What keeps a listing entry from being one the Hub sends (a file path, a byte count if any, a sha256 string
    if any), in words naming the file (``model.safetensors has size 1.5, not a byte count``); None if nothing."""

    def shown(value: Any) -> str:  # a server's value, quoted short (the line is escaped when printed)
        text = repr(value)
        return text if len(text) <= 40 else text[:40] + "…"

    if not isinstance(listed.path, str) or not listed.path:
        return f"a file named {shown(listed.path)}"
    if listed.size is not None and not (type(listed.size) is int and listed.size >= 0):
        return f"{shown(listed.path)} has size {shown(listed.size)}, not a byte count"
    if listed.sha256 is not None and not isinstance(listed.sha256, str):
        return f"{shown(listed.path)} has sha256 {shown(listed.sha256)}, not a string"
    return None


def _repo_unconfirmed(err: BaseException) -> bool:
    """Whether the Hub's answer leaves open that no such repo exists (not found, or no answer at all)."""
    import httpx2
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(err, RepositoryNotFoundError):
        return not isinstance(err, GatedRepoError)
    return isinstance(err, (httpx2.TransportError, ConnectionError))
