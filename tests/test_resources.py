"""Resource bounds: ckptdiff reads headers and nothing else, and a header's claimed size allocates nothing.

Bytes are counted by the kernel (``rchar`` in /proc/self/io: every byte a read() returned to this process) and
memory by the peak resident set (VmHWM) of a child process; both are counts, not timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ckptdiff.errors import CkptdiffError, HeaderError
from ckptdiff.safetensors_header import MAX_HEADER_BYTES, read_header_length
from ckptdiff.sources import resolve
from fixtures.generate import write_kimi_k2_base, write_safetensors

REPO = Path(__file__).resolve().parent.parent
linux_only = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/self/io (Linux)")


def bytes_read_so_far() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def bytes_read_by(action) -> int:
    """Bytes read() returned to this process while ``action`` ran (minus the reads of /proc/self/io itself)."""
    calibrate_before, calibrate_after = bytes_read_so_far(), bytes_read_so_far()
    probe = calibrate_after - calibrate_before
    before = bytes_read_so_far()
    action()
    return bytes_read_so_far() - before - probe


def header_bytes_of(path: Path) -> int:
    with open(path, "rb") as handle:
        return 8 + int.from_bytes(handle.read(8), "little")


@linux_only
def test_reading_a_sparse_6_gb_file_reads_only_its_header(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    size = write_safetensors(path, [("embed", "BF16", [163840, 7168]), ("lm_head", "F32", [32000, 7168 * 4])])
    resolve(str(path))  # warm up: imports and lazy modules are not part of the count

    read = bytes_read_by(lambda: resolve(str(path)))

    assert size > 6 * 10**9
    assert read == header_bytes_of(path)  # exactly the 8-byte length and the JSON, no read-ahead into the data


@linux_only
def test_reading_a_sparse_56_gb_sharded_base_reads_headers_index_and_config_only(tmp_path: Path) -> None:
    """A Kimi-K2-shaped base, 4 layers with all of their 384 experts: 56 GB of sparse shards."""
    folder = write_kimi_k2_base(tmp_path / "base", layers=4)
    shards = sorted(folder.glob("*.safetensors"))
    resolve(str(folder))

    read = bytes_read_by(lambda: resolve(str(folder)))

    apparent = sum(p.stat().st_size for p in shards)
    expected = sum(header_bytes_of(p) for p in shards)
    expected += (folder / "model.safetensors.index.json").stat().st_size + (folder / "config.json").stat().st_size
    assert apparent > 50 * 10**9
    assert read == expected, (read, expected)


@linux_only
def test_a_1_gb_config_json_is_refused_unread(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "model.safetensors", [("w", "F32", [4])], fill="zeros")
    with open(tmp_path / "config.json", "wb") as handle:
        handle.write(b"{")
        handle.truncate(2**30)
    with pytest.raises(CkptdiffError, match="over the 100,000,000-byte limit"):
        resolve(str(tmp_path))

    def refused() -> None:
        with pytest.raises(CkptdiffError):
            resolve(str(tmp_path))

    assert bytes_read_by(refused) == 0  # its size, from the listing, refuses it before any file is read


def test_a_1_gb_config_json_on_the_hub_is_refused_undownloaded(hub_client, tmp_path: Path) -> None:
    write_safetensors(tmp_path / "model.safetensors", [("w", "F32", [4])], fill="zeros")
    with open(tmp_path / "config.json", "wb") as handle:
        handle.write(b"{")
        handle.truncate(2**30)
    hub_client.add_repo("org/huge-config", tmp_path)

    with pytest.raises(CkptdiffError, match="config.json: config.json is 1,073,741,824 bytes, over the"):
        resolve("org/huge-config")
    assert hub_client.requests == {"api-info": 1}  # refused from the listing: nothing downloaded


def test_the_header_limit_is_the_reference_implementations(tmp_path: Path) -> None:
    assert read_header_length(MAX_HEADER_BYTES.to_bytes(8, "little"), source="f", file_size=2**40) == MAX_HEADER_BYTES
    with pytest.raises(HeaderError, match="exceeds the 100000000-byte limit"):
        read_header_length((MAX_HEADER_BYTES + 1).to_bytes(8, "little"), source="f", file_size=2**40)


# --- memory: a child process reports its own peak RSS ---------------------------------------------------------

# VmHWM, not ru_maxrss: Linux carries the parent's high-water mark across fork and exec into ru_maxrss, so a
# child of a pytest that imported torch would "peak" at torch's size.
PEAK_RSS = """
import sys
from ckptdiff.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code
status = open("/proc/self/status").read()
peak = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
print("PEAK", code, peak, file=sys.__stderr__)
"""


def peak_rss_kib(*args: str) -> tuple[int, int]:
    """Run ``ckptdiff args`` in a fresh interpreter; its exit code and peak resident set size in KiB."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    peaks = [line.split()[1:] for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    assert len(peaks) == 1, done.stderr
    return int(peaks[0][0]), int(peaks[0][1])


@linux_only
@pytest.mark.parametrize("claimed", [99_999_999, 100_000_000, 2**64 - 1])
def test_a_huge_claimed_header_in_a_tiny_file_allocates_nothing(tmp_path: Path, claimed: int) -> None:
    good = REPO / "fixtures" / "kimi-k2-eagle3-published" / "model.safetensors"
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(claimed.to_bytes(8, "little") + b'{"w": {}}')

    baseline_code, baseline = peak_rss_kib(str(good), str(good))
    code, peak = peak_rss_kib(str(bad), str(good))

    assert (baseline_code, code) == (0, 2)
    assert peak - baseline < 16 * 1024, (peak, baseline)  # KiB: far below the 95 MiB a read of the claim would take


@linux_only
def test_a_huge_claimed_header_in_a_huge_sparse_file_costs_at_most_the_limit(tmp_path: Path) -> None:
    """A 1 GiB sparse file of zeros whose first 8 bytes claim a 64 MiB header: read, refused, memory bounded."""
    bad = tmp_path / "bad.safetensors"
    with open(bad, "wb") as out:
        out.write((64 * 2**20).to_bytes(8, "little") + b"{")
        out.truncate(2**30)
    good = REPO / "fixtures" / "kimi-k2-eagle3-published" / "model.safetensors"

    code, peak = peak_rss_kib(str(bad), str(good))

    assert code == 2
    assert peak < 512 * 1024, peak  # KiB: the 64 MiB header and its decoded text, not the 1 GiB file


@linux_only
def test_hostile_headers_keep_memory_small(tmp_path: Path) -> None:
    """A million-deep nesting, a 4000-digit integer, 200 k entries: each refused at a modest peak RSS."""
    cases = {
        "deep.safetensors": ('{"w":' + "[" * 1_000_000 + "]" * 1_000_000 + "}").encode(),
        "long-int.safetensors": b'{"w":{"dtype":"U8","shape":[' + b"9" * 4000 + b'],"data_offsets":[0,1]}}',
        "many-keys.safetensors": json.dumps({f"t{i}": {} for i in range(200_000)}).encode(),
    }
    paths = []
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(len(raw).to_bytes(8, "little") + raw)
        paths.append(str(tmp_path / name))
    good = str(REPO / "fixtures" / "kimi-k2-eagle3-published" / "model.safetensors")

    for path in paths:
        code, peak = peak_rss_kib(path, good)
        assert code == 2
        assert peak < 256 * 1024, (path, peak)


# --- the report file: replaced whole or not at all ----------------------------------------------------------

GOOD_PAIR = [str(REPO / "fixtures" / "kimi-k2-eagle3-published"), str(REPO / "fixtures" / "kimi-k25-eagle3-ours")]


def test_a_failing_run_leaves_an_existing_report_untouched(tmp_path: Path, run_cli) -> None:
    report = tmp_path / "report.json"
    report.write_text('{"previous": "report"}\n')
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x01")

    result = run_cli(str(bad), GOOD_PAIR[1], "-o", str(report))

    assert result.returncode == 2
    assert report.read_text() == '{"previous": "report"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.safetensors", "report.json"]  # no temp file


def test_a_report_to_a_full_device_is_one_line(run_cli) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    result = run_cli(*GOOD_PAIR, "-o", "/dev/full")
    assert result.returncode == 2
    assert result.stderr.startswith("ckptdiff: /dev/full: cannot write the report") and result.stderr.count("\n") == 1


def test_a_report_into_a_missing_folder_is_one_line(tmp_path: Path, run_cli) -> None:
    result = run_cli(*GOOD_PAIR, "-o", str(tmp_path / "no" / "such" / "report.md"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot write the report" in result.stderr
    assert not (tmp_path / "no").exists()
