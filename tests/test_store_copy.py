"""--values' copies out of an object store (moto's S3 server on loopback): a few ranges in flight, whole or nothing."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from request_gate import RequestGate  # noqa: E402
from store_servers import S3Server  # noqa: E402

from ckptdiff.errors import SourceError  # noqa: E402
from ckptdiff.sources import fetch_files, open_source, resolve  # noqa: E402
from ckptdiff.sources.file_copy import COPY_CHUNK, IN_FLIGHT, PARTIAL_SUFFIX  # noqa: E402
from fixtures.generate import HERE as FIXTURES  # noqa: E402

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
OURS = FIXTURES / "kimi-k25-eagle3-ours"


def upload_bytes(s3: S3Server, tmp_path: Path, target: str, files: dict[str, bytes]) -> None:
    folder = tmp_path / "upload"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    s3.upload(folder, target)


def copied_files(tmp_path: Path) -> list[str]:
    """Every file under a copy's folder, as paths relative to it."""
    return sorted(str(path.relative_to(tmp_path / "into")) for path in (tmp_path / "into").rglob("*") if path.is_file())


@pytest.mark.parametrize(
    "size",
    [0, 1, COPY_CHUNK - 1, COPY_CHUNK, COPY_CHUNK + 1, 2 * COPY_CHUNK + 12_345],
    ids=["empty", "one-byte", "chunk-less-one", "one-chunk", "chunk-plus-one", "two-chunks-and-a-bit"],
)
def test_a_copied_file_is_the_objects_bytes_read_one_chunk_a_request(s3, tmp_path, size):
    data = os.urandom(size)
    upload_bytes(s3, tmp_path, "copies/side", {"weights.bin": data})
    source = open_source("s3://copies/side")  # as a worker opens it: no listing, the file's size from a HEAD

    paths = fetch_files(source, tmp_path / "into", ["weights.bin"])

    assert paths["weights.bin"].read_bytes() == data
    assert copied_files(tmp_path) == ["weights.bin"]  # no partial file left beside it
    assert s3.requests["copies/side/weights.bin"] == 1 + math.ceil(size / COPY_CHUNK)  # a HEAD, then the ranges
    assert s3.bytes_sent["copies/side/weights.bin"] == size  # not a byte twice


def test_at_most_a_few_ranges_are_in_flight_and_the_bar_hears_every_byte(s3, tmp_path):
    """IN_FLIGHT ranges at once (the first ones wait at the server until all are there, however loaded the machine),
    and no more (then each request waits 0.3 s, so a wider pool would show): bounded memory."""
    size = (3 * IN_FLIGHT) * COPY_CHUNK // 2 + 7
    data = os.urandom(size)
    upload_bytes(s3, tmp_path, "copies/wide", {"weights.bin": data})
    advanced: list[int] = []

    class Bar:
        def advance(self, amount: int = 1) -> None:
            advanced.append(amount)

        def set_total(self, total: int | None) -> None: ...

        def close(self) -> None: ...

    s3.hooks.append(RequestGate(lambda environ: environ["REQUEST_METHOD"] == "GET", until=IN_FLIGHT))
    s3.latency = 0.3
    try:
        paths = fetch_files(open_source("s3://copies/wide"), tmp_path / "into", ["weights.bin"], lambda *_: Bar())
    finally:
        s3.latency = 0.0
        s3.hooks.clear()

    assert paths["weights.bin"].read_bytes() == data
    assert s3.max_in_flight == IN_FLIGHT
    assert sum(advanced) == size and max(advanced) <= COPY_CHUNK


@pytest.mark.parametrize("fault", ["short_after", "drop_after"])
def test_a_store_failing_mid_copy_is_one_line_naming_the_file_and_leaves_no_file(s3, tmp_path, fault):
    """A store that stops sending part way through (a shorter answer, or a broken connection): the copy fails
    with one line naming the object, and neither the file nor a partial one is left to be taken as complete."""
    data = os.urandom(3 * COPY_CHUNK)
    upload_bytes(s3, tmp_path, "copies/failing", {"weights.bin": data})
    getattr(s3, fault)["copies/failing/weights.bin"] = COPY_CHUNK + 1000  # the second range stops early
    try:
        with pytest.raises(SourceError) as raised:
            fetch_files(open_source("s3://copies/failing"), tmp_path / "into", ["weights.bin"])
    finally:
        getattr(s3, fault).clear()

    line = str(raised.value)
    assert line.startswith("s3://copies/failing/weights.bin: ") and "\n" not in line, line
    assert copied_files(tmp_path) == []


def test_values_over_a_store_failing_mid_copy_exits_2_with_one_line(s3, run_cli, tmp_path):
    pytest.importorskip("numpy")
    s3.upload(PUBLISHED, "values/published")
    s3.upload(OURS, "values/ours")
    size = (OURS / "model.safetensors").stat().st_size
    s3.drop_after["values/ours/model.safetensors"] = size // 2
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    try:
        result = run_cli(
            "s3://values/published", "s3://values/ours", "--values", "--format", "json", "-q",
            env={**s3.env, "TMPDIR": str(scratch)},
        )  # fmt: skip
    finally:
        s3.drop_after.clear()

    assert result.returncode == 2
    assert result.stderr.startswith("ckptdiff: s3://values/ours/model.safetensors: ")
    assert result.stderr.count("\n") == 1, result.stderr
    left = [path for path in scratch.rglob("*") if path.is_file()]  # the run's folder lives until its process ends
    assert not [path for path in left if path.parent.name.startswith("B-")]  # A's copy at most, nothing of B's
    assert not [path for path in left if path.name.endswith(PARTIAL_SUFFIX)]


def test_sources_configured_alike_share_a_client_and_never_one_configured_otherwise(s3, monkeypatch, tmp_path):
    """One filesystem (client, connections, credentials) per store and configuration in a process: a worker's
    tasks reuse it; a source under other credentials gets its own, and the store sees those credentials."""
    s3.upload(OURS, "shared/ours")
    first, second = open_source("s3://shared/ours"), open_source("s3://shared/ours")
    assert first.list_files().files.keys() == second.list_files().files.keys()
    assert first._filesystem() is second._filesystem()

    with s3.require_auth() as (key_id, secret):
        with pytest.raises(SourceError, match="access denied"):
            resolve("s3://shared/ours")  # the test's keys, unknown to moto's IAM: refused
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        allowed = open_source("s3://shared/ours")
        assert "model.safetensors" in allowed.list_files().files
        assert allowed._filesystem() is not first._filesystem()
        paths = fetch_files(allowed, tmp_path / "into", ["config.json"])
        assert json.loads(paths["config.json"].read_text()) == json.loads((OURS / "config.json").read_text())
