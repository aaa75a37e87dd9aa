"""Where a checkpoint comes from: a spec string → a Source → a Checkpoint.

A spec is a local path (file or folder), a Hub repo ``org/name[@revision]`` or ``hf://org/name[@rev][/sub]``,
a Hub page's URL as a browser shows it (``https://huggingface.co/org/name[/tree/REV[/SUB]]``, ``/blob/REV/file``),
or an object-store URL (``s3://``, ``gs://``, ``az://``, ``abfs://``, ``https://``, ``http://``). A URL scheme
always means its store (an ``https://`` URL from a host other than the Hub's is a web server); a spec that exists
on disk is a path; ``./x``, ``/x`` and ``~/x`` are always paths. What reports and errors print of a spec is
:func:`display_spec`: the spec without credentials, computed here once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import msgspec

from ..errors import (
    CkptdiffError,
    SourceError,
    display_url,
    remember_url_credentials,
    scrub_secrets,
    split_userinfo,
)

if TYPE_CHECKING:  # light to import: the command parses A and B before loading the checkpoint model
    from concurrent.futures import Executor

    from ..checkpoint import Checkpoint, RelativePath
    from ..progress import Progress
    from .base import Source
    from .wanted import Wanted

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
#: Hosts whose https:// page URLs are the Hub's (besides the host of HF_ENDPOINT).
HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")
#: A Hub page URL's path after org/name: the repo page, a folder or a file view at a revision.
_HUB_PAGE = re.compile(r"^(?:/(?P<view>tree|blob|resolve)/(?P<revision>[^/]+)(?P<path>(?:/[^/]+)*))?/?$")
#: What git refuses in a ref name (git check-ref-format), and so what no branch, tag or commit can be.
_BAD_REVISION = re.compile(r"\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\]|^[/.]|[/.]$|\.lock$|^@$|/\.")
#: A URL scheme as RFC 3986 spells one (a spec "x://..." with another is not a URL).
_URL_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
#: URL schemes read through fsspec, and the extra that installs each one's package.
STORE_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "abfss", "http", "https")
#: Stores whose keys may hold a ``#`` (their clients read it as part of the key, as the AWS and Azure CLIs do); to
#: gcsfs ``#N`` is an object's generation, and to a web server the fragment is never sent.
HASH_IN_KEY_SCHEMES = ("s3", "az", "abfs", "abfss")


class LocalSpec(msgspec.Struct, frozen=True):
    path: Path


class HubSpec(msgspec.Struct, frozen=True):
    repo_id: str
    revision: str | None  # None: the repo's default branch
    subfolder: str | None = None  # hf://org/name/sub/folder
    explicit: bool = False  # spelled hf://: never a path


class StoreSpec(msgspec.Struct, frozen=True):
    url: str  # as typed: s3://bucket/prefix, https://host/path/model.safetensors
    scheme: str


class SourceOptions(msgspec.Struct, frozen=True):
    """How sources may fetch: shared by both sides and the base model."""

    offline: bool = False
    #: Most header reads in flight at once for a whole run: both sides share one pool (two 61-shard Kimi-K2
    #: repos fit in one round trip; huggingface_hub's HTTP session keeps up to 100 connections).
    jobs: int = 128
    #: Bars on stderr for long reads (:func:`ckptdiff.progress.terminal_progress`); None: none.
    progress: Progress | None = None
    #: Read a local checkpoint's files that are symlinks to outside its folder (--follow-symlinks).
    follow_symlinks: bool = False


def display_spec(spec: str) -> str:
    """How every output names a source: the spec without ``user:password@``, tokens, query string or fragment (an
    S3 or Azure key's ``#`` is no fragment: it is shown)."""
    scheme = spec.partition("://")[0].lower()
    return scrub_secrets(display_url(spec, hash_in_path=scheme in HASH_IN_KEY_SCHEMES))


def parse_spec(spec: str) -> LocalSpec | HubSpec | StoreSpec:
    remember_url_credentials(spec)  # whatever a library quotes of it later, its credentials are never printed
    scheme, separator, rest = spec.partition("://")
    scheme = scheme.lower()  # HTTP://, S3:// (a scheme is case-insensitive; fsspec knows only lower case)
    if separator and scheme == "hf":
        return _parse_hf_url(spec, rest)
    if separator and scheme in ("http", "https"):
        hub_page = _parse_hub_page(spec, rest)
        if hub_page is not None:
            return hub_page
    if separator and scheme in STORE_SCHEMES:
        if not rest.strip("/"):
            raise SourceError(display_spec(spec), "names no bucket, container or host")
        if "?" in rest:
            raise SourceError(
                display_spec(spec),
                "a URL with a query string (a signed link) is not supported",
                "name the object through its store (s3://, gs://, az://) and let its credentials sign the requests",
            )
        if "#" in rest and scheme not in HASH_IN_KEY_SCHEMES:
            _refuse_fragment(spec, scheme)
        _refuse_store_credentials(spec, scheme, rest)
        return StoreSpec(f"{scheme}://{rest}", scheme)
    if "\0" in spec:  # no path or repo id holds one (expanduser would raise ValueError on it)
        raise SourceError(display_spec(spec), "holds a NUL character: no file, folder or Hub repo id has one")
    if not spec.strip():  # Path("") is the current folder: an unset variable ("$MODEL") would compare the cwd
        raise SourceError(repr(spec), "is empty: give a file, folder, Hub repo id or URL")
    try:
        expanded = Path(spec).expanduser()
    except RuntimeError:  # ~user for a user that does not exist
        raise SourceError(spec, "no such file or folder (its ~user has no home directory)") from None
    if spec.startswith(("./", "../", "/", "~", ".\\")) or spec in (".", "..") or _exists(expanded, spec):
        return LocalSpec(expanded)
    repo, _, revision = spec.partition("@")
    if _REPO_ID.match(repo) and (not _ or revision):
        return HubSpec(repo, _checked_revision(spec, revision or None))
    if separator and _URL_SCHEME.match(scheme):  # ftp://, file://: a URL, not a path that happens not to exist
        other = "give a path, a Hub repo id, or an hf://, s3://, gs://, az:// or https:// URL"
        hint = "give the path itself" if scheme == "file" else other
        raise SourceError(display_spec(spec), f"ckptdiff does not read {scheme}:// URLs", hint)
    raise SourceError(spec, "no such file or folder, and not a Hub repo id (org/name[@revision])")


def refuse_offline_stores(sides: dict[str, str | None], flag: str, hint: str) -> None:
    """Offline, only local paths and the Hub's cache can be read: a side that is an object store or a web server
    is refused before any side is read, by the name the caller gave it (``B``, ``--base``; ``b`` from Python).
    ``flag`` is how the caller asked for offline mode, ``hint`` what it can do instead."""
    for side, spec in sides.items():
        if spec is not None and isinstance(parsed := parse_spec(spec), StoreSpec):
            kind = "a web server" if parsed.scheme in ("http", "https") else "an object store"
            shown = display_spec(spec)
            raise SourceError(flag, f"{side} is {shown}, {kind}, which cannot be read offline", hint)


def _refuse_fragment(spec: str, scheme: str) -> None:
    """A ``#`` in a web server's or GCS URL: what follows it is never sent to the server, or is an object's
    generation to gcsfs (``gs://bucket/object#1712345``); neither names a file, so the URL is refused, its part
    after the ``#`` unshown (a token may travel there)."""
    if scheme in ("http", "https"):
        defect = "has a fragment (a '#' and what follows), which is never sent to a web server: it names no file"
        hint = "leave it out; a '#' in a file's name is written %23"
    else:
        defect = "names an object generation after its '#', which ckptdiff does not read"
        hint = "name the object without '#…': its live version is read"
    raise SourceError(display_spec(spec), defect, hint)


def _exists(path: Path, spec: str) -> bool:
    """Whether the path exists; one the system cannot look up (a name over 255 bytes) is refused, not a bug."""
    try:
        return path.exists() or path.is_symlink()  # a broken link is a path: reading it says it is broken
    except OSError as err:  # pathlib swallows only ENOENT, ENOTDIR, EBADF and ELOOP
        raise SourceError(display_spec(spec), f"cannot be looked up: {err.strerror or err}") from None


#: Where each object store takes its credentials from instead of the URL.
_CREDENTIAL_CHAINS = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`",
    "az": "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_KEY or a SAS token, or `az login`",
}


def _refuse_store_credentials(spec: str, scheme: str, rest: str) -> None:
    """An object store takes no credentials in its URL (s3fs would read ``KEY:SECRET@bucket`` as a bucket's name and
    quote it in its error): refused, without them. Azure's ``container@account`` is a place, not a credential. A
    web server's password holding a ``/`` (which ends a URL's host) is refused too: it would be sent as a host."""
    userinfo = split_userinfo(rest)[0]
    azure = scheme in ("az", "abfs", "abfss")
    if scheme in ("http", "https") and "/" in userinfo:
        hint = "write each '/' in it as %2F"
        raise SourceError(display_spec(spec), "the password in the URL (user:password@) holds a '/'", hint)
    if scheme in ("http", "https") or not userinfo or (azure and ":" not in userinfo):
        return
    chain = _CREDENTIAL_CHAINS["az" if azure else "gs" if scheme == "gcs" else scheme]
    raise SourceError(display_spec(spec), "credentials in the URL (user:secret@) are not read", f"give them as {chain}")


def _checked_revision(spec: str, revision: str | None) -> str | None:
    """A revision git could name (a branch, tag or commit): ``..``, ``@{``, spaces and the like are refused."""
    if revision is not None and _BAD_REVISION.search(revision):
        raise SourceError(
            display_spec(spec), f"{revision!r} is not a valid revision", "name a branch, a tag or a commit hash"
        )
    return revision


def check_hub_endpoint() -> None:
    """Refuse an HF_ENDPOINT that is no http(s) URL with a host, before huggingface_hub is imported: its constants
    module parses the variable on import, and ``http://[::1`` raised there (and again while the error was being
    printed: a raw traceback), a port past 65535 was an internal error, ``file:///x`` or "" a "cannot reach"."""
    import os
    from urllib.parse import urlsplit

    raw = os.environ.get("HF_ENDPOINT")
    if raw is None:
        return
    hint = "give the Hub's URL, e.g. https://huggingface.co, or unset it"
    try:
        parts = urlsplit(raw.strip())
        parts.port  # noqa: B018 - parsing the port raises ValueError when it is out of range
    except ValueError as err:
        raise SourceError("HF_ENDPOINT", f"is not a URL ({err})", hint) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SourceError("HF_ENDPOINT", "is not an http:// or https:// URL with a host", hint)


def _hub_hosts() -> set[str]:
    """huggingface.co and, when HF_ENDPOINT names another Hub (a mirror, an emulator), its host."""
    try:
        check_hub_endpoint()
    except SourceError:  # a broken HF_ENDPOINT names no other Hub (a web server's URL is read without it)
        return set(HUB_HOSTS)
    from huggingface_hub import constants

    endpoint = constants.ENDPOINT.partition("://")[2].partition("/")[0].rpartition("@")[2].lower()
    return {*HUB_HOSTS, endpoint}


def _parse_hub_page(spec: str, rest: str) -> HubSpec | None:
    """A Hub URL pasted from a browser: ``/org/name``, ``/org/name/tree/REV[/SUB]``, ``/org/name/blob/REV/file``
    (and ``/resolve/``). None for a URL of any other host: that is a plain web server."""
    authority, _, path = rest.partition("/")
    host = authority.rpartition("@")[2].split("?")[0].split("#")[0].lower()
    if host not in _hub_hosts():
        return None
    path = "/" + re.split(r"[?#]", path, maxsplit=1)[0]
    parts = path.strip("/").split("/")
    if parts and parts[0] in ("datasets", "spaces"):
        raise SourceError(display_spec(spec), f"a Hub {parts[0][:-1]}, not a model repo")
    page = _HUB_PAGE.match("/" + "/".join(parts[2:])) if len(parts) >= 2 else None
    if page is None or not _REPO_ID.match(f"{parts[0]}/{parts[1]}"):
        raise SourceError(
            display_spec(spec),
            "not a Hub model URL",
            "https://huggingface.co/org/name[/tree/revision[/folder]] or .../blob/revision/file",
        )
    revision = _checked_revision(spec, unquote(page["revision"]) if page["revision"] else None)
    sub = unquote((page["path"] or "").strip("/"))
    from ..checkpoint import WEIGHT_FILE_SUFFIXES

    # a Hub file URL naming a weight file or index names the checkpoint itself; any other file names its folder
    if page["view"] in ("blob", "resolve") and not sub.endswith(WEIGHT_FILE_SUFFIXES):
        sub = sub.rpartition("/")[0]  # config.json or a README: the checkpoint is its folder
    if ".." in sub.split("/"):
        raise SourceError(display_spec(spec), "not a Hub model URL (a '..' in its path)")
    return HubSpec(f"{parts[0]}/{parts[1]}", revision, sub or None, explicit=True)


def _parse_hf_url(spec: str, rest: str) -> HubSpec:
    """``hf://org/name[@rev][/sub/folder]``; a revision holding '/' is written URL-encoded (refs%2Fpr%2F1)."""
    parts = rest.strip("/").split("/")
    if len(parts) < 2:
        raise SourceError(spec, "not a Hub repo (hf://org/name[@revision][/subfolder])")
    org, name_rev, sub = parts[0], parts[1], "/".join(parts[2:])
    name, at, revision = name_rev.partition("@")
    if not _REPO_ID.match(f"{org}/{name}") or (at and not revision) or ".." in sub.split("/"):
        raise SourceError(spec, "not a Hub repo (hf://org/name[@revision][/subfolder])")
    return HubSpec(f"{org}/{name}", _checked_revision(spec, unquote(revision) or None), sub or None, explicit=True)


def open_source(spec: str, options: SourceOptions | None = None) -> Source:
    """The Source a spec names (nothing is read yet)."""
    options = options or SourceOptions()
    parsed = parse_spec(spec)
    if isinstance(parsed, LocalSpec):
        from .local import LocalSource

        return LocalSource(spec, parsed.path, follow_symlinks=options.follow_symlinks)
    if isinstance(parsed, StoreSpec):
        from .store import StoreSource

        return StoreSource(spec, parsed, options)
    from .hub import HubSource

    return HubSource(spec, parsed, options)


def resolve(
    spec: str, options: SourceOptions | None = None, *, wanted: AbstractSet[str] | Wanted | None = None
) -> Checkpoint:
    """Read a checkpoint's metadata. With ``wanted`` (names, or a :class:`.wanted.Wanted` of alternatives), a
    sharded checkpoint reads its first shard, and the index and the shards it names only when that first shard
    does not hold them all (:mod:`.wanted`)."""
    options = options or SourceOptions()
    source = open_source(spec, options)
    if not source.remote:
        return read_source(source, wanted=wanted, progress=options.progress)
    from concurrent.futures import ThreadPoolExecutor

    reads = ThreadPoolExecutor(source.jobs, "ckptdiff-read")
    try:
        return read_source(source, wanted=wanted, progress=options.progress, pool=reads)
    finally:
        reads.shutdown(wait=True, cancel_futures=True)


def read_source(
    source: Source,
    *,
    wanted: AbstractSet[str] | Wanted | None = None,
    progress: Progress | None = None,
    pool: Executor | None = None,
) -> Checkpoint:
    """Read through the planner; a store's own errors (HTTP, cloud SDK) become one line naming the source."""
    from .base import explained_errors
    from .planner import read_checkpoint

    with explained_errors(source):
        return read_checkpoint(source, wanted=wanted, progress=progress, pool=pool)


def source_of(checkpoint: Checkpoint, options: SourceOptions | None = None) -> Source:
    """The Source a checkpoint was read from, reopened at the revision it was read at (for --values)."""
    source = open_source(checkpoint.source_spec or checkpoint.spec, options)
    source.pin(checkpoint.revision)
    return source


def fetch_files(
    source: Source, folder: Path, files: Iterable[RelativePath], progress: Progress | None = None
) -> dict[RelativePath, Path]:
    """Local paths of these files (``source.fetch_to``), a store's errors turned into one line as in a read."""
    from .base import explained_errors

    with explained_errors(source):
        return source.fetch_to(folder, sorted(set(files)), progress)


def resolve_both(a: str, b: str, options: SourceOptions | None = None) -> tuple[Checkpoint, Checkpoint]:
    """Read both sides of a comparison (:func:`reading_both`). If both fail, side A's error is the one raised."""
    with reading_both(a, b, options) as both:
        return both()


@contextmanager
def reading_both(
    a: str, b: str, options: SourceOptions | None = None
) -> Iterator[Callable[[], tuple[Checkpoint, Checkpoint]]]:
    """Both sides of a comparison being read; the function given waits for them (if both fail, side A's error is
    the one raised). Remote sides start on entering, at the same time (their waits overlap), their header reads on
    one pool of ``options.jobs`` threads, so every shard of both sides can be in flight at once; the caller may do
    other work before waiting (load the comparison while the network answers). Their sources are opened and
    prepared (:meth:`.base.Source.prepare`) first, in this thread: the reads start with nothing left to load, so
    that the caller's work overlaps their round trips, not their start (one thread runs Python at a time).
    Leaving, early or not, cancels the reads not started."""
    options = options or SourceOptions()
    if not (_is_remote(a) or _is_remote(b)):
        yield lambda: _read_local_pair(a, b, options)
        return
    from concurrent.futures import ThreadPoolExecutor

    from .base import explained_errors

    opened: list[Source | CkptdiffError] = []
    for spec in (a, b):
        try:
            source = open_source(spec, options)
            with explained_errors(source):
                source.prepare()
            opened.append(source)
        except CkptdiffError as err:  # raised by that side's read, so that A's error comes first
            opened.append(err)

    def read(side: Source | CkptdiffError) -> Checkpoint:
        if isinstance(side, CkptdiffError):
            raise side
        return read_source(side, progress=options.progress, pool=headers)

    sources = [side for side in opened if not isinstance(side, CkptdiffError)]
    if len(sources) == 2:  # shard headers both sides hold byte for byte are decoded once (.shared_shards)
        from .shared_shards import SharedShards

        sources[0].shared = sources[1].shared = SharedShards(both_ways=True)
    headers = ThreadPoolExecutor(options.jobs, "ckptdiff-read")
    sides = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ckptdiff-side")
    try:
        side_a, side_b = sides.submit(read, opened[0]), sides.submit(read, opened[1])
        yield lambda: (side_a.result(), side_b.result())
    finally:
        # Left early (a side failed, Ctrl-C): the reads not started are cancelled first, so that neither side
        # starts another; those under way end by their timeouts.
        headers.shutdown(wait=False, cancel_futures=True)
        sides.shutdown(wait=True, cancel_futures=True)
        headers.shutdown(wait=True)


def _read_local_pair(a: str, b: str, options: SourceOptions) -> tuple[Checkpoint, Checkpoint]:
    """A then B; B reuses A's decode of every shard whose header bytes are A's same-named shard's
    (:mod:`.shared_shards`), a common case: a fine-tune that kept the base's layout and metadata."""
    from .shared_shards import SharedShards

    shared = SharedShards()
    source_a, source_b = open_source(a, options), open_source(b, options)
    source_a.shared = source_b.shared = shared
    side_a = read_source(source_a, progress=options.progress)
    shared.done_recording()
    return side_a, read_source(source_b, progress=options.progress)


def _is_remote(spec: str) -> bool:
    try:
        return not isinstance(parse_spec(spec), LocalSpec)
    except SourceError:
        return False  # resolve() raises it in its turn
