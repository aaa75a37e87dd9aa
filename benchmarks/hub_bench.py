"""ckptdiff reading both sides from the Hub vs huggingface_hub's ``get_safetensors_metadata`` reading one, as processes.

    python benchmarks/hub_bench.py                  # 50 ms a request (5 rounds), 50 ms with LFS redirects, 0 ms
    python benchmarks/hub_bench.py --quick          # 50 ms a request only, 3 rounds
    python benchmarks/hub_bench.py --against main   # also ckptdiff as of another git revision (before/after)
    python benchmarks/hub_bench.py --quick --rounds 20  # more rounds: a loaded machine needs them
    python benchmarks/hub_bench.py --instructions --against main  # instructions each process runs (valgrind)
    python benchmarks/hub_bench.py --quick --pair kimi-k2 --against main  # run.py's Kimi-K2-scale pair instead

Two emulated 50-shard repos (Kimi-K2 layout, 8 experts a layer: ~100 tensors and a ~12 kB header a shard) are
served by tests/hub_emulator.py in a child process, which adds the latency to every request (it models round
trips, not bandwidth). Every measured thing is a whole process (start-up and imports included) with a cold
HF cache of its own (a fresh HF_HOME), run in turn with the others each round; the table gives medians:

- anchor: ``python -c`` running ``HfApi().get_safetensors_metadata`` on ONE side;
- floor: a plain script on httpx2 (the client huggingface_hub uses) that lists both repos, then sends every
  ranged GET both sides need (config.json, index, the first 100 kB of each shard) at once;
- ckptdiff: ``ckptdiff A B --format json -o /dev/null`` (BOTH sides, compared and reported), then again on
  the same cache ("again": a branch costs one listing call a side).

Each process's time is split in three phases, from the emulator's log (``time.monotonic()``, one clock for
every process): start-up (spawn → the first request arrives), the wave (→ the last answer is sent) and the
tail (→ the process has exited: parsing, comparing, reporting, the interpreter's exit). "CPU ms" is the
process's user + system time: on a machine whose cores are busy with other work, wall time follows it. The
spread column divides each round's time by the floor's in the same round.

``--instructions`` runs each process once more under valgrind's callgrind (no latency, a cold HF cache) and
gives the instructions it ran: a count that does not move with the neighbours' load (±2 % between runs: the
threads' interleaving), for comparing two revisions on a busy machine. It is CPU work, not time: the targets
are on time.

``--pair kimi-k2`` serves run.py's Kimi-K2-scale pair instead (61 shards, 139,583 tensors a side, ~300 kB headers,
B's byte for byte A's; ``kimi-k2-respaced``: B″, every header B's own), built under benchmarks/.work/ on first use:
how the reads scale, no target.

The targets, on the 50-shard pair at 50 ms a request: ckptdiff's both-sides time ≤ 0.55× the anchor's one-side time
(issue 15), and ≤ 1.15× the floor's both-sides time (issue 29: the median of ≥ 5 interleaved rounds).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from hub_emulator import HubEmulator  # noqa: E402

from fixtures.generate import write_kimi_k2_base  # noqa: E402

SHARDS = 50
TARGET_RATIO = 0.55
TARGET_FLOOR_RATIO = 1.15
#: (latency ms, LFS redirects, rounds); --quick keeps only the first.
SETTINGS = ((50, False, 5), (50, True, 3), (0, False, 3))
QUICK_ROUNDS = 3

ANCHOR = """
import sys
from huggingface_hub import HfApi
HfApi().get_safetensors_metadata(sys.argv[1])
"""
#: The network floor: no parsing, no cache, only the requests a comparison cannot do without, all at once.
FLOOR = """
import os, sys
from concurrent.futures import ThreadPoolExecutor
import httpx2
endpoint, repos = os.environ["HF_ENDPOINT"], sys.argv[1:]
client = httpx2.Client(limits=httpx2.Limits(max_connections=None), follow_redirects=True, timeout=30)
def get(url, **kwargs):
    response = client.get(url, **kwargs)
    response.raise_for_status()
    return response
with ThreadPoolExecutor(256) as pool:
    infos = list(pool.map(lambda repo: get(f"{endpoint}/api/models/{repo}/revision/main?blobs=true").json(), repos))
    jobs = []
    for repo, info in zip(repos, infos):
        for sibling in info["siblings"]:
            name = sibling["rfilename"]
            url = f"{endpoint}/{repo}/resolve/{info['sha']}/{name}"
            headers = {"Range": "bytes=0-99999"} if name.endswith(".safetensors") else {}
            jobs.append(pool.submit(get, url, headers=headers))
    for job in jobs:
        job.result()
"""
#: ckptdiff as of another commit (``--against REV``): that tree's package, not this checkout's installed one.
OTHER_REVISION = """
import sys
sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in repr(finder).lower()]
sys.path.insert(0, sys.argv.pop(1))
try:
    from ckptdiff._entry import main  # the command's entry, where that tree has one
except ImportError:
    from ckptdiff.cli import main
main()
"""


#: The pairs served (``--pair``): the default, and run.py's Kimi-K2-scale one as it is, or with B″.
PAIRS = ("small", "kimi-k2", "kimi-k2-respaced")


def build_repos(root: Path, pair: str = "small") -> tuple[Path, Path]:
    """Two 50-shard sparse repos (Kimi-K2 layout, 8 experts a layer: ~100 tensors and a ~12 kB header a shard), or
    run.py's full-scale Kimi-K2 pair."""
    if pair != "small":
        import run  # benchmarks/run.py, beside this file

        built = run.build_inputs(["16×"])["16×"]
        b = built.b_respaced if pair == "kimi-k2-respaced" else built.b
        assert b is not None
        return built.a, b
    a = write_kimi_k2_base(root / "a", layers=SHARDS, experts=8)
    b = write_kimi_k2_base(root / "b", layers=SHARDS, experts=8)
    return a, b


class EmulatorProcess:
    """The emulator in a child process, so its request handling does not share a GIL with anything measured."""

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

    def span(self) -> tuple[float, float]:
        """When the first request since the last reset arrived and when the last answer was sent."""
        return self._ask("span")

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
        elif command == "span":
            log = list(emulator.log)
            conn.send((min(e.started for e in log), max(e.finished for e in log)) if log else (0.0, 0.0))
            continue
        elif command == "stop":
            emulator.stop()
            conn.send(None)
            return
        conn.send(None)


@dataclass
class Command:
    label: str
    argv: list[str]
    warm: bool = False  # reuse the previous command's HF_HOME instead of a fresh one
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # user + system seconds, per round
    #: per round: spawn → first request, first request → last answer, last answer → exit
    phases: list[tuple[float, float, float]] = field(default_factory=list)
    requests: int = 0
    sent: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def phase_medians(self) -> tuple[float, float, float]:
        return tuple(statistics.median(phase) for phase in zip(*self.phases))  # type: ignore[return-value]


def environment(endpoint: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PYTHON", "HUGGING"))}
    env.update(
        PYTHONPATH=str(ROOT),
        HF_ENDPOINT=endpoint,
        HF_HOME=str(home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_IMPLICIT_TOKEN="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    return env


def measure_once(emulator: EmulatorProcess, command: Command, home: Path) -> None:
    """Run the command once as a process: wall time from spawn to exit, its phases, and the requests it made."""
    emulator.reset_counters()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        command.argv,
        env=environment(emulator.endpoint, home),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    end = time.monotonic()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"benchmark command failed ({done.returncode}): {command.label}\n{done.stderr[-2000:]}")
    command.seconds.append(end - start)
    command.cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    command.requests, command.sent = emulator.counters()
    first, last = emulator.span()
    command.phases.append((first - start, last - first, end - last))


def commands(against: str | None) -> list[Command]:
    ckptdiff = [sys.executable, "-m", "ckptdiff", "bench/a", "bench/b", "--format", "json", "-o", "/dev/null"]
    listed = [
        Command("anchor: get_safetensors_metadata, 1 side", [sys.executable, "-c", ANCHOR, "bench/a"]),
        Command("floor: httpx2, 2 sides at once", [sys.executable, "-c", FLOOR, "bench/a", "bench/b"]),
        Command("ckptdiff A B, 2 sides", ckptdiff),
        Command("ckptdiff A B again (warm cache)", ckptdiff, warm=True),
    ]
    if against:
        tree = str(checkout(against))
        before = [sys.executable, "-c", OTHER_REVISION, tree, *ckptdiff[3:]]
        listed.insert(2, Command(f"ckptdiff at {against}, 2 sides", before))  # "again" reuses the run before it
    return listed


def checkout(revision: str) -> Path:
    """This repository's ckptdiff package at ``revision`` (git archive), under benchmarks/.work/."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    folder = ROOT / "benchmarks" / ".work" / f"tree-{commit[:12]}"
    if not (folder / "ckptdiff" / "cli.py").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit, "ckptdiff"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def run_setting(
    emulator: EmulatorProcess, scratch: Path, latency_ms: int, redirect: bool, rounds: int, against: str | None
) -> dict[str, Any]:
    """Each round runs every command once, in turn, so load on a shared machine hits all of them alike."""
    emulator.set_latency(latency_ms / 1000)
    listed = commands(against)
    for attempt in range(rounds):
        home = scratch
        for number, command in enumerate(listed):
            if not command.warm:
                home = Path(tempfile.mkdtemp(prefix=f"run-{attempt}-{number}-", dir=scratch))
            measure_once(emulator, command, home)
    anchor, floor = listed[0].median, listed[1].median
    return {
        "latency_ms": latency_ms,
        "lfs_redirect": redirect,
        "rounds": rounds,
        "load": os.getloadavg()[0],
        "commands": [
            dict(
                label=c.label,
                median=c.median,
                min=min(c.seconds),
                ratio=c.median / anchor,
                floor_ratio=c.median / floor,
                round_ratios=_round_ratios(c.seconds, listed[1].seconds),
                phases=c.phase_medians(),
                cpu=statistics.median(c.cpu),
                requests=c.requests,
                bytes=c.sent,
            )
            for c in listed
        ],
    }


def _round_ratios(seconds: list[float], floor: list[float]) -> tuple[float, float, float]:
    """The spread: each round's time over the floor's in the same round (min, median, max)."""
    ratios = [mine / theirs for mine, theirs in zip(seconds, floor, strict=True)]
    return min(ratios), statistics.median(ratios), max(ratios)


def run(
    quick: bool = False, against: str | None = None, rounds: int | None = None, pair: str = "small"
) -> list[dict[str, Any]]:
    """One row per setting; ``quick``: 50 ms a request, no redirects, 3 rounds; ``rounds``: that many in each."""
    settings = ((SETTINGS[0][0], SETTINGS[0][1], QUICK_ROUNDS),) if quick else SETTINGS
    if rounds is not None:
        settings = tuple((latency, redirect, rounds) for latency, redirect, _ in settings)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckptdiff-hub-bench-") as scratch:
        root = Path(scratch)
        a, b = build_repos(root / "repos", pair)
        for redirect in sorted({redirect for _, redirect, _ in settings}):
            emulator = EmulatorProcess({"bench/a": a, "bench/b": b}, lfs_redirect=redirect)
            try:
                run_setting(emulator, root, 0, redirect, 1, None)  # page cache, .pyc files: not counted
                for latency, setting_redirect, rounds in settings:
                    if setting_redirect == redirect:
                        rows.append(run_setting(emulator, root, latency, redirect, rounds, against))
            finally:
                emulator.stop()
    order = {(latency, redirect): n for n, (latency, redirect, _) in enumerate(settings)}
    return sorted(rows, key=lambda row: order[(row["latency_ms"], row["lfs_redirect"])])


def render(rows: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    parts = []
    for row in rows:
        redirect = ", LFS files through a 302 to the CDN" if row["lfs_redirect"] else ""
        parts.append(
            f"{row['latency_ms']} ms a request{redirect}; medians of {row['rounds']} rounds; "
            f"load average {row['load']:.1f} at the end"
        )
        table = [
            [
                c["label"],
                f"{c['median']:.3f}",
                f"{c['min']:.3f}",
                f"{c['ratio']:.2f}",
                f"{c['floor_ratio']:.2f}",
                "–".join(f"{ratio:.2f}" for ratio in c["round_ratios"]),
                *(f"{1000 * phase:.0f}" for phase in c["phases"]),
                f"{1000 * c['cpu']:.0f}",
                c["requests"],
                f"{c['bytes'] / 1e6:.2f}",
            ]
            for c in row["commands"]
        ]
        headers = [
            "process",
            "median s",
            "min s",
            "× anchor",
            "× floor",
            "× floor by round (min–median–max)",
            "start-up ms",
            "wave ms",
            "tail ms",
            "CPU ms",
            "requests",
            "MB sent",
        ]
        parts.append(tabulate(table, headers=headers, disable_numparse=True))
        parts.append("")
    return "\n".join(parts).rstrip()


def checks(rows: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The issues' targets, on the 50 ms row without redirects: against the anchor, and against the floor."""
    row = next(r for r in rows if r["latency_ms"] == 50 and not r["lfs_redirect"])
    ours = next(c for c in row["commands"] if c["label"].startswith("ckptdiff A B, 2 sides"))
    floor = next(c for c in row["commands"] if c["label"].startswith("floor"))
    against_anchor = (
        f"Hub, 2 sides ≤ {TARGET_RATIO}× the anchor's 1 side at 50 ms a request ({ours['ratio']:.2f}×; "
        f"the httpx2 floor: {floor['ratio']:.2f}×)"
    )
    against_floor = f"Hub, 2 sides ≤ {TARGET_FLOOR_RATIO:.2f}× the httpx2 floor's 2 sides ({ours['floor_ratio']:.2f}×)"
    return [
        (against_anchor, ours["ratio"] <= TARGET_RATIO),
        (against_floor, ours["floor_ratio"] <= TARGET_FLOOR_RATIO),
    ]


def count_instructions(against: str | None, runs: int) -> list[tuple[str, list[int]]]:
    """Each process's instruction count under callgrind (valgrind), ``runs`` times, at 0 ms a request."""
    import re

    counted = []
    with tempfile.TemporaryDirectory(prefix="ckptdiff-hub-bench-") as scratch:
        root = Path(scratch)
        a, b = build_repos(root / "repos")
        emulator = EmulatorProcess({"bench/a": a, "bench/b": b}, lfs_redirect=False)
        try:
            listed = [c for c in commands(against) if not c.warm]
            totals: dict[str, list[int]] = {c.label: [] for c in listed}
            for _ in range(runs):
                for command in listed:
                    home = Path(tempfile.mkdtemp(prefix="count-", dir=root))
                    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command.argv]
                    done = subprocess.run(
                        argv, env=environment(emulator.endpoint, home), cwd=ROOT, capture_output=True, text=True
                    )
                    found = re.search(r"Collected : (\d+)", done.stderr)
                    if done.returncode not in (0, 1) or found is None:
                        raise SystemExit(f"callgrind run failed: {command.label}\n{done.stderr[-2000:]}")
                    totals[command.label].append(int(found.group(1)))
            counted = list(totals.items())
        finally:
            emulator.stop()
    return counted


def render_instructions(counted: list[tuple[str, list[int]]]) -> str:
    from tabulate import tabulate

    floor = statistics.median(next(counts for label, counts in counted if label.startswith("floor")))
    table = [
        [label, ", ".join(f"{n / 1e6:,.0f}" for n in counts), f"{statistics.median(counts) / floor:.3f}"]
        for label, counts in counted
    ]
    return tabulate(table, headers=["process", "M instructions (each run)", "× floor"], disable_numparse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only 50 ms a request, no redirects, 3 rounds")
    parser.add_argument("--against", metavar="REV", help="also time ckptdiff as of git REV (before/after)")
    parser.add_argument("--rounds", type=int, metavar="N", help="N rounds in every setting")
    parser.add_argument("--instructions", action="store_true", help="instructions each process runs (valgrind)")
    parser.add_argument("--pair", choices=PAIRS, default="small", help="run.py's Kimi-K2-scale pair instead")
    args = parser.parse_args()
    if args.instructions:
        print(render_instructions(count_instructions(args.against, args.rounds or 2)))
        return
    rows = run(quick=args.quick, against=args.against, rounds=args.rounds, pair=args.pair)
    served = f"Two {SHARDS}-shard repos" if args.pair == "small" else f"The {args.pair} pair (run.py's)"
    print(
        f"{served} on tests/hub_emulator.py; whole processes, cold HF cache each; "
        "× anchor, × floor = median time / that process's median time; phases are medians too."
    )
    print(render(rows))
    for text, ok in checks(rows) if args.pair == "small" else ():
        print(f"- {'met' if ok else 'NOT met'}: {text}")


if __name__ == "__main__":
    main()
