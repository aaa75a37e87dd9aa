"""``ckptdiff convert`` on the full-size Kimi-K2 EAGLE-3 drafter (2.22 GiB), next to ``cp --sparse=never``.

    python benchmarks/convert_bench.py             # 3 rounds, then the grafted-embedding run
    python benchmarks/convert_bench.py --rounds 1

Inputs (under /tmp/ckptdiff-convert-bench/, or $CKPTDIFF_BENCH_TMP; kept between runs, never committed): the
published drafter's tensors (bf16, d2t, t2d) filled with a repeated 16 MiB block of random bytes, and a
Kimi-K2.5 base in its published 64-shard layout (sparse: headers only, the 2.35 GB embedding reads as zeros).
The page cache is warm (the drafter is read once before the rounds). Each measured thing is a fresh process,
timed spawn → exit by ``/usr/bin/time`` (which also gives the peak RSS); rounds interleave the cases and the
figures are medians. Throughput is the drafter's bytes over the wall time:

- ``cp --sparse=never`` the drafter's files into a new folder (the anchor);
- the whole command, proof included: ``ckptdiff convert SRC OUT --to sglang -q``;
- the write phase alone: the plan made first (untimed), then only ``write_plan`` timed inside the child.

Then, once: the drafter converted for SGLang with the embedding grafted from the K2.5 base served by the Hub
emulator (tests/hub_emulator.py, in this process): the bytes the emulator sent for the base's weight files,
over the embedding's bytes, and the command's peak RSS. Outputs are removed after each measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from fixtures.generate import KIMI_K2_DRAFTER_CONFIG, eagle3_tensors, header_bytes, write_config  # noqa: E402

WORK = Path(os.environ.get("CKPTDIFF_BENCH_TMP", "/tmp")) / "ckptdiff-convert-bench"
BLOCK = 16 * 2**20
#: The issue's targets (issue 28).
TARGET_WHOLE, TARGET_WRITE, TARGET_GRAFT_READ, TARGET_RSS_MB = 0.5, 0.8, 1.01, 300
WRITE_PHASE = """
import sys, time
from pathlib import Path
from ckptdiff.convert.plan import build_plan
from ckptdiff.convert.targets import TARGETS
from ckptdiff.convert.write import write_plan
from ckptdiff.sources import open_source, read_source
src, out = sys.argv[1], Path(sys.argv[2])
source = open_source(src)
plan = build_plan(read_source(source), TARGETS["sglang"])
assert plan.ok, plan.problems
out.mkdir()
started = time.perf_counter()
write_plan(plan, out, {"source": source})
print(time.perf_counter() - started)
"""


def write_drafter(folder: Path) -> int:
    """The full-size published drafter (no embedding), random bytes: returns the weight file's size."""
    weights = folder / "model.safetensors"
    specs = eagle3_tensors(KIMI_K2_DRAFTER_CONFIG, with_embed=False)
    prefix, length = header_bytes(specs, {"format": "pt"})
    if weights.is_file() and weights.stat().st_size == len(prefix) + length:
        return len(prefix) + length
    folder.mkdir(parents=True, exist_ok=True)
    write_config(folder, KIMI_K2_DRAFTER_CONFIG)
    block = os.urandom(BLOCK)
    with open(weights, "wb") as handle:
        handle.write(prefix)
        left = length
        while left:
            handle.write(block[: min(BLOCK, left)])
            left -= min(BLOCK, left)
    return len(prefix) + length


def timed(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (kB) and stdout of ``command`` run under /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-o", report.name, "-f", "%e %M", *command], capture_output=True, text=True, cwd=ROOT
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
        _, rss = report.read().split()[-2:]
    return wall, int(rss), done.stdout


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def rounds(src: Path, size: int, count: int) -> dict[str, list[float]]:
    out = WORK / "out"
    found: dict[str, list[float]] = {"cp": [], "whole": [], "write": [], "rss_whole": []}
    for _ in range(count):
        fresh(out).mkdir()
        wall, _, _ = timed(["cp", "--sparse=never", str(src / "model.safetensors"), str(src / "config.json"), str(out)])
        found["cp"].append(size / wall)
        wall, rss, _ = timed(
            [sys.executable, "-m", "ckptdiff", "convert", str(src), str(fresh(out)), "--to", "sglang", "-q"]
        )
        found["whole"].append(size / wall)
        found["rss_whole"].append(rss / 1024)
        _, _, printed = timed([sys.executable, "-c", WRITE_PHASE, str(src), str(fresh(out))])
        found["write"].append(size / float(printed.strip().splitlines()[-1]))
        fresh(out)
    return found


def graft(src: Path) -> dict[str, float]:
    from base_fixtures import write_kimi_k25_base
    from hub_emulator import HubEmulator

    base = WORK / "kimi-k25"
    if not (base / "config.json").is_file():
        write_kimi_k25_base(fresh(base))
    out = fresh(WORK / "grafted")
    with HubEmulator() as hub:
        hub.add_repo("moonshotai/Kimi-K2.5", base)
        home = fresh(WORK / "hf-home")  # a cold cache: the headers are read, and counted
        env = {**os.environ, **hub.client_env(home)}
        hub.reset_counters()
        command = [
            sys.executable, "-m", "ckptdiff", "convert", str(src), str(out), "--to", "sglang",
            "--base", "moonshotai/Kimi-K2.5", "--embed", "base", "--allow-tokenizer-change", "-q",
        ]  # fmt: skip
        with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
            done = subprocess.run(
                ["/usr/bin/time", "-o", report.name, "-f", "%e %M", *command], env=env, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise RuntimeError(f"graft run exited {done.returncode}: {done.stderr[-2000:]}")
            wall, rss = report.read().split()[-2:]
        weights = sum(e.bytes_sent for e in hub.log if e.path.endswith(".safetensors"))
        headers = sum(
            e.bytes_sent for e in hub.log if e.path.endswith(".safetensors") and (e.range or "").startswith("bytes=0-")
        )
    provenance = json.loads((out / "convert.json").read_text())
    embed = next(t for t in provenance["tensors"] if t["name"] == "embed_tokens.weight")
    embed_bytes = 2 * embed["shape"][0] * embed["shape"][1]
    fresh(out)
    return {
        "embed_bytes": embed_bytes,
        "weights_bytes": weights,
        "header_bytes": headers,
        "ratio": weights / embed_bytes,
        "rss_mb": int(rss) / 1024,
        "wall": float(wall),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-graft", action="store_true")
    args = parser.parse_args()
    src = WORK / "Kimi-K2-Instruct-eagle3"
    size = write_drafter(src)
    subprocess.run(["cat", str(src / "model.safetensors")], stdout=subprocess.DEVNULL, check=True)  # warm cache
    found = rounds(src, size, args.rounds)
    cp = statistics.median(found["cp"])
    whole, write = statistics.median(found["whole"]), statistics.median(found["write"])
    load = os.getloadavg()[0]
    print(f"## ckptdiff convert, {size / 2**30:.2f} GiB drafter local → local ({args.rounds} rounds, medians)\n")
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at the end (a shared machine)\n")
    print("| case | GB/s | of cp | target |")
    print("|---|---|---|---|")
    print(f"| cp --sparse=never | {cp / 1e9:.2f} | 1.00 | |")
    print(
        f"| convert --to sglang, whole command with proof | {whole / 1e9:.2f} | {whole / cp:.2f} | ≥ {TARGET_WHOLE} |"
    )
    print(f"| write phase alone | {write / 1e9:.2f} | {write / cp:.2f} | ≥ {TARGET_WRITE} |")
    print(f"\npeak RSS of the whole command: {max(found['rss_whole']):.0f} MB (target ≤ {TARGET_RSS_MB})")
    if not args.no_graft:
        g = graft(src)
        print(
            f"\ngrafted embedding from the Hub emulator: {g['weights_bytes']:,} bytes of the base's weight files read "
            f"for a {g['embed_bytes']:,}-byte embedding ({g['header_bytes']:,} of them headers): "
            f"{g['ratio']:.4f}× its bytes (target ≤ {TARGET_GRAFT_READ}); peak RSS {g['rss_mb']:.0f} MB "
            f"(target ≤ {TARGET_RSS_MB}); {g['wall']:.1f} s"
        )


if __name__ == "__main__":
    main()
