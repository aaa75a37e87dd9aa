"""Real object-store servers on loopback for the tests: moto's S3 server, with per-object request/byte counters.

with S3Server() as s3:                  # ThreadedMotoServer on 127.0.0.1, a free port
    s3.env                              # AWS_* variables that point s3fs/boto3 at it
    s3.upload(folder, "bucket/prefix")  # every file of a folder, as objects
    s3.bytes_sent["bucket/prefix/model.safetensors"], s3.requests[...]
    s3.require_auth()                   # from now on only the keys moto's IAM knows are accepted

Faults, per object path (``bucket/key``), answered before moto sees the request:
    s3.generated[path] = (prefix, size)   # an object of ``size`` bytes, ``prefix`` then zeros, made as it is sent
    s3.ignore_range.add(path)             # GETs answer 200 with the whole object, whatever Range asked
    s3.endless.add(path)                  # GETs answer 206 with a Content-Range, then bytes that never end
    s3.short_after[path] = n              # GETs send the object's bytes only up to byte n, as a shorter answer
    s3.drop_after[path] = n               # GETs send the object's bytes up to byte n, then the connection drops
    s3.answer[path] = status              # HEADs and GETs answer that HTTP status with S3's error document

A plain web server, as ``python -m http.server`` is (no Range, no ETag; a folder's page lists its links):

with WebServer(folder, autoindex=True) as web:  # web.endpoint + "/sub/model.safetensors" is folder's file
    web.requests                                # Counter of (method, path), every request in order
    web.hooks.append(gate)                      # each (method, path) passes a tests/request_gate.py gate first
    web.answer["/sub/config.json"] = 403        # HEADs and GETs of that path answer that status
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from loopback import serve_in_background

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
#: A secret no output may ever contain (looked for whole and in pieces by the tests).
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzSecretNeverShown"


class _Counting:
    """WSGI middleware: counts requests and response body bytes per object path (``bucket/key``)."""

    def __init__(self, app: Any, server: S3Server) -> None:
        self.app, self.server = app, server

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
        server = self.server
        with server.lock:
            server.requests[path] += 1
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        for hook in list(server.hooks):
            hook(environ)
        if path in server.ignore_range:
            environ.pop("HTTP_RANGE", None)
        app = self.app
        if path in server.generated or (path in server.endless and environ["REQUEST_METHOD"] == "GET"):
            app = self._fault
        cut = server.short_after.get(path, server.drop_after.get(path))
        if cut is not None and environ["REQUEST_METHOD"] == "GET":
            app = self._cut(app, cut, drop=path in server.drop_after)
        if path in server.answer:
            app = self._refuse
        try:
            time.sleep(server.latency)
            for chunk in app(environ, start_response):
                with server.lock:
                    server.bytes_sent[path] += len(chunk)
                yield chunk
        finally:
            with server.lock:
                server.in_flight -= 1

    @staticmethod
    def _cut(app: Any, cut: int, *, drop: bool) -> Any:
        """``app``'s answer with the object's bytes from byte ``cut`` on left out: a shorter answer (its
        Content-Length says so), or, with ``drop``, the promised length and a connection that breaks."""

        def cut_app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
            answer: dict[str, int] = {}

            def start(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                named = {name.lower(): value for name, value in headers}
                first = int(named["content-range"].split()[1].split("-")[0]) if "content-range" in named else 0
                answer["length"] = int(named.get("content-length", 0))
                answer["kept"] = max(0, min(answer["length"], cut - first))
                if not drop:
                    headers = [(n, str(answer["kept"]) if n.lower() == "content-length" else v) for n, v in headers]
                return start_response(status, headers, *exc)

            sent = 0
            for chunk in app(environ, start):
                piece = chunk[: answer["kept"] - sent]
                sent += len(piece)
                yield piece  # the first, even empty, sends the headers
            if drop and answer["kept"] < answer["length"]:
                environ["werkzeug.socket"].shutdown(socket.SHUT_RDWR)  # the connection breaks, as a store's can

        return cut_app

    def _refuse(self, environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        """S3's error document for the status ``answer`` holds for the object (AccessDenied, InternalError, ...)."""
        status = self.server.answer[unquote(environ.get("PATH_INFO", "")).lstrip("/")]
        code = {403: "AccessDenied", 500: "InternalError", 503: "SlowDown"}.get(status, "Error")
        body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{code}</Message></Error>'
        reason = {403: "Forbidden", 500: "Internal Server Error", 503: "Slow Down"}.get(status, "Error")
        start_response(f"{status} {reason}", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        yield body.encode()

    def _fault(self, environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        """A generated object (HEAD and GET, Range ignored) or an endless 206."""
        path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
        prefix, size = self.server.generated.get(path, (b"", 2**40))
        headers = [("ETag", '"0123456789abcdef0123456789abcdef"'), ("Last-Modified", "Tue, 01 Dec 2026 00:00:00 GMT")]
        headers.append(("Content-Type", "binary/octet-stream"))
        if path in self.server.endless and environ["REQUEST_METHOD"] == "GET":
            start_response("206 Partial Content", [*headers, ("Content-Range", f"bytes 0-99999/{size}")])
            return self._zeros(prefix, None)
        start_response("200 OK", [*headers, ("Content-Length", str(size))])
        return iter(()) if environ["REQUEST_METHOD"] == "HEAD" else self._zeros(prefix, size)

    @staticmethod
    def _zeros(prefix: bytes, size: int | None) -> Iterator[bytes]:
        yield prefix
        sent, block = len(prefix), bytes(1024 * 1024)
        while size is None or sent < size:
            piece = block if size is None else block[: size - sent]
            sent += len(piece)
            yield piece


class S3Server:
    def __init__(self) -> None:
        self.generated: dict[str, tuple[bytes, int]] = {}
        self.ignore_range: set[str] = set()
        self.endless: set[str] = set()
        self.short_after: dict[str, int] = {}
        self.drop_after: dict[str, int] = {}
        self.answer: dict[str, int] = {}
        self.requests: Counter[str] = Counter()
        self.bytes_sent: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.latency = 0.0  # seconds added to every request (to see requests overlap)
        self.in_flight = self.max_in_flight = 0
        #: Called with each request's WSGI environ before it is served (e.g. to rewrite an object mid-run).
        self.hooks: list[Callable[[dict[str, Any]], None]] = []

    def __enter__(self) -> S3Server:
        from moto.server import ThreadedMotoServer

        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        host, port = self.moto.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        wsgi = self.moto._server  # werkzeug's server reads .app for every request
        wsgi.app = _Counting(wsgi.app, self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.moto.stop()

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",  # never look for an instance role beyond loopback
        }

    def client(self, **overrides: str) -> Any:
        import boto3

        env = {**self.env, **overrides}
        return boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
        )

    def upload(self, folder: Path, target: str) -> None:
        bucket, _, prefix = target.partition("/")
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = "/".join(p for p in (prefix, path.relative_to(folder).as_posix()) if p)
                client.upload_file(str(path), bucket, key)
        self.reset_counters()

    def clear_faults(self) -> None:
        """No fault, hook or latency left from a test: the server is the whole run's."""
        for faults in (self.generated, self.ignore_range, self.endless, self.short_after, self.drop_after, self.answer):
            faults.clear()
        self.hooks.clear()
        self.latency = 0.0

    def reset_counters(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bytes_sent.clear()
            self.max_in_flight = 0

    @contextlib.contextmanager
    def require_auth(self) -> Iterator[tuple[str, str]]:
        """``with s3.require_auth() as (key_id, secret):`` moto checks signatures, accepting only a fresh IAM
        user's keys (yielded). Moto's auth switch is process-wide, so it is switched off again on exit."""
        import boto3
        import requests

        requests.post(f"{self.endpoint}/moto-api/reset-auth", data=b"4", timeout=60)  # 3 IAM calls go unsigned
        try:
            iam = boto3.client(
                "iam",
                endpoint_url=self.endpoint,
                aws_access_key_id=ACCESS_KEY,
                aws_secret_access_key=SECRET_KEY,
                region_name="us-east-1",
            )
            user = f"reader-{uuid.uuid4().hex[:8]}"
            iam.create_user(UserName=user)
            policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
            iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=json.dumps(policy))
            key = iam.create_access_key(UserName=user)["AccessKey"]
            yield key["AccessKeyId"], key["SecretAccessKey"]
        finally:
            requests.post(f"{self.endpoint}/moto-api/reset-auth", data=str(2**62).encode(), timeout=60)


def point_aws_chain_at(server: S3Server, monkeypatch: Any) -> S3Server:
    """This process's AWS chain pointed at ``server`` (environment variables, as a user would set them), with
    its request counters zeroed."""
    for variable, value in server.env.items():
        monkeypatch.setenv(variable, value)
    for variable in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(variable, raising=False)
    server.reset_counters()
    return server


class WebServer:
    """A folder served on 127.0.0.1 by the standard library's file server: HEAD and GET, whole files (Range is
    ignored), a folder's URL answering its page of links (``autoindex``) or 404, as servers configured so do."""

    def __init__(self, folder: Path, *, autoindex: bool = True) -> None:
        self.folder, self.autoindex = folder, autoindex
        self.requests: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()
        #: Called with each request's (method, path) before it is answered (a tests/request_gate.py gate).
        self.hooks: list[Callable[[tuple[str, str]], object]] = []
        #: A status that path's HEADs and GETs answer instead of the file (403, 500, ...), with a short page.
        self.answer: dict[str, int] = {}

    def __enter__(self) -> WebServer:
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(server.folder), **kwargs)

            def send_head(self) -> Any:
                with server.lock:
                    server.requests[self.command, unquote(self.path)] += 1
                for hook in server.hooks:
                    hook((self.command, unquote(self.path)))
                status = server.answer.get(unquote(self.path))
                if status is not None:
                    self.send_error(status)
                    return None
                if not server.autoindex and Path(self.translate_path(self.path)).is_dir():
                    self.send_error(404)
                    return None
                return super().send_head()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = serve_in_background(self.httpd)
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
