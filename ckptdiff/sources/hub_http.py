"""The Hub's ranged-GET protocol: huggingface_hub's session and retries, Content-Range checks, slow-body limits."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

from ..errors import SourceError

#: Retries for one request: status 408/429/5xx (honouring Retry-After) and dropped connections. A timeout or a
#: refused connection is reported at once.
MAX_RETRIES = 3
#: Seconds before the first retry; the environment variable overrides it (tests: 0, no waits).
DEFAULT_RETRY_WAIT = 0.5
RETRY_WAIT_VARIABLE = "CKPTDIFF_RETRY_WAIT"
#: A body slower than this on average, past the timeout's grace, counts as a timeout (a trickling server).
MIN_BODY_RATE = 16 * 1024


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
    from byte 0, read up to ``stop`` (a small file fetched whole)."""
    from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

    headers = {**headers, "Accept-Encoding": "identity"}
    if ranged:
        headers["Range"] = f"bytes={start}-{stop - 1}"
    elif start != 0:
        raise ValueError("a plain GET starts at byte 0")
    for attempt in range(MAX_RETRIES + 1):
        try:
            with http_stream_backoff("GET", url, headers=headers, timeout=timeout, **retry_policy()) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    hf_raise_for_status(resp)
                deadline = time.monotonic() + timeout + (stop - start) / MIN_BODY_RATE
                return read_body(resp, start, stop, source, needed, deadline=deadline)
        except BodyInterrupted as interrupted:
            if attempt == MAX_RETRIES:
                raise interrupted.__cause__ or interrupted from None
    raise AssertionError("unreachable")


def retry_policy() -> dict[str, Any]:
    """huggingface_hub's backoff (408/429/5xx, honouring Retry-After) and retries of dropped connections; a refused
    connection or a timeout fails at once (the timeout already waited long enough)."""
    import httpx2

    base_wait = retry_base_wait()
    return {
        "max_retries": MAX_RETRIES,
        "base_wait_time": base_wait,
        "max_wait_time": 8 * base_wait,
        "retry_on_exceptions": (httpx2.ReadError, httpx2.RemoteProtocolError, httpx2.WriteError),
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
