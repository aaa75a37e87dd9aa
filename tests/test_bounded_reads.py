"""Every transport is bounded: a server that ignores Range, or sends a 206 that never ends, costs at most the
header plus 16 MiB on the wire and under 300 MB of memory, on the Hub, a plain web server (https://) and S3.

The servers are the loopback ones of the other tests (tests/hub_emulator.py, moto through tests/store_servers.py),
made to misbehave; the objects are 1 GiB, sparse on disk or generated as they are sent. Memory is the peak
resident set of a fresh child process (tests/test_resources.py's ``peak_rss_kib``); bytes are what the server
sent (socket buffers included, which is why the bound has 16 MiB of slack rather than 100 kB).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_emulator import HubEmulator, Request
from test_resources import linux_only, peak_rss_kib

from fixtures.generate import HERE as FIXTURES

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
GIB = 2**30
SLACK = 16 * 2**20
PEAK_KIB = 300 * 1024


def big_header() -> bytes:
    """The 8-byte length and JSON header of a 1 GiB safetensors file (one BF16 tensor)."""
    header = json.dumps({"w": {"dtype": "BF16", "shape": [16384, 32768], "data_offsets": [0, GIB]}}).encode()
    return len(header).to_bytes(8, "little") + header


def write_big(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.safetensors"
    with open(path, "wb") as out:
        out.write(big_header())
        out.truncate(len(big_header()) + GIB)  # sparse: 1 GiB of zeros that take no disk
    return path


@pytest.fixture
def released() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def endless_206(released: threading.Event):
    """A hook: the header's GET answered 206 with the real header, then zeros that never end."""

    def hook(request: Request) -> bool:
        if request.method != "GET" or not request.path.endswith(".safetensors") or "Range" not in request.headers:
            return False
        handler = request.handler
        handler.send_response(206)
        handler.send_header("Content-Range", f"bytes 0-99999/{len(big_header()) + GIB}")
        handler.end_headers()
        handler.close_connection = True
        sent = 0
        try:
            handler.wfile.write(big_header())
            while not released.is_set():
                handler.wfile.write(bytes(2**20))
                sent += 2**20
                request.log.bytes_sent = sent
        except OSError:  # the client hung up: what it should do
            pass
        return True

    return hook


# --- a plain web server (https://) ----------------------------------------------------------------------------


@linux_only
def test_a_web_server_ignoring_range_on_a_1_gib_file_costs_a_sliver(hub: HubEmulator, tmp_path):
    pytest.importorskip("aiohttp")
    write_big(tmp_path / "big")
    hub.add_repo("org/big", tmp_path / "big")
    hub.ignore_range = True
    url = f"{hub.endpoint}/org/big/resolve/main/model.safetensors"

    code, peak = peak_rss_kib(url, url)
    hub.stop()

    assert code == 0
    assert peak < PEAK_KIB, peak
    assert hub.bytes_sent["resolve"] <= len(big_header()) + SLACK, hub.bytes_sent["resolve"]


@linux_only
def test_a_web_server_sending_an_endless_206_costs_a_sliver(hub: HubEmulator, tmp_path, released):
    pytest.importorskip("aiohttp")
    write_big(tmp_path / "big")
    hub.add_repo("org/big", tmp_path / "big")
    hub.hooks.append(endless_206(released))
    url = f"{hub.endpoint}/org/big/resolve/main/model.safetensors"

    code, peak = peak_rss_kib(url, url)
    released.set()
    hub.stop()

    assert code == 0  # the header came whole in the first 100 kB; the rest was never read
    assert peak < PEAK_KIB, peak
    sent = sum(entry.bytes_sent for entry in hub.log if entry.route == "resolve")
    assert sent <= len(big_header()) + SLACK, sent


# --- the Hub ---------------------------------------------------------------------------------------------------


@linux_only
@pytest.mark.parametrize("fault", ["ignore-range", "endless-206"])
def test_the_hub_ignoring_range_or_sending_an_endless_206_costs_a_sliver(
    hub: HubEmulator, tmp_path, monkeypatch, released, fault
):
    write_big(tmp_path / "big")
    hub.add_repo("org/big", tmp_path / "big")
    if fault == "ignore-range":
        hub.ignore_range = True
    else:
        hub.hooks.append(endless_206(released))
    for variable, value in hub.client_env(tmp_path / "hf").items():
        monkeypatch.setenv(variable, value)  # the child inherits them

    code, peak = peak_rss_kib("org/big", "org/big")
    released.set()
    hub.stop()

    assert code == 0
    assert peak < PEAK_KIB, peak
    sent = sum(entry.bytes_sent for entry in hub.log if entry.route == "resolve")
    assert sent <= len(big_header()) + SLACK, sent


# --- S3 (moto) -------------------------------------------------------------------------------------------------


@pytest.fixture
def s3(s3):
    """The run's moto server (conftest.py), with a bucket for these faults."""
    try:
        s3.client().create_bucket(Bucket="faults")
    except s3.client().exceptions.BucketAlreadyOwnedByYou:
        pass
    return s3


@linux_only
@pytest.mark.parametrize("fault", ["ignore-range", "endless-206"])
def test_s3_ignoring_range_or_sending_an_endless_206_costs_a_sliver(s3, fault):
    key = f"faults/{fault}/model.safetensors"
    s3.generated[key] = (big_header(), len(big_header()) + GIB)  # 200 + the whole object to any GET
    if fault == "endless-206":
        s3.endless.add(key)
    url = f"s3://{key}"

    code, peak = peak_rss_kib(url, url)

    assert code == 0
    assert peak < PEAK_KIB, peak
    assert s3.bytes_sent[key] <= len(big_header()) + SLACK, s3.bytes_sent[key]
