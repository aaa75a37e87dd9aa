"""A Hugging Face Hub emulator: a real HTTP server on 127.0.0.1 that the unmodified huggingface_hub client talks to.

Point the client at it with ``HF_ENDPOINT=emulator.endpoint`` (subprocesses: ``emulator.client_env(home)``;
in-process: the ``hub_client`` fixture in ``conftest.py`` patches ``huggingface_hub.constants``). Repos are folders
on disk, served at commits you create; sparse files are fine (only the bytes asked for are ever read).

    emulator = HubEmulator().start()
    commit = emulator.add_repo("org/drafter", folder)          # branch "main" → commit
    emulator.push("org/drafter", other_folder)                 # a new commit; "main" moves to it
    emulator.tag("org/drafter", "v1", commit)
    emulator.latency = 0.05                                    # seconds added to every request
    emulator.fail_next(503, count=2, retry_after=0)            # the next 2 requests answer 503
    emulator.ignore_range = True                               # answer Range with 200 + the whole body
    emulator.requests["resolve"], emulator.bytes_sent["resolve"] # counters per route (see ROUTES)
    emulator.max_in_flight["resolve"]                          # the most requests answered at once
    emulator.log                                               # every request: route, path, Range, status,
                                                               # bytes sent, arrival time (never the token)
    emulator.stop()

By hand: ``python tests/hub_emulator.py [--port 8765] [--latency 0.05] org/name=FOLDER ...`` serves until
interrupted and prints the ``HF_ENDPOINT`` to export.

Routes (as the real Hub answers them, per the client's source):

- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: ``X-Repo-Commit``, ``ETag`` (git blob sha1, or the sha256 for LFS
  files, which also get ``X-Linked-Etag``/``X-Linked-Size``), ``Accept-Ranges``; ``Range: bytes=a-b`` → 206 with
  ``Content-Range`` (clamped at the end), 416 with ``bytes */size`` when ``a`` is past the end. With
  ``lfs_redirect=True`` LFS files answer 302 to a second server (route ``cdn``), like the real CDN.
- ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}``: ``id``, ``sha``, ``siblings``; with
  ``?blobs=true`` also ``size``, ``blobId`` and ``lfs{sha256,size,pointerSize}``.
- ``GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=&cursor=``: ``[{type, oid, size, path, lfs?}]``,
  ``tree_page_size`` entries a page, the next page in ``Link: <…>; rel="next"``.
- ``GET /api/agent-harnesses``: an empty registry (huggingface_hub fetches it once a day for its user agent
  unless ``HF_HUB_DISABLE_TELEMETRY=1``, which ``client_env`` and the ``hub_client`` fixture set).
- Errors carry ``X-Error-Code``: ``RepoNotFound`` (404; 401 for a private repo without a token),
  ``RevisionNotFound`` (404), ``EntryNotFound`` (404), ``GatedRepo`` (401 without a token, 403 with one that
  has no access).

LFS files are those with a weight-file suffix (``LFS_SUFFIXES``) or over 10 MB. Their sha256 is computed
lazily from the content, except for sparse files and files over ``HASH_LIMIT``: those get a fake but stable id,
``sha256("hub-emulator:" + path + ":" + size)``, so a 16 GB sparse file is never read whole. Tests that need
the true hash can set it with ``emulator.set_sha256(repo_id, path, value)``.

Fault injection: ``fail_next`` forces a status; ``hooks`` is a list of callables ``hook(request) -> bool``
run before routing; a hook that returns True has answered the request itself (through ``request.respond`` or
raw ``request.handler.wfile``/``request.handler.connection``), which is enough for never-answer, reset
mid-body, a wrong ``Content-Range`` or a redirect loop.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from loopback import serve_in_background

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".npz", ".zip")
LFS_MIN_SIZE = 10 * 1024 * 1024
#: Files bigger than this (or sparse) get a fake, stable sha256 instead of a real one.
HASH_LIMIT = 64 * 1024 * 1024
CHUNK = 64 * 1024
#: Route names used by the counters.
ROUTES = ("resolve", "cdn", "api-info", "api-tree", "agent-registry", "unknown")
_ERROR_MESSAGES = {
    "RepoNotFound": "Repository not found",
    "RevisionNotFound": "Invalid rev id",
    "EntryNotFound": "Entry not found",
    "GatedRepo": "Access to this model is restricted",
}


@dataclass
class RepoFile:
    """One file of a commit as the Hub describes it."""

    path: str
    local: Path
    size: int
    lfs: bool
    blob_id: str  # git oid: of the content, or of the LFS pointer
    sha256: str | None  # LFS only
    pointer_size: int | None

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs and self.sha256 else self.blob_id


@dataclass
class EmulatedRepo:
    repo_id: str
    commits: dict[str, Path] = field(default_factory=dict)  # commit sha → folder
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag → commit sha
    default_branch: str = "main"
    gated: bool = False
    private: bool = False
    #: tokens that may read a gated/private repo; None: any of the emulator's valid tokens
    access: set[str] | None = None


@dataclass
class LoggedRequest:
    origin: str  # "hub" or "cdn"
    method: str
    route: str
    path: str
    range: str | None
    authenticated: bool  # never the token itself
    status: int = 0
    bytes_sent: int = 0
    started: float = field(default_factory=time.monotonic)  # when the request line arrived
    finished: float = 0.0  # when the answer was sent (time.monotonic(), comparable across processes)


@dataclass
class Request:
    """What a hook sees: the parsed request, plus the handler for raw socket tricks."""

    handler: _Handler
    origin: str
    method: str
    route: str
    path: str
    query: dict[str, list[str]]
    headers: Any  # http.client.HTTPMessage
    log: LoggedRequest

    def respond(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.handler.send_all(self, status, body, headers or {})


Hook = Callable[[Request], bool]


class HubEmulator:
    """A threaded HTTP server pair (hub + CDN) on 127.0.0.1 serving repos from folders on disk."""

    def __init__(self, *, lfs_redirect: bool = False, latency: float = 0.0, tree_page_size: int = 1000) -> None:
        self.repos: dict[str, EmulatedRepo] = {}
        self.lfs_redirect = lfs_redirect
        self.latency = latency
        self.ignore_range = False
        self.tree_page_size = tree_page_size
        self.valid_tokens: set[str] = set()
        self.hooks: list[Hook] = []
        self.requests: Counter[str] = Counter()
        self.bytes_sent: Counter[str] = Counter()
        self.log: list[LoggedRequest] = []
        #: the most requests answered at the same time, per route and "all" (how parallel the client was)
        self.max_in_flight: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._forced: list[dict[str, Any]] = []
        self._sha_overrides: dict[tuple[str, str], str] = {}
        self._hash_cache: dict[tuple[str, int, int], tuple[str, str | None]] = {}
        self._lock = threading.Lock()
        self._commit_counter = 0
        self._servers: list[ThreadingHTTPServer] = []
        self.endpoint = ""
        self.cdn_endpoint = ""

    # --- life cycle -------------------------------------------------------------------------------------

    def start(self, port: int = 0, host: str = "127.0.0.1") -> HubEmulator:
        """Listen on ``host`` (the endpoints name 127.0.0.1: "0.0.0.0" also listens there): the Hub origin on
        ``port`` (0: any free port), the CDN origin on any free port."""
        for origin in ("hub", "cdn"):
            server = _Server((host, port if origin == "hub" else 0), _Handler)
            server.emulator = self  # type: ignore[attr-defined]
            server.origin = origin  # type: ignore[attr-defined]
            serve_in_background(server)
            self._servers.append(server)
        self.endpoint = f"http://127.0.0.1:{self._servers[0].server_address[1]}"
        self.cdn_endpoint = f"http://127.0.0.1:{self._servers[1].server_address[1]}"
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> HubEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client_env(self, hf_home: Path, token: str | None = None) -> dict[str, str]:
        """Environment for a subprocess running the unmodified client against this emulator."""
        env = {
            "HF_ENDPOINT": self.endpoint,
            "HF_HOME": str(hf_home),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
            "HF_HUB_ETAG_TIMEOUT": "10",
            "HF_HUB_DOWNLOAD_TIMEOUT": "10",
        }
        if token:
            env["HF_TOKEN"] = token
        return env

    # --- repos ------------------------------------------------------------------------------------------

    def add_repo(
        self, repo_id: str, folder: Path, *, branch: str = "main", gated: bool = False, private: bool = False
    ) -> str:
        """Create a repo whose ``branch`` points at a first commit holding ``folder``; returns the commit."""
        with self._lock:
            self.repos[repo_id] = EmulatedRepo(repo_id, default_branch=branch, gated=gated, private=private)
        return self.push(repo_id, folder, branch=branch)

    def push(self, repo_id: str, folder: Path, *, branch: str = "main") -> str:
        """A new commit holding ``folder``; ``branch`` moves to it. Returns the commit sha."""
        with self._lock:
            repo = self.repos[repo_id]
            self._commit_counter += 1
            commit = hashlib.sha1(f"{repo_id}\0{self._commit_counter}\0{folder}".encode()).hexdigest()
            repo.commits[commit] = Path(folder)
            repo.refs[branch] = commit
        return commit

    def tag(self, repo_id: str, name: str, commit: str) -> None:
        """Point a tag (or branch) at a commit: also how a test moves a branch."""
        with self._lock:
            self.repos[repo_id].refs[name] = commit

    def set_sha256(self, repo_id: str, path: str, sha256: str) -> None:
        self._sha_overrides[(repo_id, path)] = sha256

    def reset_counters(self) -> None:
        with self._lock:
            self.requests.clear()
            self.bytes_sent.clear()
            self.max_in_flight.clear()
            self.log.clear()

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_sent.values())

    # --- faults -----------------------------------------------------------------------------------------

    def fail_next(
        self,
        status: int,
        count: int = 1,
        *,
        retry_after: float | None = None,
        route: str | None = None,
        error_code: str | None = None,
    ) -> None:
        """The next ``count`` requests (on ``route``, or any) answer ``status`` with an empty body."""
        with self._lock:
            self._forced.append(
                {"status": status, "count": count, "retry_after": retry_after, "route": route, "code": error_code}
            )

    def _take_forced(self, route: str) -> dict[str, Any] | None:
        with self._lock:
            for forced in self._forced:
                if forced["route"] in (None, route) and forced["count"] > 0:
                    forced["count"] -= 1
                    if forced["count"] == 0:
                        self._forced.remove(forced)
                    return forced
        return None

    # --- content ----------------------------------------------------------------------------------------

    def resolve_revision(self, repo: EmulatedRepo, revision: str | None) -> str | None:
        revision = revision or repo.default_branch
        if revision in repo.commits:
            return revision
        return repo.refs.get(revision)

    def files(self, repo: EmulatedRepo, commit: str) -> dict[str, RepoFile]:
        folder = repo.commits[commit]
        found: dict[str, RepoFile] = {}
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                rel = path.relative_to(folder).as_posix()
                if not rel.startswith(".git/"):
                    found[rel] = self._describe(repo.repo_id, rel, path)
        return found

    def file(self, repo: EmulatedRepo, commit: str, rel: str) -> RepoFile | None:
        local = repo.commits[commit] / rel
        if ".." in rel.split("/") or not local.is_file():
            return None
        return self._describe(repo.repo_id, rel, local)

    def _describe(self, repo_id: str, rel: str, local: Path) -> RepoFile:
        stat = local.stat()
        lfs = rel.endswith(LFS_SUFFIXES) or stat.st_size > LFS_MIN_SIZE
        key = (str(local), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._hash_cache.get(key)
        if cached is None:
            cached = self._hash(rel, local, stat, lfs)
            with self._lock:
                self._hash_cache[key] = cached
        blob_id, sha256 = cached
        sha256 = self._sha_overrides.get((repo_id, rel), sha256)
        pointer_size = None
        if lfs:
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {stat.st_size}\n"
            pointer_size = len(pointer)
            blob_id = _git_blob_sha1(pointer.encode())
        return RepoFile(rel, local, stat.st_size, lfs, blob_id, sha256, pointer_size)

    @staticmethod
    def _hash(rel: str, local: Path, stat: os.stat_result, lfs: bool) -> tuple[str, str | None]:
        if not lfs:
            return _git_blob_sha1(local.read_bytes()), None
        sparse = getattr(stat, "st_blocks", None) is not None and stat.st_blocks * 512 < stat.st_size
        if sparse or stat.st_size > HASH_LIMIT:
            return "", hashlib.sha256(f"hub-emulator:{rel}:{stat.st_size}".encode()).hexdigest()
        digest = hashlib.sha256()
        with open(local, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return "", digest.hexdigest()

    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests[entry.route] += 1
            self.log.append(entry)

    def _enter(self, route: str) -> None:
        with self._lock:
            for key in (route, "all"):
                self._in_flight[key] += 1
                self.max_in_flight[key] = max(self.max_in_flight[key], self._in_flight[key])

    def _leave(self, route: str) -> None:
        with self._lock:
            for key in (route, "all"):
                self._in_flight[key] -= 1

    def _count_bytes(self, entry: LoggedRequest, n: int) -> None:
        with self._lock:
            entry.bytes_sent += n
            self.bytes_sent[entry.route] += n


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 drops SYNs when a client opens many connections at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops its connection (ckptdiff refusing a bad answer) is not the server's error; the
        # default prints a traceback on sys.stderr, which an in-process CLI run would capture as its own output.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def _git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _route_of(origin: str, parts: list[str]) -> str:
    if origin == "cdn":
        return "cdn"
    if parts == ["api", "agent-harnesses"]:
        return "agent-registry"  # huggingface_hub's user-agent registry, fetched daily unless telemetry is off
    if parts[:2] == ["api", "models"]:
        return "api-tree" if len(parts) >= 6 and parts[4] == "tree" else "api-info"
    if len(parts) >= 5 and parts[2] == "resolve":
        return "resolve"
    return "unknown"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "HubEmulator/1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle + delayed ACK stall each reused
        # keep-alive connection ~40 ms a response (real Hub front ends send without delay).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the default stderr log
        pass

    @property
    def emulator(self) -> HubEmulator:
        return self.server.emulator  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    # --- plumbing ---------------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        origin = self.server.origin  # type: ignore[attr-defined]
        split = urlsplit(self.path)
        raw_parts = [p for p in split.path.split("/") if p]
        route = _route_of(origin, [unquote(p) for p in raw_parts])
        entry = LoggedRequest(
            origin, self.command, route, split.path, self.headers.get("Range"), "authorization" in self.headers
        )
        self.emulator._record(entry)
        self.emulator._enter(route)
        try:
            self._handle(entry, origin, split, raw_parts, route)
        finally:
            entry.finished = time.monotonic()
            self.emulator._leave(route)

    def _handle(self, entry: LoggedRequest, origin: str, split: Any, raw_parts: list[str], route: str) -> None:
        request = Request(self, origin, self.command, route, split.path, parse_qs(split.query), self.headers, entry)
        if self.emulator.latency:
            time.sleep(self.emulator.latency)
        for hook in list(self.emulator.hooks):
            if hook(request):
                return
        forced = self.emulator._take_forced(route)
        if forced is not None:
            headers = {}
            if forced["retry_after"] is not None:
                headers["Retry-After"] = str(int(forced["retry_after"]))
            if forced["code"]:
                headers["X-Error-Code"] = forced["code"]
            self.send_all(request, forced["status"], b"", headers)
            return
        try:
            if route == "resolve":
                self._resolve(request, raw_parts)
            elif route == "cdn":
                self._cdn(request, raw_parts)
            elif route in ("api-info", "api-tree"):
                self._api(request, raw_parts)
            elif route == "agent-registry":
                body = json.dumps({"standardEnvVars": [], "harnesses": {}}).encode()
                self.send_all(request, 200, body, {"Content-Type": "application/json"})
            else:
                self.send_all(request, 404, b"not found", {})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def send_all(self, request: Request, status: int, body: bytes, headers: dict[str, str]) -> None:
        request.log.status = status
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            # counted before the write: the client may read the body before this thread runs again
            self.emulator._count_bytes(request.log, len(body))
            self.wfile.write(body)

    def _error(self, request: Request, status: int, code: str, extra: dict[str, str] | None = None) -> None:
        message = _ERROR_MESSAGES[code]
        body = json.dumps({"error": message}).encode()
        headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        self.send_all(request, status, body, {**headers, **(extra or {})})

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    def _repo(self, request: Request, repo_id: str, *, files: bool) -> EmulatedRepo | None:
        """The repo, or None after answering the error (missing, private, gated)."""
        repo = self.emulator.repos.get(repo_id)
        token = self._token()
        valid = token is not None and token in self.emulator.valid_tokens
        allowed = valid and (repo is None or repo.access is None or token in repo.access)
        if repo is None or (repo.private and not allowed):
            self._error(request, 401 if repo is not None or token is None else 404, "RepoNotFound")
            return None
        if repo.gated and files and not allowed:
            self._error(request, 403 if valid else 401, "GatedRepo")
            return None
        return repo

    # --- routes -----------------------------------------------------------------------------------------

    def _resolve(self, request: Request, raw: list[str]) -> None:
        repo_id = f"{unquote(raw[0])}/{unquote(raw[1])}"
        revision = unquote(raw[3])
        rel = "/".join(unquote(p) for p in raw[4:])
        repo = self._repo(request, repo_id, files=True)
        if repo is None:
            return
        commit = self.emulator.resolve_revision(repo, revision)
        if commit is None:
            self._error(request, 404, "RevisionNotFound")
            return
        info = self.emulator.file(repo, commit, rel)
        if info is None:
            self._error(request, 404, "EntryNotFound", {"X-Repo-Commit": commit})
            return
        headers = {"X-Repo-Commit": commit, "ETag": f'"{info.etag}"', "Accept-Ranges": "bytes"}
        if info.lfs:
            headers.update({"X-Linked-Etag": f'"{info.sha256}"', "X-Linked-Size": str(info.size)})
            if self.emulator.lfs_redirect:
                target = f"{self.emulator.cdn_endpoint}/cdn/{quote(repo_id)}/{commit}/{quote(rel)}"
                self.send_all(request, 302, b"", {**headers, "Location": target})
                return
        self._serve_file(request, info, headers)

    def _cdn(self, request: Request, raw: list[str]) -> None:
        if len(raw) < 5 or raw[0] != "cdn":
            self.send_all(request, 404, b"", {})
            return
        repo = self.emulator.repos.get(f"{unquote(raw[1])}/{unquote(raw[2])}")
        commit = unquote(raw[3])
        info = None
        if repo is not None and commit in repo.commits:
            info = self.emulator.file(repo, commit, "/".join(unquote(p) for p in raw[4:]))
        if info is None:
            self.send_all(request, 404, b"", {})
            return
        self._serve_file(request, info, {"ETag": f'"{info.sha256}"', "Accept-Ranges": "bytes"})

    def _serve_file(self, request: Request, info: RepoFile, headers: dict[str, str]) -> None:
        size = info.size
        start, end, status = 0, size - 1, 200
        wanted = request.headers.get("Range")
        if wanted and not self.emulator.ignore_range:
            parsed = _parse_range(wanted, size)
            if parsed == "unsatisfiable":
                self.send_all(request, 416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            if parsed is not None:
                start, end = parsed
                status = 206
                headers = {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}
        length = max(0, end - start + 1)
        request.log.status = status
        self.send_response(status)
        headers = {**headers, "Content-Length": str(length), "Content-Type": "application/octet-stream"}
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command == "HEAD" or length == 0:
            return
        with open(info.local, "rb") as handle:
            offset = start
            while offset <= end:
                chunk = os.pread(handle.fileno(), min(CHUNK, end - offset + 1), offset)
                if not chunk:
                    break
                self.emulator._count_bytes(request.log, len(chunk))  # before the write, as in send_all
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    self.emulator._count_bytes(request.log, -len(chunk))  # count only what went out
                    self.close_connection = True
                    return
                offset += len(chunk)

    def _api(self, request: Request, raw: list[str]) -> None:
        parts = [unquote(p) for p in raw]
        if len(parts) < 4:
            self.send_all(request, 404, b"", {})
            return
        repo_id = f"{parts[2]}/{parts[3]}"
        repo = self._repo(request, repo_id, files=False)
        if repo is None:
            return
        rest = parts[4:]
        revision = rest[1] if len(rest) >= 2 and rest[0] in ("revision", "tree") else None
        commit = self.emulator.resolve_revision(repo, revision)
        if commit is None:
            self._error(request, 404, "RevisionNotFound")
            return
        if rest and rest[0] == "tree":
            self._tree(request, repo, commit, "/".join(rest[2:]), raw)
            return
        blobs = request.query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for info in self.emulator.files(repo, commit).values():
            sibling: dict[str, Any] = {"rfilename": info.path}
            if blobs:
                sibling.update(size=info.size, blobId=info.blob_id)
                if info.lfs:
                    sibling["lfs"] = {"sha256": info.sha256, "size": info.size, "pointerSize": info.pointer_size}
            siblings.append(sibling)
        document = {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "sha": commit,
            "private": repo.private,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
        }
        self.send_all(request, 200, json.dumps(document).encode(), {"Content-Type": "application/json"})

    def _tree(self, request: Request, repo: EmulatedRepo, commit: str, prefix: str, raw: list[str]) -> None:
        recursive = request.query.get("recursive", ["false"])[0].lower() == "true"
        prefix = prefix.strip("/")
        entries: list[dict[str, Any]] = []
        folders: set[str] = set()
        for info in self.emulator.files(repo, commit).values():
            if prefix and not info.path.startswith(prefix + "/"):
                continue
            rest = info.path[len(prefix) + 1 :] if prefix else info.path
            segments = rest.split("/")
            for depth in range(1, len(segments)):
                folder = "/".join(([prefix] if prefix else []) + segments[:depth])
                if (recursive or depth == 1) and folder not in folders:
                    folders.add(folder)
                    oid = hashlib.sha1(f"{commit}:{folder}".encode()).hexdigest()
                    entries.append({"type": "directory", "oid": oid, "size": 0, "path": folder})
            if not recursive and len(segments) > 1:
                continue
            entry: dict[str, Any] = {"type": "file", "oid": info.blob_id, "size": info.size, "path": info.path}
            if info.lfs:
                entry["lfs"] = {"oid": info.sha256, "size": info.size, "pointerSize": info.pointer_size}
            entries.append(entry)
        if prefix and not entries:
            self._error(request, 404, "EntryNotFound", {"X-Repo-Commit": commit})
            return
        entries.sort(key=lambda e: e["path"])
        cursor = int(request.query.get("cursor", ["0"])[0] or 0)
        page = entries[cursor : cursor + self.emulator.tree_page_size]
        headers = {"Content-Type": "application/json"}
        if cursor + self.emulator.tree_page_size < len(entries):
            query = {k: v[0] for k, v in request.query.items() if k != "cursor"}
            query["cursor"] = str(cursor + self.emulator.tree_page_size)
            link = f"{self.emulator.endpoint}{request.path}?" + "&".join(f"{k}={quote(v)}" for k, v in query.items())
            headers["Link"] = f'<{link}>; rel="next"'
        self.send_all(request, 200, json.dumps(page).encode(), headers)


def _parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` → (start, end) clamped; "unsatisfiable"; None to ignore."""
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        if first == "":
            suffix = int(last)
            return (max(0, size - suffix), size - 1) if suffix > 0 and size > 0 else "unsatisfiable"
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if end < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


def main(argv: list[str] | None = None) -> None:
    """Serve folders as Hub repos until interrupted: ``python tests/hub_emulator.py org/name=FOLDER ...``."""
    import argparse

    parser = argparse.ArgumentParser(description="Serve folders as Hugging Face Hub repos on 127.0.0.1.")
    parser.add_argument("repos", nargs="+", metavar="ORG/NAME=FOLDER")
    parser.add_argument("--port", type=int, default=0, help="port of the Hub origin (default: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--lfs-redirect", action="store_true", help="answer LFS files with a 302 to a CDN origin")
    args = parser.parse_args(argv)
    emulator = HubEmulator(lfs_redirect=args.lfs_redirect, latency=args.latency)
    emulator.start(port=args.port, host=args.host)
    for item in args.repos:
        repo_id, _, folder = item.partition("=")
        commit = emulator.add_repo(repo_id, Path(folder))
        print(f"{repo_id} @ {commit}  ←  {folder}", flush=True)
    print(f"export HF_ENDPOINT={emulator.endpoint}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        emulator.stop()


if __name__ == "__main__":
    main()
