"""The Hub's ranged-GET protocol: huggingface_hub's session, retries with capped waits, Content-Range checks, slow-body
limits."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from ..errors import SourceError, hf_token_beyond_environment
from ..limits import MIN_BODY_RATE

#: Retries for one request: status 408/429/5xx (honouring Retry-After up to a cap) and dropped connections. A
#: timeout or a refused connection is reported at once.
MAX_RETRIES = 3
#: Seconds before the first retry; the environment variable overrides it (tests: 0, no waits).
DEFAULT_RETRY_WAIT = 0.5
RETRY_WAIT_VARIABLE = "CKPTDIFF_RETRY_WAIT"
#: The longest Retry-After waited out: a server asking for longer is reported at once (rate limited).
MAX_RETRY_AFTER = 30.0
#: Statuses retried (after a wait): the Hub's transient answers.
RETRY_STATUSES = (408, 429, 500, 502, 503, 504)
#: Bytes of an error response's body kept for its message.
MAX_ERROR_BODY = 64 * 1024


def request_headers(library_version: str) -> dict[str, str]:
    """The headers of every Hub request: huggingface_hub's ``build_hf_headers`` (its user agent and the token from
    HF_TOKEN, ``hf auth login``, OIDC or Colab) whenever a token may be sent. When none can be (implicit tokens
    off, or none of those places holds one), its helper is not imported: its auth module loads PyYAML and filelock,
    ~20 ms of start-up before the first request, to find nothing. The user agent then names the same versions."""
    from huggingface_hub import __version__ as hub_version
    from huggingface_hub import constants

    token_variable = any(os.environ.get(name, "").strip() for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"))
    if not constants.HF_HUB_DISABLE_IMPLICIT_TOKEN and (token_variable or hf_token_beyond_environment()):
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]  # public, in a lazy facade

        return build_hf_headers(library_name="ckptdiff", library_version=library_version)
    python = ".".join(map(str, sys.version_info[:3]))
    return {"user-agent": f"ckptdiff/{library_version}; hf_hub/{hub_version}; python/{python}"}


def load_session() -> None:
    """huggingface_hub's HTTP session, created now (importing httpx2) instead of by the first request."""
    from huggingface_hub.utils import get_session  # type: ignore[attr-defined]  # public, in a lazy facade

    get_session()


class BodyInterrupted(Exception):
    """A transport error while reading a response body (kept apart from huggingface_hub's request retries)."""


def get_range(
    url: str,
    start: int,
    stop: int,
    source: str,
    *,
    headers: dict[str, str],
    timeout: float,
    needed: Callable[[bytes | bytearray], int | None] | None = None,
    ranged: bool = True,
) -> bytes:
    """Bytes [start, stop) of a remote file (fewer at its end). A server that ignores Range and sends the
    whole body is read only as far as needed, then the connection is dropped. ``ranged=False``: a plain GET
    from byte 0, read up to ``stop`` (a small file fetched whole: ``stop`` is its listed size + 1, so the time
    allowed scales with the file). Every attempt, wait and body together end by one deadline per call."""
    headers = {**headers, "Accept-Encoding": "identity"}
    if ranged:
        headers["Range"] = f"bytes={start}-{stop - 1}"
    elif start != 0:
        raise ValueError("a plain GET starts at byte 0")
    deadline = time.monotonic() + (MAX_RETRIES + 1) * timeout + (stop - start) / MIN_BODY_RATE
    for attempt in range(MAX_RETRIES + 1):
        try:
            with open_get(url, source, headers=headers, timeout=timeout, deadline=deadline) as resp:
                body_deadline = min(deadline, time.monotonic() + timeout + (stop - start) / MIN_BODY_RATE)
                return read_body(resp, start, stop, source, needed, deadline=body_deadline)
        except BodyInterrupted as interrupted:
            if attempt == MAX_RETRIES or time.monotonic() > deadline:
                raise interrupted.__cause__ or interrupted from None
    raise AssertionError("unreachable")


@contextmanager
def open_get(
    url: str,
    source: str,
    *,
    headers: dict[str, str],
    timeout: float,
    deadline: float,
    params: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """A streamed GET through huggingface_hub's session, its 408/429/5xx retried here with waits that have a
    cap (Retry-After up to MAX_RETRY_AFTER, never past ``deadline``); an error status is raised as
    huggingface_hub's error class, from at most MAX_ERROR_BODY bytes of its body."""
    for attempt in range(MAX_RETRIES + 1):
        with _stream_backoff()(
            "GET", url, headers=headers, params=params, timeout=timeout, **retry_policy()
        ) as response:
            status = response.status_code
            if status in RETRY_STATUSES and attempt < MAX_RETRIES:
                wait = _wait_before_retry(response, attempt, source)
                if time.monotonic() + wait <= deadline:
                    response.close()
                    time.sleep(wait)
                    continue
            if status >= 400:
                raise_for_status(response)
            yield response
            return


@cache  # looked up once: each lookup through huggingface_hub.utils' lazy facade takes ~40 µs, a run makes ~200
def _stream_backoff() -> Callable[..., Any]:
    from huggingface_hub.utils import http_stream_backoff  # type: ignore[attr-defined]  # public, in a lazy facade

    return http_stream_backoff


def _wait_before_retry(response: Any, attempt: int, source: str) -> float:
    """Seconds to wait before retrying: the server's Retry-After (refused above the cap) or a backoff."""
    retry_after = response.headers.get("Retry-After", "").strip()
    if retry_after.isdigit():
        seconds = float(retry_after)
        if seconds > MAX_RETRY_AFTER:
            what = "rate limited" if response.status_code == 429 else f"the server answered HTTP {response.status_code}"
            raise SourceError(
                source,
                f"{what} (HTTP {response.status_code}) and asks to wait {int(seconds)} s, "
                f"more than ckptdiff waits ({MAX_RETRY_AFTER:.0f} s)",
                "retry later; a token (HF_TOKEN) raises the Hub's rate limits",
            )
        return seconds
    return min(8 * retry_base_wait(), retry_base_wait() * 2.0**attempt)


def raise_for_status(response: Any) -> None:
    """huggingface_hub's error for an error response, made from at most MAX_ERROR_BODY bytes of its body (an
    endless error body is not read to its end)."""
    import httpx2
    from huggingface_hub import hf_raise_for_status

    body = bytearray()
    try:
        for chunk in response.iter_raw():
            body += chunk
            if len(body) >= MAX_ERROR_BODY:
                break
    except (httpx2.ReadError, httpx2.RemoteProtocolError, httpx2.TimeoutException):
        pass  # the status says enough
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-encoding")}
    kept = httpx2.Response(
        response.status_code, headers=headers, content=bytes(body[:MAX_ERROR_BODY]), request=response.request
    )
    hf_raise_for_status(kept)


def retry_policy() -> dict[str, Any]:
    """huggingface_hub's retries of dropped connections only (statuses are retried by :func:`open_get`, whose
    waits have a cap); a refused connection or a timeout fails at once (the timeout already waited long enough)."""
    import httpx2

    base_wait = retry_base_wait()
    return {
        "max_retries": MAX_RETRIES,
        "base_wait_time": base_wait,
        "max_wait_time": 8 * base_wait,
        "retry_on_exceptions": (httpx2.ReadError, httpx2.RemoteProtocolError, httpx2.WriteError),
        "retry_on_status_codes": (),
    }


def retry_base_wait() -> float:
    """Seconds before the first retry (doubling after): 0.5, or ``CKPTDIFF_RETRY_WAIT`` (the tests set 0)."""
    try:
        return max(float(os.environ.get(RETRY_WAIT_VARIABLE, "")), 0.0)
    except ValueError:
        return DEFAULT_RETRY_WAIT


def read_body(
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
        raise BodyInterrupted(str(err)) from err
    return bytes(data[:limit])


def stream_range(
    url: str,
    start: int,
    stop: int,
    source: str,
    *,
    headers: dict[str, str],
    timeout: float,
    chunk_size: int,
) -> Iterator[bytes]:
    """Bytes [start, stop) of a remote file as one ranged GET, handed on in pieces of at most ``chunk_size`` as
    they arrive (bounded memory for a gigabyte tensor). A body broken off is resumed from the byte it reached
    (up to MAX_RETRIES times); a server that ignores Range is read from byte 0, the bytes before ``start``
    dropped, and left at ``stop``. Fewer bytes than asked (the file is shorter) is an error: a tensor read needs
    them all. Every attempt, wait and body together end by one deadline, which scales with the range."""
    import httpx2

    position, failures = start, 0
    deadline = time.monotonic() + (MAX_RETRIES + 1) * timeout + (stop - start) / MIN_BODY_RATE
    while position < stop:
        asked = {**headers, "Accept-Encoding": "identity", "Range": f"bytes={position}-{stop - 1}"}
        pending = bytearray()
        interrupted: Exception | None = None
        with open_get(url, source, headers=asked, timeout=timeout, deadline=deadline) as response:
            skip = _body_skip(response, position, source)
            pieces = response.iter_raw()
            while position + len(pending) < stop:
                try:  # caught here: an error thrown into open_get's retrying context would be retried there
                    piece = next(pieces, None)
                except (httpx2.ReadError, httpx2.RemoteProtocolError) as err:
                    interrupted = err
                    break
                if piece is None:
                    break
                if time.monotonic() > deadline:
                    raise SourceError(
                        source,
                        f"timed out: {position - start} of {stop - start} bytes arrived, slower than "
                        f"{MIN_BODY_RATE // 1024} kB/s",
                        "check the network, then retry",
                    )
                if skip:
                    dropped = min(skip, len(piece))
                    piece, skip = piece[dropped:], skip - dropped
                pending += piece[: stop - position - len(pending)]
                while len(pending) >= chunk_size:
                    out = bytes(pending[:chunk_size])
                    del pending[:chunk_size]
                    position += len(out)
                    yield out
            # a 200 that ignored Range goes on past the tensor: leaving here drops the connection
        if pending:
            position += len(pending)
            yield bytes(pending)
        if position >= stop:
            return
        if interrupted is None:
            raise SourceError(source, f"the server sent {position - start} of the {stop - start} bytes asked for")
        failures += 1
        if failures > MAX_RETRIES or time.monotonic() > deadline:
            raise interrupted


def _body_skip(response: Any, start: int, source: str) -> int:
    """Bytes of the body before ``start``: none in a 206 (its Content-Range checked), ``start`` in a 200."""
    if response.status_code == 206:
        content_range = response.headers.get("Content-Range", "")
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
        if match is None or int(match.group(1)) != start:
            raise SourceError(source, f"the server answered bytes {start}- with Content-Range {content_range!r}")
        return 0
    if response.status_code == 200:
        return start
    raise SourceError(source, f"unexpected HTTP {response.status_code} to a ranged GET")
