"""--values on two full-size drafter files: throughput next to `cat` reading the same bytes, and peak RSS.

    python benchmarks/values_bench.py                  # two 2.22 GiB Kimi-K2-drafter-shaped files, 5 rounds
    python benchmarks/values_bench.py --quick          # two 256 MiB files, 1 round
    python benchmarks/values_bench.py --against main   # also ckptdiff at that git revision, same files, same rounds

The files (under benchmarks/.work/values/, kept between runs) have the published Kimi-K2 EAGLE-3 drafter's
tensors (bf16, plus d2t/t2d), filled by repeating a 16 MiB block of random bf16 values; B differs from A
everywhere (the full statistics path) or, in the "byte copies" case, is a copy (the equal-bytes path). Every
measurement is a fresh subprocess (through run.py's launcher): wall time spawn → exit, CPU time and peak RSS
from ``os.wait4``; the "pass alone" rows time only the value pass inside the child (imports and headers done
before the clock starts), so start-up and throughput show apart. Rounds interleave the cases. The page cache
is warm (the files were just read), so the `cat` anchor is the cost of moving the bytes, and the difference is
ckptdiff's arithmetic. "of cat" is throughput as a share of cat's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.generate import KIMI_K2_DRAFTER_CONFIG, eagle3_tensors, header_bytes  # noqa: E402

BLOCK_BYTES = 16 * 2**20
QUICK_SHAPE = [("w", "BF16", [8192, 16384])]  # 256 MiB
WORK = HERE / ".work" / "values"
#: The issue's targets: end to end at least this share of cat's throughput, and a small pair in this many seconds.
TARGET_OF_CAT = 0.5
TARGET_SMALL_SECONDS = 0.5
#: Rounds of the full run (medians over them).
ROUNDS = 5


def write_filled(path: Path, tensors: list[tuple[str, str, list[int]]], seed: int) -> int:
    """A safetensors file whose data is a 16 MiB block of random bf16 values, repeated."""
    import numpy as np

    prefix, length = header_bytes(tensors, {"format": "pt"})
    floats = np.random.default_rng(seed).standard_normal(BLOCK_BYTES // 2, dtype=np.float32)
    block = (floats.view(np.uint32) >> 16).astype("<u2").tobytes()  # bf16: the top half of each float32
    with open(path, "wb") as handle:
        handle.write(prefix)
        left = length
        while left:
            step = min(left, len(block))
            handle.write(block[:step])
            left -= step
    return len(prefix) + length


def write_in_child(path: Path, tensors: list[tuple[str, str, list[int]]], seed: int) -> int:
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); from values_bench import write_filled; "
        "print(write_filled(__import__('pathlib').Path(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])))"
    )
    command = [sys.executable, "-c", script, str(HERE), str(path), json.dumps(tensors), str(seed)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return int(done.stdout)


#: The --values pass alone, timed inside a child that has already imported what it needs and read the headers;
#: it writes its seconds to the file named first.
PASS_ONLY = """
import sys, time
from ckptdiff import values
from ckptdiff.sources import resolve
a, b = resolve(sys.argv[2]), resolve(sys.argv[3])
values.compare_values(a, b, [])  # imports numpy (or torch, in older revisions)
names = [n for n in a.tensors if n in b.tensors and a.tensors[n].shape == b.tensors[n].shape]
start = time.perf_counter()
values.compare_values(a, b, names)
open(sys.argv[1], "w").write(str(time.perf_counter() - start))
"""


def measure(command: list[str], clock: Path | None = None) -> tuple[float, float, float]:
    """Wall seconds (or, with ``clock``, the seconds the child wrote there), CPU seconds (user + system) and peak
    RSS (MiB) of one subprocess, through run.py's launcher (a tiny process, so the RSS is the child's own)."""
    from run import Command, measure_once

    measured = Command(" ".join(command), command, ok_codes=(0, 1))
    measure_once(measured)
    seconds = float(clock.read_text()) if clock is not None else measured.seconds[0]
    return seconds, measured.cpu_seconds[0], measured.rss_mb[0]


def ckptdiff(*args: str, tree: Path | None = None) -> list[str]:
    """The CLI, from this checkout or from another revision's tree (run.py's checkout)."""
    from run import OTHER_REVISION

    options = [*args, "--format", "json", "-o", os.devnull, "-q"]
    if tree is None:
        return [sys.executable, "-m", "ckptdiff", *options]
    return [sys.executable, "-c", OTHER_REVISION, str(tree), *options]


def inputs(quick: bool) -> tuple[Path, Path, Path, int]:
    """A, B and a byte copy of A under benchmarks/.work/values/, written once (by a child) and kept."""
    tensors = QUICK_SHAPE if quick else eagle3_tensors(KIMI_K2_DRAFTER_CONFIG, with_embed=False)
    folder = WORK / ("quick" if quick else "drafter")
    folder.mkdir(parents=True, exist_ok=True)
    a, b, same = folder / "a.safetensors", folder / "b.safetensors", folder / "same.safetensors"
    stamp, wanted = folder / "tensors.json", json.dumps(tensors)
    if not (stamp.is_file() and stamp.read_text() == wanted and same.is_file()):
        stamp.unlink(missing_ok=True)
        # Written by a child: on Linux a child's peak RSS from wait4 counts the parent's at fork, so this
        # process stays small (no numpy block) and the `cat` anchor's figure means something.
        write_in_child(a, tensors, seed=1)
        write_in_child(b, tensors, seed=2)
        shutil.copyfile(a, same)
        stamp.write_text(wanted)
    return a, b, same, a.stat().st_size


def run(quick: bool = False, against: str | None = None) -> list[dict[str, Any]]:
    """Rows: `cat` anchor, --values on differing files, on byte copies, headers only, a small pair, the pass alone;
    with ``against``, the --values rows again with ckptdiff at that git revision."""
    rounds = 1 if quick else ROUNDS
    small = str(ROOT / "fixtures" / "kimi-k2-eagle3-published")
    a, b, same, size = inputs(quick)
    subprocess.run(["cat", str(a), str(b), str(same)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    cases: dict[str, tuple[Any, int]] = {
        "cat A B > /dev/null (anchor)": (
            [shutil.which("sh") or "/bin/sh", "-c", f'cat "{a}" "{b}" > /dev/null'],
            2 * size,
        ),
        "ckptdiff A B --values (every value differs)": (ckptdiff(str(a), str(b), "--values"), 2 * size),
        "ckptdiff A A' --values (byte copies)": (ckptdiff(str(a), str(same), "--values"), 2 * size),
        "ckptdiff A B (headers only)": (ckptdiff(str(a), str(b)), 0),
        "ckptdiff --values on a 300 KiB pair (start-up)": (ckptdiff(small, small, "--values"), 0),
        "the --values pass alone, every value differs (in-process clock)": ((a, b), 2 * size),
        "the --values pass alone, byte copies (in-process clock)": ((a, same), 2 * size),
    }
    if against:
        from run import checkout

        tree = checkout(against)
        cases[f"ckptdiff at {against}: A B --values (every value differs)"] = (
            ckptdiff(str(a), str(b), "--values", tree=tree),
            2 * size,
        )
        cases[f"ckptdiff at {against}: A A' --values (byte copies)"] = (
            ckptdiff(str(a), str(same), "--values", tree=tree),
            2 * size,
        )
        cases[f"ckptdiff at {against}: --values on a 300 KiB pair"] = (
            ckptdiff(small, small, "--values", tree=tree),
            0,
        )
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    peaks: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):  # rounds interleave the cases: a noisy neighbour slows all alike
        for name, (command, _) in cases.items():
            if isinstance(command, tuple):  # the pass alone
                clock = WORK / "pass-seconds"
                command = [sys.executable, "-c", PASS_ONLY, str(clock), *map(str, command)]
                seconds, cpu_seconds, peak = measure(command, clock)
            else:
                seconds, cpu_seconds, peak = measure(command)
            times[name].append(seconds)
            cpu[name].append(cpu_seconds)
            peaks[name].append(peak)
    rows = []
    cat = statistics.median(times[next(iter(cases))])
    for name, (_, nbytes) in cases.items():
        seconds = statistics.median(times[name])
        rows.append(
            {
                "case": name,
                "file_bytes": size,
                "bytes_read": nbytes,
                "seconds": round(seconds, 3),
                "cpu_seconds": round(statistics.median(cpu[name]), 3),
                "mib_per_s": round(nbytes / 2**20 / seconds, 1) if nbytes else None,
                "of_cat": round(cat / seconds, 3) if nbytes else None,  # throughput as a fraction of cat's
                "peak_rss_mib": round(max(peaks[name]), 1),
                "rounds": rounds,
            }
        )
    return rows


def checks(rows: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The issue's targets for --values, met or not, from this run's rows."""
    by_case = {row["case"]: row for row in rows}
    differs = by_case["ckptdiff A B --values (every value differs)"]
    copies = by_case["ckptdiff A A' --values (byte copies)"]
    small = by_case["ckptdiff --values on a 300 KiB pair (start-up)"]
    share = f"--values end to end ≥ {TARGET_OF_CAT:.0%} of cat"
    return [
        (f"{share}, every value differs ({differs['of_cat']:.0%})", differs["of_cat"] >= TARGET_OF_CAT),
        (f"{share}, byte copies ({copies['of_cat']:.0%})", copies["of_cat"] >= TARGET_OF_CAT),
        (
            f"--values on a small pair < {TARGET_SMALL_SECONDS} s ({small['seconds']:.2f} s)",
            small["seconds"] < TARGET_SMALL_SECONDS,
        ),
    ]


def render(rows: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    size = rows[0]["file_bytes"]
    table = [
        [
            row["case"],
            f"{row['seconds']:.2f}",
            f"{row['cpu_seconds']:.2f}",
            "" if row["mib_per_s"] is None else f"{row['mib_per_s']:.0f}",
            "" if row["of_cat"] is None else f"{100 * row['of_cat']:.0f} %",
            f"{row['peak_rss_mib']:.0f}",
        ]
        for row in rows
    ]
    head = f"two files of {size / 2**30:.2f} GiB each; median of {rows[0]['rounds']} round(s), warm page cache"
    headers = ["case", "seconds", "CPU s", "MiB/s", "of cat", "peak RSS MiB"]
    return head + "\n" + tabulate(table, headers=headers, tablefmt="github")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two 256 MiB files, one round")
    parser.add_argument("--against", metavar="REV", help="also time --values with ckptdiff at git REV")
    args = parser.parse_args()
    rows = run(args.quick, args.against)
    print(render(rows))
    for text, ok in checks(rows):
        print(f"- {'met' if ok else 'NOT MET'}: {text}")
