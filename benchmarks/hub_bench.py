"""ckptdiff's Hub reader vs huggingface_hub's ``get_safetensors_metadata`` on the same emulated 50-shard repos.

    python benchmarks/hub_bench.py            # 0/20/50 ms per request, with and without LFS redirects
    python benchmarks/hub_bench.py --quick    # 50 ms, no redirects

The anchor reads one side (``HfApi().get_safetensors_metadata``); ckptdiff reads both sides of a comparison
(``ckptdiff.sources.resolve_both``, what the CLI does before comparing, on two different 50-shard repos),
each from a cold HF cache; every setting is run 3 times and the best time kept (the machine is shared).
The emulator (tests/hub_emulator.py) runs in a child process and adds the latency to every request, so it
models round trips, not bandwidth. It counts requests and bytes; ``warm`` is ckptdiff's second run on the branch.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from hub_emulator import HubEmulator  # noqa: E402

from fixtures.generate import write_kimi_k2_base  # noqa: E402

SHARDS = 50
DEFAULT_JOBS = 8  # the CLI's --jobs default
WIDE_JOBS = 32
LATENCIES_MS = (0, 20, 50)


def build_repos(root: Path) -> tuple[Path, Path]:
    """Two 50-shard sparse repos (Kimi-K2 layout, 8 experts a layer: ~100 tensors and a ~12 kB header a shard)."""
    a = write_kimi_k2_base(root / "a", layers=SHARDS, experts=8)
    b = write_kimi_k2_base(root / "b", layers=SHARDS, experts=8)
    return a, b


class EmulatorProcess:
    """The emulator in a child process, so its request handling does not share this process's GIL."""

    def __init__(self, repos: dict[str, Path], *, lfs_redirect: bool) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, repos, lfs_redirect), daemon=True)
        self._process.start()
        self.endpoint: str = self._conn.recv()

    def _ask(self, *command: Any) -> Any:
        self._conn.send(command)
        return self._conn.recv()

    def set_latency(self, seconds: float) -> None:
        self._ask("latency", seconds)

    def reset_counters(self) -> None:
        self._ask("reset")

    def counters(self) -> tuple[int, int]:
        return self._ask("counters")

    def stop(self) -> None:
        self._ask("stop")
        self._process.join(timeout=10)


def _serve(conn: Any, repos: dict[str, Path], lfs_redirect: bool) -> None:
    emulator = HubEmulator(lfs_redirect=lfs_redirect).start()
    for repo_id, folder in repos.items():
        emulator.add_repo(repo_id, folder)
    conn.send(emulator.endpoint)
    while True:
        command, *args = conn.recv()
        if command == "latency":
            emulator.latency = args[0]
        elif command == "reset":
            emulator.reset_counters()
        elif command == "counters":
            conn.send((emulator.total_requests, emulator.total_bytes))
            continue
        elif command == "stop":
            emulator.stop()
            conn.send(None)
            return
        conn.send(None)


@contextlib.contextmanager
def client_for(endpoint: str, home: Path) -> Iterator[None]:
    """Point the in-process huggingface_hub at the emulator with a fresh cache (it reads env only at import)."""
    from huggingface_hub import constants

    values = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": True,
    }
    saved = {name: getattr(constants, name) for name in values}
    for name, value in values.items():
        setattr(constants, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(constants, name, value)


def _measure(emulator: EmulatorProcess, home: Path, action: Callable[[], object]) -> dict[str, Any]:
    with client_for(emulator.endpoint, home):
        emulator.reset_counters()
        start = time.perf_counter()
        action()
        seconds = time.perf_counter() - start
    requests, sent = emulator.counters()
    return {"seconds": seconds, "requests": requests, "bytes": sent}


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda run: run["seconds"])


def run_setting(emulator: EmulatorProcess, scratch: Path, latency_ms: int, redirect: bool, repeats: int) -> dict:
    from huggingface_hub import HfApi

    from ckptdiff.sources import SourceOptions, resolve_both

    emulator.set_latency(latency_ms / 1000)
    name = f"{latency_ms}ms-{'cdn' if redirect else 'direct'}"
    anchor, cold, cold_wide, warm = [], [], [], []
    for attempt in range(repeats):
        anchor.append(_measure(emulator, scratch / f"anchor-{name}-{attempt}",
                               lambda: HfApi().get_safetensors_metadata("bench/a")))  # fmt: skip
        for jobs, runs in ((DEFAULT_JOBS, cold), (WIDE_JOBS, cold_wide)):
            home = scratch / f"ckptdiff-{name}-{jobs}-{attempt}"
            both = lambda jobs=jobs: resolve_both("bench/a", "bench/b", SourceOptions(jobs=jobs))  # noqa: E731
            runs.append(_measure(emulator, home, both))
            if jobs == DEFAULT_JOBS:
                warm.append(_measure(emulator, home, both))
    best_anchor, best_cold, best_wide = _best(anchor), _best(cold), _best(cold_wide)
    return {
        "latency_ms": latency_ms,
        "lfs_redirect": redirect,
        "shards": SHARDS,
        "repeats": repeats,
        "anchor_one_side": best_anchor,
        "ckptdiff_both_sides": best_cold,
        f"ckptdiff_both_sides_jobs_{WIDE_JOBS}": best_wide,
        "ckptdiff_warm": _best(warm),
        "ratio": best_cold["seconds"] / best_anchor["seconds"],
        f"ratio_jobs_{WIDE_JOBS}": best_wide["seconds"] / best_anchor["seconds"],
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    """One row per setting (latency × redirect), best of 3 runs each; ``quick``: 50 ms, no redirects, one run."""
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # the anchor draws one per repo
    redirects = (False,) if quick else (False, True)
    latencies = (50,) if quick else LATENCIES_MS
    repeats = 1 if quick else 3
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckptdiff-hub-bench-") as scratch:
        root = Path(scratch)
        a, b = build_repos(root / "repos")
        for redirect in redirects:
            emulator = EmulatorProcess({"bench/a": a, "bench/b": b}, lfs_redirect=redirect)
            try:
                run_setting(emulator, root / "warmup", 0, redirect, 1)  # imports, first connections: not counted
                for latency in latencies:
                    rows.append(run_setting(emulator, root, latency, redirect, repeats))
            finally:
                emulator.stop()
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    def cell(run: dict[str, Any]) -> str:
        return f"{run['seconds']:.3f} s, {run['requests']} req, {run['bytes'] / 1e6:.2f} MB"

    table = [
        [
            f"{row['latency_ms']} ms",
            "yes" if row["lfs_redirect"] else "no",
            cell(row["anchor_one_side"]),
            cell(row["ckptdiff_both_sides"]),
            f"{row['ratio']:.2f}",
            f"{row[f'ckptdiff_both_sides_jobs_{WIDE_JOBS}']['seconds']:.3f} s",
            f"{row[f'ratio_jobs_{WIDE_JOBS}']:.2f}",
            f"{row['ckptdiff_warm']['seconds']:.3f} s, {row['ckptdiff_warm']['requests']} req",
        ]
        for row in rows
    ]
    headers = ["latency", "LFS 302", "anchor: 1 side", f"ckptdiff: 2 sides (--jobs {DEFAULT_JOBS})", "ratio",
               f"--jobs {WIDE_JOBS}", "ratio", "ckptdiff again"]  # fmt: skip
    return tabulate(table, headers=headers, disable_numparse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only 50 ms per request, no redirects, one run")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print(f"{SHARDS}-shard repos; anchor = huggingface_hub.HfApi().get_safetensors_metadata (one side);")
    print("ckptdiff = resolve_both on two such repos (both sides), cold HF cache; ratio = ckptdiff time / anchor time;")
    print("'again' = the same ckptdiff run repeated on the branch (1 request a side). Best of 3 runs each.")
    print(render(rows))


if __name__ == "__main__":
    main()
