"""A Hub that misbehaves: the real ``ckptdiff`` against the emulator (tests/hub_emulator.py) with faults injected.

Each fault ends in success after retries, or in exit 2 with one clear line. Only the faults that are timeouts
run with a short one: the others' requests are answered, and a loaded machine must not time them out.
Faults are emulator hooks on the ranged GET of a safetensors header (the request ckptdiff makes itself).
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hub_emulator import HubEmulator, Request

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_safetensors

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
SAME_AS_PUBLISHED = str(PUBLISHED)  # the local copy of the repo: a successful run is "compatible", exit 0


@pytest.fixture
def ckptdiff(hub: HubEmulator, run_cli, tmp_path: Path):
    """The CLI with huggingface_hub pointed at the emulator and a fresh HF cache. Its timeouts are long (60 s):
    a request the emulator answers is never timed out by a loaded machine; a test whose fault is a timeout sets
    a short one itself."""
    home = tmp_path / "hf-home"

    def run(*args: str, **env: str):
        timeouts = {"HF_HUB_DOWNLOAD_TIMEOUT": "60", "HF_HUB_ETAG_TIMEOUT": "60"}
        return run_cli(*args, env={**hub.client_env(home), **timeouts, **env}, timeout=120)

    return run


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """Set at teardown: hooks that stall wait on it, so no server thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


def on_header_get(answer: Callable[[Request], None], times: int | None = None) -> Callable[[Request], bool]:
    """A hook answering the ranged GETs of ``*.safetensors`` files with ``answer`` (the first ``times`` of them)."""
    state = {"left": times}

    def hook(request: Request) -> bool:
        if request.method != "GET" or not request.path.endswith(".safetensors") or "Range" not in request.headers:
            return False
        if state["left"] is not None:
            if state["left"] == 0:
                return False
            state["left"] -= 1
        answer(request)
        return True

    return hook


def statuses(hub: HubEmulator) -> list[int]:
    return [entry.status for entry in hub.log if entry.route == "resolve" and entry.range]


def assert_one_clear_line(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def send_partial(request: Request, status: int, headers: dict[str, str], body: bytes, *, reset: bool) -> None:
    """Send a status line, headers and ``body``; with ``reset``, abort the connection (RST) right after."""
    handler = request.handler
    request.log.status = status
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()
    handler.close_connection = True
    if reset:
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def reset_mid_body(request: Request) -> None:
    """Promise 100,000 bytes, send 1,000, then reset the connection."""
    content_range = "bytes 0-99999/" + str((PUBLISHED / "model.safetensors").stat().st_size)
    headers = {"Content-Range": content_range, "Content-Length": "100000"}
    send_partial(request, 206, headers, bytes(1000), reset=True)


# --- transient faults: retried, then success --------------------------------------------------------------


def test_500_and_503_are_retried_then_the_run_succeeds(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.fail_next(500, route="api-info")
    hub.hooks.append(on_header_get(lambda request: request.respond(503), times=2))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert result.returncode == 0, result.stderr
    assert statuses(hub) == [503, 503, 206]
    assert [entry.status for entry in hub.log if entry.route == "api-info"] == [500, 200]


def test_429_with_retry_after_is_waited_out_then_succeeds(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    arrivals: list[float] = []
    hub.hooks.append(on_header_get(lambda request: arrivals.append(time.monotonic())))  # records, answers nothing
    hub.hooks.append(on_header_get(lambda request: request.respond(429, headers={"Retry-After": "1"}), times=1))
    hub.hooks[0] = _passing(hub.hooks[0])

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert result.returncode == 0, result.stderr
    assert statuses(hub) == [429, 206]
    assert arrivals[1] - arrivals[0] >= 1.0  # the client slept for Retry-After (a lower bound: never flaky)


def _passing(hook: Callable[[Request], bool]) -> Callable[[Request], bool]:
    """A hook that observes requests and lets them through."""
    return lambda request: hook(request) and False


def test_a_connection_reset_mid_body_is_retried_then_succeeds(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(on_header_get(reset_mid_body, times=1))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert result.returncode == 0, result.stderr
    assert statuses(hub) == [206, 206]


# --- faults that do not pass: one line, exit 2 --------------------------------------------------------------


def test_a_server_that_keeps_failing_gives_up_with_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(on_header_get(lambda request: request.respond(503)))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter@", "HTTP 503")
    assert 2 <= len(statuses(hub)) <= 8  # a few retries, not a retry storm


@pytest.mark.parametrize("route", ["api-info", "header"])
def test_a_server_that_never_answers_times_out_with_one_line(hub, ckptdiff, released, route):
    hub.add_repo("org/drafter", PUBLISHED)
    if route == "api-info":
        hub.hooks.append(lambda request: request.route == "api-info" and released.wait(60))
    else:
        hub.hooks.append(on_header_get(lambda request: released.wait(60) and None))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED, HF_HUB_DOWNLOAD_TIMEOUT="1", HF_HUB_ETAG_TIMEOUT="1")

    assert_one_clear_line(result, "org/drafter", "timed out", "HF_HUB_DOWNLOAD_TIMEOUT")


def test_a_server_that_trickles_times_out_with_one_line(hub, ckptdiff, released, monkeypatch):
    """64 bytes every 0.2 s, each well within the read timeout: 100 kB would take five minutes. The floor is raised
    from 16 to 128 kB/s here (the run is in this process), so the body's deadline comes after 2.8 s, not 8."""
    from ckptdiff.sources import hub_http

    monkeypatch.setattr(hub_http, "MIN_BODY_RATE", 128 * 1024)
    hub.add_repo("org/drafter", PUBLISHED)
    size = (PUBLISHED / "model.safetensors").stat().st_size

    def trickle(request: Request) -> None:
        handler = request.handler
        handler.send_response(206)
        handler.send_header("Content-Range", f"bytes 0-99999/{size}")
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        handler.close_connection = True
        try:
            while not released.wait(0.2):
                handler.wfile.write(bytes(64))
                handler.wfile.flush()
        except OSError:  # the client hung up
            pass

    hub.hooks.append(on_header_get(trickle))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED, HF_HUB_DOWNLOAD_TIMEOUT="2")  # the deadline grows with it

    assert_one_clear_line(result, "org/drafter@", "timed out")


def test_a_connection_reset_every_time_gives_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(on_header_get(reset_mid_body))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter@", "broke off mid-transfer")
    assert 2 <= len(statuses(hub)) <= 8


def test_a_server_ignoring_range_on_a_4_gib_file_sends_only_a_sliver(hub, ckptdiff, tmp_path):
    repo = tmp_path / "big"
    size = write_safetensors(repo / "model.safetensors", [("w", "BF16", [32768, 65536])])  # 4 GiB, sparse
    hub.add_repo("org/big", repo)
    hub.ignore_range = True

    result = ckptdiff("org/big", str(repo))
    hub.stop()  # let the server notice the dropped connection before counting

    assert result.returncode == 0, result.stderr
    assert size == 4 * 2**30 + 8 + 80
    sent = hub.bytes_sent["resolve"]
    assert sent < 64 * 2**20, sent  # a few socket buffers, not 4 GiB


def test_a_server_ignoring_range_on_a_file_claiming_a_huge_header_sends_only_a_sliver(hub, ckptdiff, tmp_path):
    repo = tmp_path / "hostile"
    repo.mkdir()
    with open(repo / "model.safetensors", "wb") as out:
        out.write((2**64 - 1).to_bytes(8, "little") + b"{")
        out.truncate(2**30)  # 1 GiB, sparse
    hub.add_repo("org/hostile", repo)
    hub.ignore_range = True

    result = ckptdiff("org/hostile", SAME_AS_PUBLISHED)
    hub.stop()

    assert_one_clear_line(result, "org/hostile@", "model.safetensors", "exceeds the 100000000-byte limit")
    assert hub.bytes_sent["resolve"] < 64 * 2**20, hub.bytes_sent["resolve"]


def test_a_server_sending_less_than_the_header_gives_one_line(hub, ckptdiff):
    """Every answer is an honest 206 of at most 100 bytes: the header never arrives whole."""
    hub.add_repo("org/drafter", PUBLISHED)
    blob = (PUBLISHED / "model.safetensors").read_bytes()

    def short(request: Request) -> None:
        start = int(request.headers["Range"].split("=")[1].split("-")[0])
        body = blob[start : start + 100]
        headers = {"Content-Range": f"bytes {start}-{start + len(body) - 1}/{len(blob)}"}
        request.respond(206, body, headers)

    hub.hooks.append(on_header_get(short))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter@", "model.safetensors", "truncated")


def test_a_body_cut_short_of_its_content_length_gives_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    size = (PUBLISHED / "model.safetensors").stat().st_size
    headers = {"Content-Range": f"bytes 0-99999/{size}", "Content-Length": "100000"}
    hub.hooks.append(on_header_get(lambda request: send_partial(request, 206, headers, bytes(500), reset=False)))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter@", "broke off mid-transfer")


def test_a_content_range_contradicting_the_request_gives_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    size = (PUBLISHED / "model.safetensors").stat().st_size
    wrong = {"Content-Range": f"bytes 4096-8191/{size}"}
    hub.hooks.append(on_header_get(lambda request: request.respond(206, bytes(4096), wrong)))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "model.safetensors", "Content-Range", "bytes 4096-8191")


def test_a_redirect_loop_gives_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(on_header_get(lambda request: request.respond(302, headers={"Location": request.path})))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter@", "redirect")
    assert len(statuses(hub)) <= 50


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_redirect_to_a_host_that_cannot_be_reached_names_that_host(hub, ckptdiff):
    """The Hub answers and sends the download elsewhere (its CDN), which a firewall blocks: the line named the
    Hub as unreachable, sending the user to check a host that works. Only the place is shown, never the path
    (a signed CDN URL's path holds its signature)."""
    hub.add_repo("org/drafter", PUBLISHED)
    cdn = f"http://127.0.0.1:{closed_port()}"
    location = f"{cdn}/repos/model.safetensors?X-Amz-Signature=CanarySignature123"
    hub.hooks.append(on_header_get(lambda request: request.respond(302, headers={"Location": location})))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    line = assert_one_clear_line(result, f"cannot reach {cdn}, where {hub.endpoint} redirected the download")
    assert "firewall" in line and "CanarySignature123" not in line and "/repos/" not in line


def test_a_redirect_to_a_file_url_says_so(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(on_header_get(lambda request: request.respond(302, headers={"Location": "file:///etc/passwd"})))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, f"{hub.endpoint} redirected to a URL ckptdiff does not follow (file:)")


@pytest.mark.parametrize(
    ("setup", "token", "fragments"),
    [
        ("gated", None, ["org/drafter@", "gated repo", "HF_TOKEN"]),
        ("gated-no-access", "hf_validButNotGranted000111", ["org/drafter@", "gated repo"]),
        ("private", None, ["org/drafter", "repo not found", "HF_TOKEN"]),
        ("forbidden-file", None, ["org/drafter@", "HTTP 403", "HF_TOKEN"]),
    ],
)
def test_401_and_403_give_one_line_with_what_to_do(hub, ckptdiff, setup, token, fragments):
    hub.add_repo("org/drafter", PUBLISHED, gated=setup.startswith("gated"), private=setup == "private")
    if token:
        hub.valid_tokens.add(token)
        hub.repos["org/drafter"].access = {"hf_someoneElse"}
    if setup == "forbidden-file":
        hub.hooks.append(on_header_get(lambda request: request.respond(403)))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED, **({"HF_TOKEN": token} if token else {}))

    assert_one_clear_line(result, *fragments)


def test_a_listed_file_that_vanished_gives_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    headers = {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"}
    hub.hooks.append(on_header_get(lambda request: request.respond(404, b"", headers)))

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter@", "entry not found")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_hub_stalls_is_one_line_and_exit_128_plus_it(hub, tmp_path, released, stop):
    """The run is cancelled, not killed: the stalled listing call ends by its timeout, then the process exits
    with the one line. The timeout (6 s) is what the child has to take the signal in: on a loaded machine a
    shorter one could end the listing first, and the run with a timeout's line instead."""
    import os
    import subprocess
    import sys

    hub.add_repo("org/drafter", PUBLISHED)
    arrived = threading.Event()
    hub.hooks.append(lambda request: request.route == "api-info" and (arrived.set() or released.wait(60)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(hub.client_env(tmp_path / "hf-home"), HF_HUB_DOWNLOAD_TIMEOUT="6")
    child = subprocess.Popen(
        [sys.executable, "-m", "ckptdiff", "org/drafter", SAME_AS_PUBLISHED],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert arrived.wait(120)
        child.send_signal(stop)
        stdout, stderr = child.communicate(timeout=120)
    finally:
        child.kill()
    assert (child.returncode, stdout, stderr) == (128 + stop, "", "ckptdiff: interrupted\n")


# --- a server whose answers are well-formed HTTP but nonsense ---------------------------------------------------


@pytest.mark.parametrize(
    ("siblings", "fragment"),
    [
        ([{"rfilename": "model.safetensors", "size": "big"}], "entry: 'model.safetensors' has size 'big', not a"),
        ([{"rfilename": "model.safetensors", "size": -5}], "entry: 'model.safetensors' has size -5, not a byte count"),
        # a fraction and a boolean were shown as ckptdiff's own "ListedFile(path=..., size=1.5, sha256=None)"
        ([{"rfilename": "model.safetensors", "size": 1.5}], "entry: 'model.safetensors' has size 1.5, not a byte"),
        ([{"rfilename": "model.safetensors", "size": True}], "entry: 'model.safetensors' has size True, not a byte"),
        ([{"rfilename": None}], "malformed file entry: a file named None"),
        ("model.safetensors", "sent a model info it cannot read"),
        ([{}], "sent a model info it cannot read"),
        ([{"rfilename": "model.safetensors", "lfs": "yes"}], "sent a model info it cannot read"),
    ],
    ids=[
        "size-not-a-number",
        "size-negative",
        "size-a-fraction",
        "size-a-boolean",
        "no-file-name",
        "siblings-a-string",
        "entry-empty",
        "lfs-a-string",
    ],
)
def test_a_malformed_listing_gives_one_line(hub, ckptdiff, siblings, fragment):
    hub.add_repo("org/drafter", PUBLISHED)
    listing = {"id": "org/drafter", "sha": hub.repos["org/drafter"].refs["main"], "siblings": siblings}

    def answer(request: Request) -> bool:
        if request.route != "api-info":
            return False
        request.respond(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
        return True

    hub.hooks.append(answer)

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter", fragment)


def test_a_listing_that_is_not_json_gives_one_line(hub, ckptdiff):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(lambda request: request.route == "api-info" and request.respond(200, b"<html>") is None)

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter", "sent a model info it cannot read")


def test_an_endless_listing_stops_at_the_cap_with_one_line(hub, ckptdiff, released):
    """The listing call answers a JSON body that never ends (chunked): read up to 100 MB, then refused."""
    hub.add_repo("org/drafter", PUBLISHED)
    sent = []

    def endless(request: Request) -> bool:
        if request.route != "api-info":
            return False
        handler = request.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.close_connection = True
        chunk = b" " * (1 << 20)
        try:
            handler.wfile.write(b"1\r\n[\r\n")
            while not released.is_set():
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent.append(len(chunk))
        except OSError:  # the client hung up
            pass
        return True

    hub.hooks.append(endless)

    result = ckptdiff("org/drafter", SAME_AS_PUBLISHED)

    assert_one_clear_line(result, "org/drafter", "sent a file listing over 100,000,000 bytes")
    assert sum(sent) < 200 * 2**20  # it stopped reading soon after the cap
