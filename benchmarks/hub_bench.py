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
    anchor, cold, warm = [], [], []
    for attempt in range(repeats):
        anchor.append(_measure(emulator, scratch / f"anchor-{name}-{attempt}",
                               lambda: HfApi().get_safetensors_metadata("bench/a")))  # fmt: skip
        home = scratch / f"ckptdiff-{name}-{attempt}"
        both = lambda: resolve_both("bench/a", "bench/b", SourceOptions())  # noqa: E731
        cold.append(_measure(emulator, home, both))
        warm.append(_measure(emulator, home, both))
    best_anchor, best_cold = _best(anchor), _best(cold)
    return {
        "latency_ms": latency_ms,
        "lfs_redirect": redirect,
        "shards": SHARDS,
        "repeats": repeats,
        "anchor_one_side": best_anchor,
        "ckptdiff_both_sides": best_cold,
        "ckptdiff_warm": _best(warm),
        "ratio": best_cold["seconds"] / best_anchor["seconds"],
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

    table = []
    for row in rows:
        anchor, cold, warm = row["anchor_one_side"], row["ckptdiff_both_sides"], row["ckptdiff_warm"]
        table.append([
            f"{row['latency_ms']} ms", "yes" if row["lfs_redirect"] else "no",
            f"{anchor['seconds']:.3f} s", anchor["requests"], f"{anchor['bytes'] / 1e6:.2f} MB",
            f"{cold['seconds']:.3f} s", cold["requests"], f"{cold['bytes'] / 1e6:.2f} MB",
            f"{row['ratio']:.2f}", f"{warm['seconds']:.3f} s / {warm['requests']} req",
        ])  # fmt: skip
    headers = ["latency", "LFS 302", "anchor: 1 side", "req", "bytes", "ckptdiff: 2 sides", "req", "bytes",
               "ratio", "ckptdiff warm"]  # fmt: skip
    return tabulate(table, headers=headers, disable_numparse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only 50 ms per request, no redirects")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print(f"{SHARDS}-shard repos; anchor = huggingface_hub.HfApi().get_safetensors_metadata (one side);")
    print("ckptdiff = resolve_both on two such repos (both sides); ratio = ckptdiff time / anchor time")
    print(render(rows))


if __name__ == "__main__":
    main()
