"""--values on two ~2 GiB bf16 checkpoints: ckptdiff next to `cat` (the floor) and the numpy anchor, and on Dask.

    python benchmarks/values_bench.py                  # two 2.22 GiB Kimi-K2-drafter-shaped files, 3 rounds
    python benchmarks/values_bench.py --quick          # two 256 MiB files, 1 round, no Dask
    python benchmarks/values_bench.py --against main   # also ckptdiff at that git revision, same files, same rounds
    python benchmarks/values_bench.py --no-dask        # without the Dask rows

The files (under /tmp/ckptdiff-values-bench/, or $CKPTDIFF_BENCH_TMP; kept between runs, never committed) have
the published Kimi-K2 EAGLE-3 drafter's tensors (bf16, plus d2t/t2d), filled by repeating a 16 MiB block of
random bf16 values; B differs from A everywhere (the full statistics path) or, in the "byte copies" case, is a
copy (the equal-bytes path). Every measurement is a fresh subprocess (through run.py's launcher): wall time
spawn → exit, CPU time and peak RSS from ``os.wait4``; the "pass alone" rows time only the value pass inside
the child (imports, kernel loading and headers done before the clock starts), so start-up and throughput show
apart. ckptdiff runs the kernel it chooses by itself (the C one where it was built). The anchor is the previous
implementation, the numpy statistics, still selectable with CKPTDIFF_VALUES_KERNEL=numpy. Each tree is timed as
installed: its modules compiled to bytecode and, for ``--against``, that revision's C kernel built in its tree
(see ``as_installed``). Rounds interleave the cases. The page cache is warm (the files were just read), so `cat`
is the cost of moving the bytes and the difference is ckptdiff's arithmetic. "of cat" is throughput as a share
of cat's; "of cat, CPU" is cat's CPU seconds as a share of the case's (user + system, every thread), the
steadier figure on a shared machine. The Dask rows time the pass alone (in this process, the driver) on a
LocalCluster of 1, 2 and 4 single-threaded worker processes over an 8-shard pair of the same size, every value
differing.
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
WORK = Path(os.environ.get("CKPTDIFF_BENCH_TMP", "/tmp")) / "ckptdiff-values-bench"
#: The issue's targets (issue 22): shares of cat's throughput, a small pair in this many seconds, and Dask's
#: speed-up from one worker to two.
TARGET_OF_CAT = 0.7
TARGET_COPIES_OF_CAT = 0.9
TARGET_SMALL_SECONDS = 0.5
TARGET_DASK_SPEEDUP = 1.6
#: Rounds of the full run (medians over them): few, the machine is shared.
ROUNDS = 3
#: The Dask pair: this many shards a side, every value differing.
DASK_SHARDS = 8
DASK_WORKERS = (1, 2, 4)
ANCHOR = [shutil.which("env") or "/usr/bin/env", "CKPTDIFF_VALUES_KERNEL=numpy"]


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


#: The --values pass alone, timed inside a child that has already imported what it needs, loaded the kernels
#: (a 4-element pass) and read the headers; it writes its seconds to the file named first.
PASS_ONLY = """
import sys, time
from ckptdiff import values
from ckptdiff.sources import resolve
a, b = resolve(sys.argv[2]), resolve(sys.argv[3])
values.compare_values(a, b, [])  # imports numpy
try:  # loads the fused kernels (where this revision has them)
    from ckptdiff.values.dtypes import VALUE_TYPES
    from ckptdiff.values.fused import FusedChunks
    bf16, chunk = VALUE_TYPES["BF16"], bytearray(4)
    FusedChunks().sums(bf16, chunk, bf16, chunk, False)
except ImportError:
    pass
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


def as_installed(tree: Path, revision: str | None = None) -> None:
    """A tree of ckptdiff as ``pip install`` leaves it: its C kernel built in place (where that revision has one;
    a ``git archive`` tree has only the source) and every module compiled to bytecode. Without this each run
    would compile ~90 modules (0.08-0.1 s: this environment sets PYTHONDONTWRITEBYTECODE) and a tree from
    ``--against`` would fall back to numpy, neither of which an installed ckptdiff does."""
    kernel = tree / "ckptdiff" / "values" / "_fused.c"
    if revision is not None and kernel.is_file() and not list(kernel.parent.glob("_fused*.so")):
        script = subprocess.run(["git", "show", f"{revision}:setup.py"], cwd=ROOT, check=True, capture_output=True)
        (tree / "setup.py").write_bytes(script.stdout)
        build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
        subprocess.run(build, cwd=tree, check=True, capture_output=True)
    compile_all = [sys.executable, "-m", "compileall", "-q", str(tree / "ckptdiff")]
    subprocess.run(compile_all, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})


def inputs(quick: bool) -> tuple[Path, Path, Path, int]:
    """A, B and a byte copy of A under WORK, written once (by a child) and kept."""
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


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def run(quick: bool = False, against: str | None = None, dask: bool = True) -> list[dict[str, Any]]:
    """Rows: `cat` (the floor), --values on differing files and on byte copies (ckptdiff and the numpy anchor),
    headers only, a small pair, the pass alone; with ``against``, the --values rows again with ckptdiff at that
    git revision; unless ``quick``, Dask's pass on 1, 2 and 4 workers."""
    rounds = 1 if quick else ROUNDS
    small = str(ROOT / "fixtures" / "kimi-k2-eagle3-published")
    a, b, same, size = inputs(quick)
    as_installed(ROOT)
    subprocess.run(["cat", str(a), str(b), str(same)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    cases: dict[str, tuple[Any, int]] = {
        "cat A B > /dev/null (the floor)": (
            [shutil.which("sh") or "/bin/sh", "-c", f'cat "{a}" "{b}" > /dev/null'],
            2 * size,
        ),
        "ckptdiff A B --values (every value differs)": (ckptdiff(str(a), str(b), "--values"), 2 * size),
        "anchor (numpy statistics): A B --values": ([*ANCHOR, *ckptdiff(str(a), str(b), "--values")], 2 * size),
        "ckptdiff A A' --values (byte copies)": (ckptdiff(str(a), str(same), "--values"), 2 * size),
        "anchor (numpy statistics): A A' --values": ([*ANCHOR, *ckptdiff(str(a), str(same), "--values")], 2 * size),
        "ckptdiff A B (headers only)": (ckptdiff(str(a), str(b)), 0),
        "ckptdiff --values on a 300 KiB pair (start-up)": (ckptdiff(small, small, "--values"), 0),
        "the --values pass alone, every value differs (in-process clock)": ((a, b), 2 * size),
        "the --values pass alone, byte copies (in-process clock)": ((a, same), 2 * size),
        "anchor's pass alone, every value differs": (("numpy", a, b), 2 * size),
        "anchor's pass alone, byte copies": (("numpy", a, same), 2 * size),
    }
    if against:
        from run import checkout

        tree = checkout(against)
        as_installed(tree, against)
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
    loads: dict[str, list[str]] = {name: [] for name in cases}
    for _ in range(rounds):  # rounds interleave the cases: a noisy neighbour slows all alike
        for name, (command, _) in cases.items():
            loads[name].append(load())
            if isinstance(command, tuple):  # the pass alone
                clock = WORK / "pass-seconds"
                prefix = ANCHOR if command[0] == "numpy" else []
                files = [str(part) for part in command if isinstance(part, Path)]
                command = [*prefix, sys.executable, "-c", PASS_ONLY, str(clock), *files]
                seconds, cpu_seconds, peak = measure(command, clock)
            else:
                seconds, cpu_seconds, peak = measure(command)
            times[name].append(seconds)
            cpu[name].append(cpu_seconds)
            peaks[name].append(peak)
    rows = []
    cat = statistics.median(times[next(iter(cases))])
    cat_cpu = statistics.median(cpu[next(iter(cases))])
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
                "of_cat_cpu": round(cat_cpu / statistics.median(cpu[name]), 3) if nbytes else None,
                "peak_rss_mib": round(max(peaks[name]), 1),
                "rounds": rounds,
                "load": " ".join(loads[name]),
            }
        )
    if dask and not quick:
        rows += dask_rows(size)
    return rows


def dask_inputs(size: int) -> tuple[Path, Path]:
    """Two checkpoints of DASK_SHARDS shards (``size`` bytes a side in all), every value differing, kept."""
    folder = WORK / "dask"
    per_shard = size // DASK_SHARDS // (2 * 8192) * 8192
    tensors = [("w", "BF16", [per_shard // 8192, 8192])]
    stamp, wanted = folder / "tensors.json", json.dumps([DASK_SHARDS, tensors])
    sides = folder / "a", folder / "b"
    if not (stamp.is_file() and stamp.read_text() == wanted):
        for seed, side in enumerate(sides, start=1):
            side.mkdir(parents=True, exist_ok=True)
            weight_map = {}
            for shard in range(DASK_SHARDS):
                name = f"model-{shard + 1:05d}-of-{DASK_SHARDS:05d}.safetensors"
                shard_tensors = [(f"layers.{shard}.w", dtype, shape) for _, dtype, shape in tensors]
                write_in_child(side / name, shard_tensors, seed=seed * 100 + shard)
                weight_map.update({tensor[0]: name for tensor in shard_tensors})
            index = {"metadata": {}, "weight_map": weight_map}
            (side / "model.safetensors.index.json").write_text(json.dumps(index))
        stamp.write_text(wanted)
    return sides


def dask_rows(size: int) -> list[dict[str, Any]]:
    """The pass alone on LocalClusters of 1, 2 and 4 worker processes (one thread each), warm page cache."""
    import time

    from distributed import LocalCluster

    from ckptdiff.sources import resolve
    from ckptdiff.values import ValuesOptions, compare_values

    a_folder, b_folder = dask_inputs(size)
    subprocess.run(["sh", "-c", f'cat "{a_folder}"/* "{b_folder}"/* > /dev/null'], check=True)
    a, b = resolve(str(a_folder)), resolve(str(b_folder))
    names = sorted(a.tensors)
    nbytes = sum(a.tensors[n].nbytes + b.tensors[n].nbytes for n in names)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)  # the workers import this checkout
    rows = []
    try:
        for workers in DASK_WORKERS:
            with LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
            ) as cluster:
                options = ValuesOptions(scheduler=cluster.scheduler_address)
                compare_values(a, b, names[:workers], options=options)  # every worker loads its kernels first
                before = load()
                start = time.perf_counter()
                compare_values(a, b, names, options=options)
                seconds = time.perf_counter() - start
            rows.append(
                {
                    "case": f"Dask, {workers} worker process(es): the pass alone, {DASK_SHARDS} shard pairs",
                    "file_bytes": nbytes // 2,
                    "bytes_read": nbytes,
                    "seconds": round(seconds, 3),
                    "cpu_seconds": None,
                    "mib_per_s": round(nbytes / 2**20 / seconds, 1),
                    "of_cat": None,
                    "of_cat_cpu": None,
                    "peak_rss_mib": None,
                    "rounds": 1,
                    "load": before,
                }
            )
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return rows


def checks(rows: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The issue's targets for --values, met or not, from this run's rows."""
    by_case = {row["case"]: row for row in rows}
    differs = by_case["ckptdiff A B --values (every value differs)"]
    copies = by_case["ckptdiff A A' --values (byte copies)"]
    small = by_case["ckptdiff --values on a 300 KiB pair (start-up)"]
    out = [
        (
            f"--values end to end ≥ {TARGET_OF_CAT:.0%} of cat, every value differs ({differs['of_cat']:.0%})",
            differs["of_cat"] >= TARGET_OF_CAT,
        ),
        (
            f"--values end to end ≥ {TARGET_COPIES_OF_CAT:.0%} of cat, byte copies ({copies['of_cat']:.0%})",
            copies["of_cat"] >= TARGET_COPIES_OF_CAT,
        ),
        (
            f"--values on a small pair < {TARGET_SMALL_SECONDS} s ({small['seconds']:.2f} s)",
            small["seconds"] < TARGET_SMALL_SECONDS,
        ),
    ]
    dask = [row for row in rows if row["case"].startswith("Dask")]
    if len(dask) >= 2:
        speedup = dask[0]["seconds"] / dask[1]["seconds"]
        out.append((f"Dask: 2 workers ≥ {TARGET_DASK_SPEEDUP}× one ({speedup:.2f}×)", speedup >= TARGET_DASK_SPEEDUP))
    return out


def render(rows: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    def number(value: float | None, form: str) -> str:
        return "" if value is None else format(value, form)

    size = rows[0]["file_bytes"]
    table = [
        [
            row["case"],
            number(row["seconds"], ".2f"),
            number(row["cpu_seconds"], ".2f"),
            number(row["mib_per_s"], ".0f"),
            "" if row["of_cat"] is None else f"{100 * row['of_cat']:.0f} %",
            "" if row.get("of_cat_cpu") is None else f"{100 * row['of_cat_cpu']:.0f} %",
            number(row["peak_rss_mib"], ".0f"),
            row["load"],
        ]
        for row in rows
    ]
    head = f"two files of {size / 2**30:.2f} GiB each; median of {rows[0]['rounds']} round(s), warm page cache"
    headers = [
        "case",
        "seconds",
        "CPU s",
        "MiB/s",
        "of cat",
        "of cat, CPU",
        "peak RSS MiB",
        "load (1/5 min) each round",
    ]
    return head + "\n" + tabulate(table, headers=headers, tablefmt="github")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two 256 MiB files, one round")
    parser.add_argument("--against", metavar="REV", help="also time --values with ckptdiff at git REV")
    parser.add_argument("--no-dask", action="store_true", help="leave out the Dask rows")
    args = parser.parse_args()
    rows = run(args.quick, args.against, dask=not args.no_dask)
    print(render(rows))
    for text, ok in checks(rows):
        print(f"- {'met' if ok else 'NOT MET'}: {text}")
