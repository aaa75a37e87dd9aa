"""Where a checkpoint comes from: a spec string → a Checkpoint.

A spec is a local path (file or folder) or a Hub repo ``org/name[@revision]``. A spec that exists on disk is
a path; ``./x``, ``/x`` and ``~/x`` are always paths.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from ..checkpoint import Checkpoint
from ..errors import SourceError

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class LocalSpec:
    path: Path


@dataclass(frozen=True)
class HubSpec:
    repo_id: str
    revision: str | None  # None: the repo's default branch


@dataclass(frozen=True)
class SourceOptions:
    """How sources may fetch: shared by both sides and the base model."""

    offline: bool = False
    jobs: int = 8
    progress: bool = False


def parse_spec(spec: str) -> LocalSpec | HubSpec:
    try:
        expanded = Path(spec).expanduser()
    except RuntimeError:  # ~user for a user that does not exist
        raise SourceError(spec, "no such file or folder (its ~user has no home directory)") from None
    if spec.startswith(("./", "../", "/", "~", ".\\")) or spec in (".", "..") or expanded.exists():
        return LocalSpec(expanded)
    repo, _, revision = spec.partition("@")
    if _REPO_ID.match(repo) and (not _ or revision):
        return HubSpec(repo, revision or None)
    raise SourceError(spec, "no such file or folder, and not a Hub repo id (org/name[@revision])")


def resolve(spec: str, options: SourceOptions | None = None, *, wanted: AbstractSet[str] | None = None) -> Checkpoint:
    """Read a checkpoint's metadata. With ``wanted``, a sharded checkpoint reads only the shards holding them."""
    options = options or SourceOptions()
    parsed = parse_spec(spec)
    if isinstance(parsed, LocalSpec):
        from .local import read_local

        return read_local(spec, parsed.path, wanted=wanted)
    from .hub import read_hub

    return read_hub(spec, parsed, options, wanted=wanted)


def resolve_both(a: str, b: str, options: SourceOptions | None = None) -> tuple[Checkpoint, Checkpoint]:
    """Read both sides of a comparison; Hub sides are fetched at the same time (their waits overlap).

    If both fail, side A's error is the one raised.
    """
    if not (_is_hub(a) or _is_hub(b)):
        return resolve(a, options), resolve(b, options)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ckptdiff-side") as pool:
        side_a, side_b = pool.submit(resolve, a, options), pool.submit(resolve, b, options)
        return side_a.result(), side_b.result()


def _is_hub(spec: str) -> bool:
    try:
        return isinstance(parse_spec(spec), HubSpec)
    except SourceError:
        return False  # resolve() raises it in its turn
