"""Checkpoints in object stores and on web servers (s3://, gs://, az://, abfs://, https://) as a Source, via fsspec.

A spec names one object (a ``.safetensors`` file, an index, a ``.bin``) or a folder-like prefix. Files are
listed with their sizes and versions (ETag, VersionId, generation) in one call, headers are read with ranged
GETs that accept at most the bytes asked for (:mod:`.store_reads`), and credentials come from each store's
own chain (for S3: ``AWS_*`` variables including
``AWS_ENDPOINT_URL``, profiles, instance roles) — ckptdiff never sees them, let alone prints them.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urljoin

from ..checkpoint import CONFIG_NAME, INDEX_SUFFIX, WEIGHT_FILE_SUFFIXES, RelativePath
from ..errors import CkptdiffError, SourceError
from .base import Described, ListedFile, Listing, Source
from .planner import SINGLE_FILE_NAME
from .store_errors import answered_status, connection_failure, explain_store_error
from .store_reads import bounded_copy, bounded_read
from .torch_pickle import TORCH_INDEX_NAME, TORCH_SINGLE_FILE_NAME

if TYPE_CHECKING:
    from . import SourceOptions, StoreSpec

#: The extra that installs each scheme's fsspec implementation.
EXTRA_FOR_SCHEME = {"s3": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}
#: The package each extra brings (for the "needs ..." line).
PACKAGE_FOR_EXTRA = {"s3": "s3fs", "gcs": "gcsfs", "azure": "adlfs", "http": "aiohttp"}
#: Probed one by one on a web server (which has no folder listing to trust): the names the planner takes.
_WELL_KNOWN = (SINGLE_FILE_NAME, "model" + INDEX_SUFFIX, TORCH_INDEX_NAME, TORCH_SINGLE_FILE_NAME)
#: Where a listing keeps an object's version: the ETag first (S3, GCS, Azure and HTTP servers all give it, in a
#: listing and a HEAD alike, so one checkpoint shows one version however it is spelled), else a generation.
_VERSION_KEYS = ("ETag", "etag", "generation", "VersionId", "version_id")


def reused_filesystem(spec: str, scheme: str) -> tuple[Any, str]:
    """The fsspec filesystem for a spec and the path it names: one per store and configuration in a process, so
    its client, connections and credentials are set up once for all the sources a process opens (a Dask worker
    runs many tasks). The configuration is the whole environment (where every store's credential chain starts),
    the URL's scheme and its bucket, container or host: sources configured differently never share one."""
    from fsspec.core import url_to_fs

    authority = spec.partition("://")[2].partition("/")[0]
    environment = hashlib.sha256(repr(sorted(os.environ.items())).encode()).digest()
    key = (os.getpid(), scheme, authority, environment)
    with _OPENED_LOCK:
        fs = _OPENED.get(key)
        if fs is not None:
            _OPENED.move_to_end(key)
            return fs, fs._strip_protocol(spec)
    fs, root = url_to_fs(spec, skip_instance_cache=True)  # fsspec's own cache does not see the environment
    with _OPENED_LOCK:
        fs = _OPENED.setdefault(key, fs)
        while len(_OPENED) > _KEEP_OPENED:
            _OPENED.popitem(last=False)
    return fs, root


#: Filesystems opened in this process, by configuration (:func:`reused_filesystem`), the most recent last.
_OPENED: OrderedDict[tuple[int, str, str, bytes], Any] = OrderedDict()
_OPENED_LOCK = threading.Lock()
#: How many configurations keep their filesystem (more than one run's stores, few enough to hold no stale ones).
_KEEP_OPENED = 4


#: Where botocore takes an S3 endpoint from, the first set one winning.
AWS_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def check_aws_endpoint() -> None:
    """The S3 endpoint from the environment, refused in one line (never quoting it) unless botocore can use it:
    ``http(s)://host[:port][/path]``. Credentials in it (``user:password@``, a security token in the query) are
    sent by no client: they belong in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN."""
    from urllib.parse import urlsplit

    variable = next((name for name in AWS_ENDPOINT_VARIABLES if os.environ.get(name)), None)
    if variable is None:
        return
    value = os.environ[variable]
    hint = "an endpoint is http(s)://host[:port], e.g. http://127.0.0.1:9000"
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname or not port_ok:
        raise SourceError(variable, "is not an http(s):// URL with a host and a valid port", hint)
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise SourceError(
            variable,
            "holds credentials (user:password@, a query string or a fragment), which no S3 client sends",
            "give them as AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN",
        )


#: Subfolders (prefixes) looked into for weights when a store's folder has none at its top (a hint only).
_MOST_FOLDERS_SEEN = 16


#: The most bytes of a web server's folder page read for that hint (a page of a few thousand links).
_PAGE_BYTES = 256 * 1024
_HREF = re.compile(r"""href\s*=\s*["']([^"'?#]+)["']""", re.IGNORECASE)


def _links(page: str, url: str, *, folders: bool) -> list[RelativePath]:
    """The names the folder page at ``url`` links one level down: its subfolders (``sub/``) or its files, whether a
    link is relative, an absolute path or a whole URL (autoindexes write each); never a link out of the folder
    (``..``, another host, a query)."""
    folder = url.rstrip("/") + "/"
    names: list[RelativePath] = []
    for href in _HREF.findall(page):
        target = urljoin(folder, href.strip())
        if not target.startswith(folder):
            continue
        name = unquote(target[len(folder) :])
        if folders and name.endswith("/") and "/" not in name[:-1] and name[:-1] not in ("", ".", ".."):
            names.append(name[:-1])
        elif not folders and name and "/" not in name:
            names.append(name)
    return list(dict.fromkeys(names))


class StoreSource(Source):
    """One checkpoint in an fsspec filesystem: its folder (or prefix), the file the spec names, the versions seen."""

    absent = "not in the store"

    def __init__(self, spec: str, parsed: StoreSpec, options: SourceOptions) -> None:
        self.spec = spec
        self.url = parsed.url  # its scheme in lower case, as fsspec knows it
        self.scheme = parsed.scheme
        self.jobs = max(1, options.jobs)
        self.offline = options.offline
        self._fs: Any = None
        self.folder = ""  # the prefix every file is relative to, in the filesystem's own spelling
        self.versions: dict[RelativePath, str] = {}
        self.sizes: dict[RelativePath, int] = {}
        self._named: RelativePath | None = None

    # --- naming -----------------------------------------------------------------------------------------

    def name_of(self, file: RelativePath | None = None) -> str:
        base = self.display
        if file is None or base.rstrip("/").endswith("/" + file):
            return base
        if self._named is not None:
            base = base.rsplit("/", 1)[0]
        return f"{base.rstrip('/')}/{file}"

    def describe(self, weights: RelativePath | None = None) -> Described:
        revision = self.versions.get(weights) if weights else None
        return Described("store", self.name_of(), revision)

    def pin(self, revision: str | None) -> None:
        self._filesystem()
        if self.folder.endswith(WEIGHT_FILE_SUFFIXES):  # the spec named a file: its siblings live in its folder
            self.folder, _, self._named = self.folder.rpartition("/")

    def explain(self, err: BaseException) -> CkptdiffError | None:
        return explain_store_error(err, where=self.name_of(), scheme=self.scheme)

    # --- the Source interface ---------------------------------------------------------------------------

    def _filesystem(self) -> Any:
        if self._fs is None:
            if self.offline:
                raise SourceError(self.name_of(), "an object store cannot be read with --offline")
            if self.scheme == "s3":
                check_aws_endpoint()
            extra = EXTRA_FOR_SCHEME.get(self.scheme, "http")
            try:
                fs, root = reused_filesystem(self.url, self.scheme)
            except ImportError as err:
                missing = "fsspec" if getattr(err, "name", None) == "fsspec" else PACKAGE_FOR_EXTRA[extra]
                hint = f"pip install 'ckptdiff[{extra}]'"
                raise SourceError(self.name_of(), f"reading {self.scheme}:// needs {missing}", hint) from None
            self.folder = root.rstrip("/")
            fs.invalidate_cache(self.folder)  # listings an earlier source saw may be stale: this one asks again
            self._fs = fs
        return self._fs

    def list_files(self) -> Listing:
        fs = self._filesystem()
        if self.folder.endswith(WEIGHT_FILE_SUFFIXES):
            info = fs.info(self.folder)
            if info.get("type") == "directory":
                return self._list_folder(fs)
            self.folder, _, named = self.folder.rpartition("/")
            self._named = named
            return Listing({named: self._entry(named, info), **self.config_beside()}, named)
        return self._list_folder(fs)

    def _list_folder(self, fs: Any) -> Listing:
        if self.scheme in ("http", "https"):
            # A web server has no folder listing to trust (an HTML page, or a big file misnamed): ask for the names
            # the planner takes, one HEAD each, and never GET a body that is not a header. The asks are in flight
            # together: one round trip (two where a 404 is followed by fsspec's GET), not one a name.
            from concurrent.futures import ThreadPoolExecutor

            if self.folder.endswith(".json"):  # a URL naming a file that is no weight file (config.json)
                one_file = self._named_file()
                if one_file is not None:
                    return one_file
            asked = (*_WELL_KNOWN, CONFIG_NAME)
            with ThreadPoolExecutor(len(asked), "ckptdiff-probe") as pool:
                found = list(pool.map(self._probe, asked))
            probed = {name: entry for name, (entry, _) in zip(asked, found, strict=True) if entry is not None}
            failed = [(name, err) for name, (_, err) in zip(asked, found, strict=True) if err is not None]
            weights = any(name != CONFIG_NAME for name in probed)
            for name, err in failed:
                # the server has the file but did not give it (5xx), or config.json, refused: not an absent file; a
                # weight name refused (401/403) is absent beside one it gives (S3 websites answer 403 for no key)
                if name == CONFIG_NAME or answered_status(err) not in (401, 403) or not weights:
                    raise self._unreadable(err, name) from None
            if not probed and not any(p.endswith(WEIGHT_FILE_SUFFIXES) for p in self._linked_below()):
                served = self._served_file(fs)  # config.json, a .gguf: the planner says what it is
                if served is not None:
                    return served
                raise FileNotFoundError(self.folder)  # neither the names asked for nor a page linking weights below
            return Listing(probed, asked=asked)
        entries = fs.ls(self.folder, detail=True)
        if len(entries) == 1 and entries[0].get("type") == "file" and entries[0]["name"].rstrip("/") == self.folder:
            # the spec names a file that is no weight file (config.json, a .gguf): the planner says what it is
            self.folder, _, named = self.folder.rpartition("/")
            self._named = named
            return Listing({named: self._entry(named, entries[0])}, named)
        files: dict[RelativePath, ListedFile] = {}
        folders: list[RelativePath] = []
        for info in entries:
            name = posixpath.relpath(info["name"].rstrip("/"), self.folder) if self.folder else info["name"]
            if "/" in name or name in (".", ".."):
                continue
            if info.get("type") == "file":
                files[name] = self._entry(name, info)
            elif info.get("type") == "directory":
                folders.append(name)
        if not entries:
            raise FileNotFoundError(self.folder)
        return Listing(files, folders=tuple(sorted(folders)))

    def _served_file(self, fs: Any) -> Listing | None:
        """The URL itself, named, when the web server answers it with a file rather than a folder's page or a 404:
        a URL of its config.json is no folder to look for weights in. Asked on this error path only."""
        try:
            info = fs.info(self.folder)
        except Exception:  # noqa: BLE001  # a 404, or any failure: the missing prefix's line stands
            return None
        page = str(info.get("mimetype") or "").startswith("text/html") or str(info.get("url") or "").endswith("/")
        if info.get("type") != "file" or page:
            return None
        self.folder, _, named = self.folder.rpartition("/")
        self._named = named
        return Listing({named: self._entry(named, info)}, named)

    def files_below(self, listing: Listing) -> list[RelativePath]:
        """The files one folder (prefix) down, in at most 16 of the listing's subfolders: one listing call each, on
        this error path only; a store that refuses is left out (a hint only)."""
        below: list[RelativePath] = []
        if listing.asked:
            return self._linked_below()
        try:
            fs = self._filesystem()
            for name in listing.folders[:_MOST_FOLDERS_SEEN]:
                below += [
                    f"{name}/{posixpath.basename(info['name'].rstrip('/'))}"
                    for info in fs.ls(self._path(name), detail=True)
                    if info.get("type") == "file"
                ]
        except Exception:  # noqa: BLE001  # any store library's failure: the hint is left out, the error stands
            return []
        return below

    def _linked_below(self) -> list[RelativePath]:
        """A web server's files one folder down, where its folder pages list them (an autoindex: nginx's, Apache's,
        ``python -m http.server``'s): the subfolders the folder's page links, and the files each of their pages
        links. At most 256 kB of each page and 16 subfolders, on this error path only; none without pages."""
        below: list[RelativePath] = []
        try:
            for folder in self._linked("", folders=True)[:_MOST_FOLDERS_SEEN]:
                below += [f"{folder}/{name}" for name in self._linked(folder, folders=False)]
        except Exception:  # noqa: BLE001  # no page, or not one of links: the hint is left out, the error stands
            return []
        return below

    def _linked(self, folder: RelativePath, *, folders: bool) -> list[RelativePath]:
        """What the page of ``folder`` ("" for this one) links one level down: at most 256 kB of it read."""
        url = self._path(folder) if folder else self.folder
        where = self.name_of(folder)
        data = bounded_read(self._fs, self.scheme, f"{url}/", 0, _PAGE_BYTES, where=where, expected=_PAGE_BYTES)
        return _links(data.decode("utf-8", "replace"), url, folders=folders)

    def _entry(self, name: RelativePath, info: dict[str, Any]) -> ListedFile:
        version = next((str(info[key]) for key in _VERSION_KEYS if info.get(key)), None)
        if version:
            self.versions[name] = version.strip('"')
        size = info.get("size")
        if isinstance(size, int):
            self.sizes[name] = size
        return ListedFile(name, size if isinstance(size, int) else None, None)

    def stat(self, file: RelativePath) -> ListedFile | None:
        """The file, or None where the store has none; an error naming it where the server answered otherwise
        (HTTP 403, 500: fsspec's http client raises FileNotFoundError for every status)."""
        found, err = self._probe(file)
        if err is not None:
            raise self._unreadable(err, file) from None
        return found

    def is_folder(self, file: RelativePath) -> bool:
        try:
            return bool(self._filesystem().info(self._path(file)).get("type") == "directory")
        except FileNotFoundError:  # only asked to word an error: any other answer leaves it as it was
            return False

    def _probe(self, file: RelativePath) -> tuple[ListedFile | None, FileNotFoundError | None]:
        """The file, or None where the store has none, or the error of a server that answered something else."""
        try:
            info = self._filesystem().info(self._path(file) if file else self.folder)
        except FileNotFoundError as err:
            if connection_failure(err) is not None:  # not an absent file: the server could not be reached
                raise
            return None, err if answered_status(err) is not None else None
        return (self._entry(file, info) if info.get("type") != "directory" else None), None

    def _unreadable(self, err: FileNotFoundError, file: RelativePath) -> BaseException:
        """The server's answer for ``file`` ("": the spec's own URL) as one line naming its URL."""
        return explain_store_error(err, where=self.name_of(file or None), scheme=self.scheme) or err

    def _named_file(self) -> Listing | None:
        """The listing of a URL that names a file no weight file is (config.json): the planner says what it is;
        None where the server has no file of that name."""
        named = posixpath.basename(self.folder)
        found, err = self._probe("")
        if err is not None:
            raise self._unreadable(err, "") from None
        if found is None:
            return None
        self.folder = self.folder[: -len(named)].rstrip("/")
        self._named = named
        return Listing({named: ListedFile(named, found.size, None)}, named)

    def fingerprint(self, file: RelativePath) -> tuple[object, ...] | None:
        fs = self._filesystem()
        fs.invalidate_cache(self._path(file))  # a listing's cached entry would hide a rewrite
        found = self.stat(file)
        if found is None:
            return None
        return (self.versions.get(file), found.size)

    def read_range(self, file: RelativePath, start: int, stop: int) -> bytes:
        size = self.sizes.get(file)
        expected = (min(stop, size) if size is not None else stop) - start
        fs, where = self._filesystem(), self.name_of(file)
        try:
            return bounded_read(fs, self.scheme, self._path(file), start, stop, where=where, expected=expected)
        except CkptdiffError:
            raise
        except Exception as err:  # the store's own error: one line naming this file, not the whole checkpoint
            explained = explain_store_error(err, where=where, scheme=self.scheme)
            if explained is None:
                raise
            raise explained from None

    def copy_range(self, file: RelativePath, start: int, stop: int, out: int) -> int:
        size = self.sizes.get(file)
        expected = (min(stop, size) if size is not None else stop) - start
        fs, where = self._filesystem(), self.name_of(file)
        try:
            return bounded_copy(fs, self.scheme, self._path(file), start, stop, where=where, expected=expected, out=out)
        except CkptdiffError:
            raise
        except Exception as err:  # the store's own error, mid-copy: one line naming this file
            explained = explain_store_error(err, where=where, scheme=self.scheme)
            if explained is None:
                raise
            raise explained from None

    def _path(self, file: RelativePath) -> str:
        return f"{self.folder}/{file}" if self.folder else file
