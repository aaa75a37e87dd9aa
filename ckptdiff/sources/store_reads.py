"""Bounded ranged reads from object stores: at most the bytes asked for, whatever the server sends, within a deadline.

fsspec's own ``cat_file`` reads a response body whole: a web server or S3 endpoint that ignores Range sends the
whole object (gigabytes), and a 206 with an endless body never ends. Here the body is streamed through the same
session fsspec made (aiohttp for ``http(s)://``, aiobotocore for ``s3://``, so credentials and endpoints are
fsspec's), read only up to the range, and dropped: a 200 that ignored Range costs at most ``stop`` bytes, a 206
at most ``stop - start``. Each read also has a deadline that grows with the bytes expected (a minimum rate), so
a server trickling bytes cannot hold a run for hours. :func:`bounded_copy` is the same read with the body written
to a file as it arrives (for --values' copies), so a copy holds at most one body chunk per read in memory.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import SourceError
from ..limits import MIN_BODY_RATE
from .file_copy import pwrite_to_copy

#: Bytes per read from a response body.
READ_CHUNK = 1024 * 1024
#: Seconds allowed for the first byte of a read and any pause in between.
READ_TIMEOUT = 30.0


def deadline_for(expected: int) -> float:
    """When a read of ``expected`` bytes must be done (time.monotonic): the grace plus a minimum rate."""
    return time.monotonic() + READ_TIMEOUT + max(0, expected) / MIN_BODY_RATE


#: Where a read puts the body's bytes as they arrive: a buffer's extend, or a write into a file.
Keep = Callable[[bytes], None]


def bounded_read(fs: Any, scheme: str, path: str, start: int, stop: int, *, where: str, expected: int) -> bytes:
    """Bytes [start, stop) of an object (fewer at its end); ``expected`` is how many the file can give (the
    deadline's size). Stores without a streaming reader here (gs://, az://) use fsspec's and are checked after."""
    data = bytearray()
    _bounded(fs, scheme, path, start, stop, where, expected, data.extend)
    return bytes(data)


def bounded_copy(fs: Any, scheme: str, path: str, start: int, stop: int, *, where: str, expected: int, out: int) -> int:
    """Bytes [start, stop) of an object written at the same offsets into the open file descriptor ``out``, each
    body chunk as it arrives; how many were written (fewer at the object's end, or if the store sent fewer)."""
    position = start

    def write(chunk: bytes) -> None:
        nonlocal position
        view = memoryview(chunk)
        while view:
            written = pwrite_to_copy(out, view, position)
            view, position = view[written:], position + written

    _bounded(fs, scheme, path, start, stop, where, expected, write)
    return position - start


def _bounded(fs: Any, scheme: str, path: str, start: int, stop: int, where: str, expected: int, keep: Keep) -> None:
    if stop <= start:
        return
    deadline = deadline_for(expected)
    if scheme in ("http", "https"):
        from fsspec.asyn import sync

        sync(fs.loop, _http_read, fs, path, start, stop, where, deadline, keep)
        return
    if scheme == "s3":
        from fsspec.asyn import sync

        sync(fs.loop, _s3_read, fs, path, start, stop, where, deadline, keep)
        return
    data = fs.cat_file(path, start=start, end=stop)
    if len(data) > stop - start:
        raise SourceError(where, f"the store sent {len(data)} bytes for a range of {stop - start}")
    keep(bytes(data))


async def _http_read(fs: Any, url: str, start: int, stop: int, where: str, deadline: float, keep: Keep) -> None:
    session = await fs.set_session()
    options = fs.kwargs.copy()
    headers = {**(options.pop("headers", None) or {}), "Range": f"bytes={start}-{stop - 1}"}
    headers["Accept-Encoding"] = "identity"  # a ranged read of compressed bytes is not the file's bytes
    async with session.get(fs.encode_url(url), headers=headers, **options) as response:
        fs._raise_not_found_for_status(response, url)
        skip = _skip(response.status, response.headers.get("Content-Range", ""), start, where)
        await _read_capped(response.content.read, skip, stop - start, where, deadline, keep)


async def _s3_read(fs: Any, path: str, start: int, stop: int, where: str, deadline: float, keep: Keep) -> None:
    bucket, key, version = fs.split_path(path)
    extra = {"VersionId": version} if version else {}
    response = await asyncio.wait_for(
        fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{stop - 1}", **extra),
        timeout=max(0.1, deadline - time.monotonic()),
    )
    body = response["Body"]
    try:
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 200)
        skip = _skip(status, response.get("ContentRange", ""), start, where)
        await _read_capped(body.read, skip, stop - start, where, deadline, keep)
    finally:
        body.close()


def _skip(status: int, content_range: str, start: int, where: str) -> int:
    """How many leading bytes of the body come before ``start``: none in a 206, ``start`` in a 200 (Range
    ignored: the whole object from byte 0)."""
    if status == 206:
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
        if match is None or int(match.group(1)) != start:
            raise SourceError(where, f"the server answered bytes {start}- with Content-Range {content_range!r}")
        return 0
    if status == 200:
        return start
    raise SourceError(where, f"unexpected HTTP {status} to a ranged GET")


async def _read_capped(
    read: Callable[[int], Awaitable[bytes]], skip: int, want: int, where: str, deadline: float, keep: Keep
) -> None:
    """Read ``skip`` bytes to drop, then at most ``want`` bytes into ``keep``; stop at the deadline."""
    got = 0
    while got < want:
        remaining = deadline - time.monotonic()
        asked = min(READ_CHUNK, skip or (want - got))
        try:
            if remaining <= 0:
                raise asyncio.TimeoutError
            chunk = await asyncio.wait_for(read(asked), timeout=min(remaining, READ_TIMEOUT))
        except asyncio.TimeoutError:
            slow = time.monotonic() >= deadline
            defect = (
                f"timed out: the server sent {got} of {want} bytes, slower than {MIN_BODY_RATE // 1024} kB/s"
                if slow
                else f"timed out: no bytes for {READ_TIMEOUT:.0f} s after {got} of {want}"
            )
            raise SourceError(where, defect, "check the network, then retry") from None
        if not chunk:
            break
        if skip:
            dropped = min(skip, len(chunk))
            chunk, skip = chunk[dropped:], skip - dropped
        chunk = chunk[: want - got]
        if chunk:
            keep(chunk)
            got += len(chunk)
