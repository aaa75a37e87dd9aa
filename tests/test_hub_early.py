"""The Hub calls the ``ckptdiff`` command sends before its CLI loads (ckptdiff/sources/hub_early.py): each repo's
listing call, then, as soon as it answers, config.json, the index and every shard's first range. The run takes
those answers: every request is made once, none that a run without early calls would not make, and a Hub that
fails gives the same one line and exit code.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, cli_env, run_in_process
from hub_emulator import HubEmulator, Request

from ckptdiff.sources import SourceOptions, early_answers, resolve_both
from ckptdiff.sources.hub_early import send_early
from fixtures.generate import write_kimi_k2_base

LAYERS = 6
#: What a comparison of two such repos asks the Hub, a side: the listing, config.json, the index, each shard.
REQUESTS_A_SIDE = 1 + 1 + 1 + LAYERS


@pytest.fixture
def two_repos(hub: HubEmulator, tmp_path: Path) -> tuple[str, str]:
    """Two sharded Kimi-K2-layout repos, one shard a layer."""
    hub.add_repo("org/a", write_kimi_k2_base(tmp_path / "a", layers=LAYERS, experts=2))
    hub.add_repo("org/b", write_kimi_k2_base(tmp_path / "b", layers=LAYERS, experts=2, metadata={"format": "x"}))
    return "org/a", "org/b"


def requests(hub: HubEmulator) -> Counter[tuple[str, str | None]]:
    """What the Hub was asked: each (path, Range) and how many times."""
    return Counter((entry.path, entry.range) for entry in hub.log)


def command(hub: HubEmulator, home: Path, *args: str, early: bool = True, **env: str):
    """``ckptdiff args`` in this process against the emulator, through the command's entry (``early``) or the
    CLI alone, with HF home ``home``."""
    environment = cli_env(home, {**hub.client_env(home / "hf-home"), "HF_HUB_DOWNLOAD_TIMEOUT": "5", **env})
    return run_in_process(list(args), environment, REPO, early=early)


def test_the_command_asks_for_each_thing_once_and_only_what_the_run_reads(hub, two_repos, tmp_path):
    with_early = command(hub, tmp_path / "early", *two_repos, "--format", "json")
    asked_early = requests(hub)
    hub.reset_counters()
    without = command(hub, tmp_path / "cli-alone", *two_repos, "--format", "json", early=False)

    assert with_early.returncode == without.returncode == 0, with_early.stderr
    assert json.loads(with_early.stdout) == json.loads(without.stdout)
    assert asked_early == requests(hub)
    assert set(asked_early.values()) == {1}
    assert sum(asked_early.values()) == 2 * REQUESTS_A_SIDE


def test_the_run_takes_every_answer_sent_early(hub_client, two_repos, tmp_path, monkeypatch):
    from huggingface_hub import constants

    options = SourceOptions()
    try:
        assert [send_early(spec, options) for spec in two_repos] == [True, True]
        deadline = time.monotonic() + 30
        while not (len(hub_client.log) == 2 * REQUESTS_A_SIDE and all(e.finished for e in hub_client.log)):
            assert time.monotonic() < deadline, requests(hub_client)
            time.sleep(0.01)
        hub_client.hooks.append(lambda request: request.respond(503) or True)  # the Hub is down from here on
        monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "another-home"))  # and nothing is cached

        side_a, side_b = resolve_both(*two_repos, options)
    finally:
        early_answers.finish()

    assert hub_client.total_requests == 2 * REQUESTS_A_SIDE  # the run asked nothing itself
    hub_client.hooks.clear()
    assert (side_a, side_b) == resolve_both(*two_repos, options)  # what a run reading on its own reads


def test_reads_in_flight_stay_within_jobs(hub, two_repos, tmp_path):
    result = command(hub, tmp_path, *two_repos, "--jobs", "3")

    assert result.returncode == 0, result.stderr
    assert hub.max_in_flight["resolve"] <= 3  # config.json and the indexes among them
    assert hub.total_requests == 2 * REQUESTS_A_SIDE


def test_nothing_is_sent_early_offline_or_for_a_local_side(hub, two_repos, tmp_path):
    local = str(write_kimi_k2_base(tmp_path / "local", layers=LAYERS, experts=2))

    assert command(hub, tmp_path, two_repos[0], local, "--offline").returncode == 2
    assert hub.total_requests == 0
    assert command(hub, tmp_path, two_repos[0], local).returncode == 0
    assert hub.total_requests == REQUESTS_A_SIDE and set(requests(hub).values()) == {1}


def answer_shard(number: int, status: int, headers: dict[str, str] | None = None):
    """A hook answering every GET of the repo ``org/b``'s shard ``number`` with ``status``."""

    def hook(request: Request) -> bool:
        if not request.path.startswith("/org/b/resolve/") or f"-{number:05d}-of-" not in request.path:
            return False
        request.respond(status, b"", headers or {})
        return True

    return hook


VANISHED = {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"}


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("a shard vanished", "entry not found"),
        ("a shard keeps failing", "HTTP 500"),
        ("a gated repo", "gated repo"),
        ("a revision that does not exist", "revision"),
        ("a repo that does not exist", "org/missing"),
    ],
)
def test_a_failing_hub_gives_the_same_line_and_requests_with_or_without_early_calls(
    hub, two_repos, tmp_path, setup, fragment
):
    a, b = two_repos
    if setup == "a shard vanished":
        hub.hooks.append(answer_shard(3, 404, VANISHED))
    elif setup == "a shard keeps failing":
        hub.hooks.append(answer_shard(3, 500))
    elif setup == "a gated repo":
        hub.repos[b].gated = True
    elif setup == "a revision that does not exist":
        b = f"{b}@no-such-branch"
    else:
        b = "org/missing"

    with_early = command(hub, tmp_path / "early", a, b)
    asked_early = requests(hub)
    hub.reset_counters()
    without = command(hub, tmp_path / "cli-alone", a, b, early=False)
    asked_without = requests(hub)

    assert with_early.returncode == without.returncode == 2
    assert with_early.stderr == without.stderr and len(with_early.stderr.splitlines()) == 1
    assert fragment in with_early.stderr and "Traceback" not in with_early.stderr
    # Which shard reads leave before a failure stops the rest is a race in either mode; what holds is that only
    # the failing read is asked again (the client's retries, as many in either mode), and nothing is asked that a
    # comparison of these repos would not ask.
    assert +(asked_early - Counter(set(asked_early))) == +(asked_without - Counter(set(asked_without)))
    hub.hooks.clear()
    hub.repos[two_repos[1]].gated = False
    hub.reset_counters()
    assert command(hub, tmp_path / "clean", *two_repos).returncode == 0
    listings = {(path, None) for path, _ in asked_early | asked_without if path.startswith("/api/models/")}
    assert set(asked_early) | set(asked_without) <= set(requests(hub)) | listings
