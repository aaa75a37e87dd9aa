"""A Hub repo's calls sent before the CLI loads: its listing, then, the moment that answers, its first reads.

The ``ckptdiff`` command calls :func:`send_early` for A and B before importing click and the comparison. The
listing call leaves on a thread of its own; when it answers, the reads a full read of the checkpoint starts from
the listing alone (:func:`ckptdiff.sources.planner.first_reads`: config.json, the index, each shard's first
range) leave on a pool of ``options.jobs`` threads, through the same HubSource code the run uses. The run's
HubSource takes each answer, or the very error it raised (:mod:`.early_answers`), so requests, cache writes and
messages are those of a run that made the calls itself; they are only sent sooner.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from . import early_answers

if TYPE_CHECKING:
    from . import HubSpec, SourceOptions
    from .base import ListedFile
    from .hub import HubSource

#: The longest :func:`send_early` waits for the listing call to reach the network.
EARLY_START_WAIT = 5.0


def send_early(spec: str, options: SourceOptions) -> bool:
    """Send a Hub spec's listing call now, and its first reads once it answers; whether a call was sent.

    Returns once the listing call is on the network (its connection or request started), so that the caller's
    next imports overlap the round trip (then :func:`ready_for_answers`). Nothing is sent for a spec that is not
    a Hub repo, offline, or a commit whose listing is cached, nor for a repo and revision already sent for.
    """
    from . import HubSpec, parse_spec

    parsed = parse_spec(spec)
    if not isinstance(parsed, HubSpec):
        return False
    from huggingface_hub import constants

    from ..version import __version__
    from .hub_http import request_headers
    from .hub_listing import ListingCall

    if options.offline or constants.is_offline_mode():
        return False
    call = ListingCall.of(parsed.repo_id, parsed.revision)
    if call.pinned and not _source(spec, parsed, options).listing_call_needed():
        return False
    listing = early_answers.register(call.key)
    if listing is None:
        return False
    headers = request_headers(__version__)  # as a HubSource's
    reads = early_answers.pool(options.jobs)
    under_way = threading.Event()

    def send() -> None:
        try:
            commit, entries = call.send(headers, trace=lambda event, info: under_way.set())
            source = _source(spec, parsed, options)
            answer = source.listing_answer(commit, entries)
        except BaseException as err:  # noqa: BLE001 - handed to the HubSource that takes the answer
            listing.set_exception(err)
            return
        finally:
            under_way.set()
        try:
            _send_first_reads(source, answer, reads)
        finally:
            listing.set_result(answer)  # after the reads are registered: the run finds every one of them

    early_answers.start("ckptdiff-listing", send)
    under_way.wait(EARLY_START_WAIT)
    return True


def ready_for_answers() -> None:
    """Once every listing call is on the network: load what reading their answers takes, so that it does not
    wait for the answers (nor delay another repo's call)."""
    from . import hub, planner  # noqa: F401


def _source(spec: str, parsed: HubSpec, options: SourceOptions) -> HubSource:
    from .hub import HubSource

    return HubSource(spec, parsed, options)


def _send_first_reads(source: HubSource, answer: tuple[Any, list[ListedFile]], reads: early_answers.Pool) -> None:
    """Register, then send, the reads the run's planner will ask ``source`` for first; none when the run will
    refuse the listing or the checkpoint before reading (it reports that itself)."""
    from .planner import first_reads

    try:
        source.commit = source.checked_commit(*answer)
        planned = first_reads(source.listing_of(answer[1]), source)
    except Exception:  # noqa: BLE001 - the run raises it in its turn
        return
    for file, what, error in planned.whole:
        key = source.read_key("whole", file.path, what, error)
        _send(reads, key, partial(source.read_small_now, file, what=what, error=error))
    for file, first_range in planned.headers:
        key = source.read_key("header", file.path, first_range)
        _send(reads, key, partial(source.read_header_now, file, first_range))


def _send(reads: early_answers.Pool, key: Hashable, call: partial[Any]) -> None:
    future: Future[Any] | None = early_answers.register(key)
    if future is not None:
        reads.submit(future, call)
