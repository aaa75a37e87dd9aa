"""Every wait has a cap and every refusal says what happened: a Hub asking to wait an hour, a config.json trickled
byte by byte, and a web server answering 403, 429 or a redirect loop each end in one clear line, exit 2.

The subprocess timeout (60 s) is the bound that fails a wait without a cap; nothing here measures wall time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_emulator import HubEmulator, Request

from fixtures.generate import HERE as FIXTURES

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"


@pytest.fixture
def released() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def hub_cli(hub: HubEmulator, run_cli, tmp_path: Path):
    """The CLI against the emulator, with long timeouts (a request it answers is never timed out by a loaded
    machine) unless the test sets a short one."""

    def run(*args: str, **env: str):
        base = {**hub.client_env(tmp_path / "hf"), "HF_HUB_DOWNLOAD_TIMEOUT": "60", "HF_HUB_ETAG_TIMEOUT": "60"}
        return run_cli(*args, env={**base, **env}, timeout=60)

    return run


def one_line(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_a_hub_asking_to_wait_an_hour_is_reported_not_waited_for(hub, hub_cli):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.fail_next(429, retry_after=3600, route="api-info")

    result = hub_cli("org/drafter", str(PUBLISHED))

    one_line(result, "org/drafter", "rate limited (HTTP 429)", "3600 s", "HF_TOKEN")


def test_a_short_retry_after_is_still_waited_out(hub, hub_cli):
    hub.add_repo("org/drafter", PUBLISHED)
    hub.fail_next(429, retry_after=1, route="api-info")

    result = hub_cli("org/drafter", str(PUBLISHED))

    assert result.returncode == 0, result.stderr


def test_a_trickled_config_json_times_out_by_its_own_size(hub, hub_cli, released):
    """64 bytes every 0.2 s: a 929-byte config.json would take 3 s, past 1 s + 929 B at 16 kB/s."""
    hub.add_repo("org/drafter", PUBLISHED)
    config = (PUBLISHED / "config.json").read_bytes()

    def trickle(request: Request) -> bool:
        if request.method != "GET" or not request.path.endswith("config.json"):
            return False
        handler = request.handler
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(config)))
        handler.end_headers()
        handler.close_connection = True
        try:
            for offset in range(0, len(config), 64):
                if released.wait(0.2):
                    break
                handler.wfile.write(config[offset : offset + 64])
                handler.wfile.flush()
        except OSError:
            pass
        return True

    hub.hooks.append(trickle)

    result = hub_cli("org/drafter", str(PUBLISHED), HF_HUB_DOWNLOAD_TIMEOUT="1")

    line = one_line(result, "org/drafter@", "timed out")
    assert "no local file" not in line  # the Hub knew the repo: no doubt that it exists


@pytest.mark.parametrize(
    ("status", "fragments"),
    [(403, ["access denied (HTTP 403)"]), (401, ["access denied (HTTP 401)"]), (429, ["rate limited", "429"])],
)
def test_a_web_server_refusing_says_why(hub, run_cli, tmp_path, status, fragments):
    pytest.importorskip("aiohttp")
    hub.add_repo("org/drafter", PUBLISHED)
    hub.fail_next(status, count=100, route="resolve")
    url = f"{hub.endpoint}/org/drafter/resolve/main/model.safetensors"

    result = run_cli(url, str(PUBLISHED), env={"HF_HOME": str(tmp_path / "hf")}, timeout=60)

    line = one_line(result, url, *fragments)
    assert "no such bucket" not in line


def test_a_web_server_redirect_loop_says_so(hub, run_cli, tmp_path):
    pytest.importorskip("aiohttp")
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(lambda request: request.respond(302, headers={"Location": request.path}) or True)
    url = f"{hub.endpoint}/org/drafter/resolve/main/model.safetensors"

    result = run_cli(url, str(PUBLISHED), env={"HF_HOME": str(tmp_path / "hf")}, timeout=60)

    one_line(result, url, "redirect loop")


def test_a_web_server_trickling_a_header_times_out(hub, released, monkeypatch):
    """64 bytes every 0.2 s (320 B/s) against the floor (16 kB/s, raised here so that the test waits less): the read
    ends by its deadline, in one line."""
    pytest.importorskip("aiohttp")
    from ckptdiff.errors import SourceError
    from ckptdiff.sources import resolve, store_reads

    monkeypatch.setattr(store_reads, "READ_TIMEOUT", 1.0)  # the grace; the rest of the deadline is the rate,
    monkeypatch.setattr(store_reads, "MIN_BODY_RATE", 128 * 1024)  # here 128 kB/s: a deadline of 1.8 s, not 7
    hub.add_repo("org/drafter", PUBLISHED)

    def trickle(request: Request) -> bool:
        if request.method != "GET" or "Range" not in request.headers:
            return False
        handler = request.handler
        handler.send_response(200)  # Range ignored, too
        handler.send_header("Content-Length", str(10**6))
        handler.end_headers()
        handler.close_connection = True
        try:
            while not released.wait(0.2):
                handler.wfile.write(bytes(64))
                handler.wfile.flush()
        except OSError:
            pass
        return True

    hub.hooks.append(trickle)

    with pytest.raises(SourceError, match=r"timed out: the server sent \d+ of \d+ bytes, slower than 128 kB/s"):
        resolve(f"{hub.endpoint}/org/drafter/resolve/main/model.safetensors")
