"""Copies and header rewrites of the tests' sparse safetensors files that keep their holes.

The Kimi-K2-layout fixtures are ~100 MB to several GB of zeros on paper and a few kB on disk. ``shutil.copy`` or a
read-modify-write of such a file stores every zero: gigabytes of disk a test, and as much memory for the read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

CHUNK = 1 << 20


def copy_sparse(source: Path, target: Path) -> None:
    """``target`` holds ``source``'s bytes, with holes where it has them."""
    _rewrite(source, target, lambda header: header)


def rewrite_header_json(path: Path, change: Callable[[bytes], bytes]) -> None:
    """Replace a safetensors file's header JSON by ``change(json)``, keeping its data region and its holes."""
    scratch = path.with_name(path.name + ".rewritten")
    _rewrite(path, scratch, change)
    os.replace(scratch, path)


def _rewrite(source: Path, target: Path, change: Callable[[bytes], bytes]) -> None:
    with open(source, "rb") as old, open(target, "wb") as new:
        length = int.from_bytes(old.read(8), "little")
        text = change(old.read(length))
        new.write(len(text).to_bytes(8, "little") + text)
        start, size = 8 + length, os.fstat(old.fileno()).st_size
        shift = 8 + len(text) - start
        offset = start
        while offset < size:
            try:
                data = max(offset, os.lseek(old.fileno(), offset, os.SEEK_DATA))
            except OSError:  # ENXIO: nothing but a hole from here to the end
                break
            hole = os.lseek(old.fileno(), data, os.SEEK_HOLE)
            old.seek(data)
            new.seek(data + shift)
            while data < hole:
                chunk = old.read(min(CHUNK, hole - data))
                new.write(chunk)
                data += len(chunk)
            offset = hole
        new.truncate(size + shift)
