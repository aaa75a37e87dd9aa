"""--values --scheduler where the network is the limit: each Dask worker in its own namespace, behind a shaped link.

The workers copy an s3:// pair's shards from moto's S3 server (or download a Hub pair from the repo's Hub
emulator), each over its own link.

    sudo python benchmarks/dask_bench.py           # 16 shards of 32 MiB a side, 100 Mbit/s a worker, 2 rounds (~10 min)
    sudo python benchmarks/dask_bench.py --source hub                         # the same pair as two Hub repos
    sudo python benchmarks/dask_bench.py --rounds 1 --workers 1,2 --shards 8   # ~3 min

What runs, all on this machine and all removed on exit (Ctrl-C and failures included):

- moto's S3 server (``ThreadedMotoServer``, as tests/store_servers.py starts it) in a process of its own in the
  root network namespace, holding A and B: SHARDS safetensors shards a side (bf16, every value differing) with an
  index and a config.json; with ``--source hub``, tests/hub_emulator.py serving A and B as two repos;
- for each worker count n (1, 2, 4): a Dask scheduler in the root namespace and n single-threaded workers
  (``--nthreads 1 --no-nanny``), each in its own network namespace, joined to the root one by a veth pair whose
  two ends ``tc`` shapes with a token bucket (tbf) at RATE Mbit/s. A worker reaches the scheduler and the store
  only over its link: its AWS endpoint (or HF_ENDPOINT) is the store's address on its link, and the Hub files it
  downloads go to an HF cache of its own, emptied before every case. Each worker's memory, page cache
  included, is capped by a memory cgroup (``--worker-memory-mib``, under the pair's size), so no worker can hold
  the pair in a cache of its own;
- the driver, the real CLI as a subprocess in the root namespace:
  ``ckptdiff s3://BUCKET/a s3://BUCKET/b --values --scheduler tcp://127.0.0.1:PORT --format json``. It reads the
  headers from the store over loopback (not shaped); the workers copy the shards over their links.

Before timing, every worker loads the fused kernel, s3fs and huggingface_hub once (a warm-up task), so the rounds
time the pass, not first imports. Each round runs every case once, in a rotated order: the command with 1, 2 and 4
workers, the same command without ``--values`` (headers only: subtracted from the others to give the pass), and
``ckptdiff A B --values`` on the local files. Throughput is the pair's bytes (both sides) over the pass; "of the
links" is it over n × RATE. CPU seconds are summed over the workers, the store and the driver, to show whether a CPU
was the limit. The JSON reports must be equal across worker counts and, once the sides' names, kinds and revisions
are put aside, equal to the local run's.

Needs, outside Python: Linux, root (network namespaces, veth, tc, cgroups: benchmarks/shaped_links.py), iproute2
(``ip``, ``tc`` with the tbf qdisc), and a cgroup memory controller (v1 or v2) unless ``--worker-memory-mib 0``.
Python: the ``dask`` and ``dev`` extras (distributed, moto[server], s3fs, boto3, numpy). A benchmark: neither CI nor
run.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.generate import header_bytes  # noqa: E402

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from shaped_links import (  # noqa: E402
    Started,
    cpu_seconds,
    free_port,
    make_link,
    memory_cgroup,
    peak_memory_mib,
    remove_leftovers,
    signals_end_the_run,
    start,
)

WORK = Path(os.environ.get("CKPTDIFF_BENCH_TMP", "/tmp")) / "ckptdiff-dask-bench"
BUCKET = "ckptdiff-dask-bench"
#: The issue's target (issue 22): two workers at least this many times one.
TARGET_SPEEDUP = 1.6
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "bench-secret-for-moto-only",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
#: Columns of each shard's tensors (bf16), two tensors a shard.
COLUMNS = 4096
MOTO = (
    "import sys, time\n"
    "from moto.server import ThreadedMotoServer\n"
    "server = ThreadedMotoServer(ip_address='0.0.0.0', port=0, verbose=False)\n"
    "server.start()\n"
    "print(server.get_host_and_port()[1], flush=True)\n"
    "time.sleep(10**9)\n"
)


@dataclass
class Settings:
    rate_mbit: int
    shards: int
    shard_mib: int
    rounds: int
    workers: tuple[int, ...]
    memory_mib: int
    source: str = "s3"  # "s3": moto; "hub": tests/hub_emulator.py


# --- the pair ----------------------------------------------------------------------------------------------------


def write_side(folder: Path, settings: Settings, seed: int) -> int:
    """SHARDS shards of two bf16 tensors each, filled with a 16 MiB block of random values repeated."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rows = settings.shard_mib * 2**20 // 2 // (2 * COLUMNS)
    floats = np.random.default_rng(seed).standard_normal(8 * 2**20, dtype=np.float32)
    block = (floats.view(np.uint32) >> 16).astype("<u2").tobytes()  # bf16: each float32's top half
    weight_map, total = {}, 0
    for shard in range(settings.shards):
        name = f"model-{shard + 1:05d}-of-{settings.shards:05d}.safetensors"
        tensors = [(f"layers.{shard}.{part}.weight", "BF16", [rows, COLUMNS]) for part in ("up", "down")]
        prefix, length = header_bytes(tensors, {"format": "pt"})
        with open(folder / name, "wb") as handle:
            handle.write(prefix)
            for low in range(0, length, len(block)):
                handle.write(block[: min(len(block), length - low)])
        weight_map.update({tensor[0]: name for tensor in tensors})
        total += len(prefix) + length
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": COLUMNS}))
    return total


def pair_files(settings: Settings) -> tuple[Path, Path, int]:
    """A and B under WORK (kept between runs of the same shape)."""
    shape = f"{settings.shards}x{settings.shard_mib}MiB"
    a, b = WORK / shape / "a", WORK / shape / "b"
    done = WORK / shape / "sizes.json"
    if not done.exists():
        sizes = [write_side(a, settings, seed=1), write_side(b, settings, seed=2)]
        done.write_text(json.dumps(sizes))
    return a, b, sum(json.loads(done.read_text()))


# --- the store, the links, the clusters --------------------------------------------------------------------------


#: The pair's specs, as the driver and the workers name them.
SPECS = {"s3": (f"s3://{BUCKET}/a", f"s3://{BUCKET}/b"), "hub": ("bench/run-a", "bench/run-b")}


def start_store(started: Started, source: str, a: Path, b: Path) -> tuple[int, subprocess.Popen[bytes]]:
    """moto (A and B uploaded into it) or the Hub emulator (serving A and B), on every address of the root
    namespace: (its port, its process)."""
    if source == "hub":
        command = [sys.executable, str(ROOT / "tests" / "hub_emulator.py"), "--host", "0.0.0.0"]
        command += [f"{SPECS['hub'][0]}={a}", f"{SPECS['hub'][1]}={b}"]
        hub = start(started, command, dict(os.environ), stdout=subprocess.PIPE)
        assert hub.stdout is not None
        while not (line := hub.stdout.readline().decode()).startswith("export HF_ENDPOINT="):
            if not line:
                raise SystemExit("dask_bench: the Hub emulator did not start")
        return int(line.rsplit(":", 1)[1]), hub
    import boto3

    quiet = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}  # werkzeug logs every request on stderr
    store = start(started, [sys.executable, "-c", MOTO], dict(os.environ), **quiet)
    assert store.stdout is not None
    port = int(store.stdout.readline())
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", **_boto_credentials())
    client.create_bucket(Bucket=BUCKET)
    for side, folder in (("a", a), ("b", b)):
        for path in sorted(folder.iterdir()):
            client.upload_file(str(path), BUCKET, f"{side}/{path.name}")
    return port, store


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


@dataclass
class Cluster:
    workers: int
    port: int
    scheduler: subprocess.Popen[bytes]
    processes: list[subprocess.Popen[bytes]]
    cgroups: list[Path | None]

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"


def server_env(address: str, port: int, hf_home: Path) -> dict[str, str]:
    """The environment that points the AWS chain, or huggingface_hub, at the store on ``address``."""
    return {
        **CREDENTIALS,
        "AWS_ENDPOINT_URL": f"http://{address}:{port}",
        "HF_ENDPOINT": f"http://{address}:{port}",
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    }


def start_cluster(started: Started, workers: int, first_index: int, store_port: int, settings: Settings) -> Cluster:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler_command = ["-m", "distributed.cli.dask_scheduler", "--host", "0.0.0.0", "--port", str(port)]
    scheduler = start(started, [sys.executable, *scheduler_command, "--no-dashboard"], env, **quiet)
    processes, cgroups = [], []
    for index in range(first_index, first_index + workers):
        namespace, host, address = make_link(started, index, settings.rate_mbit)
        folder = WORK / "workers" / f"w{index}"
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "tmp").mkdir(parents=True)
        # the store, over this worker's link only; a store's copies go to TMPDIR, the Hub's to HF_HOME
        worker_env = {**env, **server_env(host, store_port, folder / "hf"), "TMPDIR": str(folder / "tmp")}
        command = ["ip", "netns", "exec", namespace, sys.executable, "-m", "distributed.cli.dask_worker"]
        command += [f"tcp://{host}:{port}", "--nthreads", "1", "--no-nanny", "--host", address, "--no-dashboard"]
        command += ["--memory-limit", "0", "--local-directory", str(folder), "--name", f"w{index}"]
        process = start(started, command, worker_env, **quiet)
        cgroup = memory_cgroup(started, index, settings.memory_mib)
        if cgroup is not None:  # `ip netns exec` execs the worker: the same process, moved before it loads much
            (cgroup / "cgroup.procs").write_text(str(process.pid))
        processes.append(process)
        cgroups.append(cgroup)
    return Cluster(workers, port, scheduler, processes, cgroups)


def warm_up() -> int:
    """On a worker: load what a task loads (the fused kernel, s3fs, huggingface_hub), so the rounds time the pass."""
    import huggingface_hub  # noqa: F401
    import s3fs  # noqa: F401

    from ckptdiff.values.dtypes import VALUE_TYPES
    from ckptdiff.values.fused import FusedChunks

    kind = VALUE_TYPES["BF16"]
    FusedChunks().sums(kind, bytearray(4096), kind, bytearray(b"\x01") * 4096, False)
    return os.getpid()


def wait_ready(cluster: Cluster) -> None:
    from distributed import Client

    with Client(cluster.address, timeout="60s") as client:
        client.wait_for_workers(cluster.workers, timeout=120)
        client.run(warm_up)


# --- measuring ---------------------------------------------------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str], output: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``python -m ckptdiff ARGS -o OUTPUT`` in a fresh process."""
    command = [sys.executable, "-m", "ckptdiff", *args, "--format", "json", "-q", "-o", str(output)]
    begin = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE)
    assert process.stderr is not None
    try:
        stderr = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:  # Ctrl-C, a signal: the run ends with this command
        process.kill()
        process.wait()
        raise
    seconds = time.perf_counter() - begin
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"dask_bench: {' '.join(args)}: exit {process.returncode}: {stderr.decode().strip()}")
    return seconds, usage.ru_utime + usage.ru_stime


def report_of(path: Path, names: dict[str, str]) -> dict[str, Any]:
    """A JSON report without the command, the sides' names replaced by A and B, and where each side was found
    (``kind``, ``etag``: a store's object against a local folder) left out of its description."""
    text = path.read_text()
    for name, label in names.items():
        text = text.replace(name, label)
    report: dict[str, Any] = json.loads(text)
    report.pop("command", None)
    for side in ("a", "b"):
        for key in ("kind", "etag", "revision"):
            report[side].pop(key, None)
    return report


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def run(settings: Settings) -> dict[str, Any]:
    a, b, pair_bytes = pair_files(settings)
    remove_leftovers()
    started = Started()
    with signals_end_the_run():
        try:
            return measure(settings, started, a, b, pair_bytes)
        finally:
            started.close()
            shutil.rmtree(WORK / "workers", ignore_errors=True)


def measure(settings: Settings, started: Started, a: Path, b: Path, pair_bytes: int) -> dict[str, Any]:
    store_port, store = start_store(started, settings.source, a, b)
    clusters, index = {}, 1
    for workers in settings.workers:
        clusters[workers] = start_cluster(started, workers, index, store_port, settings)
        index += workers
    for cluster in clusters.values():
        wait_ready(cluster)
    driver_home = WORK / "driver-hf"
    driver_env = {**os.environ, "PYTHONPATH": str(ROOT), **server_env("127.0.0.1", store_port, driver_home)}
    remote = list(SPECS[settings.source])
    names = {remote[0]: "A", remote[1]: "B", str(a): "A", str(b): "B"}
    out = WORK / "reports"
    out.mkdir(parents=True, exist_ok=True)
    cases: list[str | int] = ["headers", *settings.workers, "local"]
    times: dict[str | int, list[float]] = {case: [] for case in cases}
    cpu: dict[str | int, list[dict[str, float]]] = {case: [] for case in cases}
    reports: dict[str | int, dict[str, Any]] = {}
    loads = [load()]
    for round_number in range(settings.rounds):
        turn = round_number % len(cases)
        for case in cases[turn:] + cases[:turn]:
            output = out / f"{case}.json"
            for folder in [driver_home, *(WORK / "workers").glob("w*/hf")]:  # no Hub download kept between cases
                shutil.rmtree(folder, ignore_errors=True)
            if case == "local":
                args = [str(a), str(b), "--values"]
            elif case == "headers":
                args = remote
            else:
                args = [*remote, "--values", "--scheduler", clusters[int(case)].address]
            watched = {"store": store}
            if isinstance(case, int):
                watched.update({f"worker {i}": p for i, p in enumerate(clusters[case].processes)})
            before = {name: cpu_seconds(process) for name, process in watched.items()}
            seconds, driver_cpu = run_cli(args, driver_env, output)
            spent = {name: cpu_seconds(process) - before[name] for name, process in watched.items()}
            times[case].append(seconds)
            cpu[case].append({"driver": driver_cpu, **spent})
            if case != "headers":
                reports[case] = report_of(output, names)
            for cluster in clusters.values():
                if any(process.poll() is not None for process in cluster.processes):
                    raise SystemExit(f"dask_bench: a worker of the {cluster.workers}-worker cluster died")
            print(f"round {round_number + 1} {case}: {seconds:.2f} s (load {load()})", file=sys.stderr)
        loads.append(load())
    peaks = {workers: [peak_memory_mib(cgroup) for cgroup in cluster.cgroups] for workers, cluster in clusters.items()}
    return {
        "settings": settings.__dict__,
        "pair_bytes": pair_bytes,
        "times": {str(case): values for case, values in times.items()},
        "cpu": {str(case): values for case, values in cpu.items()},
        "same_across_workers": all(reports[w] == reports[settings.workers[0]] for w in settings.workers),
        "same_as_local": all(reports[w] == reports["local"] for w in settings.workers),
        "worker_peak_mib": {str(workers): values for workers, values in peaks.items()},
        "loads": loads,
    }


# --- the table ---------------------------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    settings, times, cpu = result["settings"], result["times"], result["cpu"]
    headers = statistics.median(times["headers"])
    pair_mb = result["pair_bytes"] / 1e6
    passes = {w: statistics.median(times[str(w)]) - headers for w in settings["workers"]}
    one = passes.get(1)
    lines = [
        f"{settings['source']} pair: {settings['shards']} shards of {settings['shard_mib']} MiB a side, "
        f"{pair_mb / 1000:.2f} GB in all; "
        f"links {settings['rate_mbit']} Mbit/s each; worker memory cap {settings['memory_mib'] or 'none'} MiB; "
        f"{settings['rounds']} round(s), medians; load average {' → '.join(result['loads'])}",
        "",
        "| case | command s | pass s | MB/s | × 1 worker | of the links | CPU s: workers / store / driver |",
        "|------|----------:|-------:|-----:|-----------:|-------------:|--------------------------------:|",
    ]
    for case in ["headers", *settings["workers"], "local"]:
        seconds = statistics.median(times[str(case)])
        spent = cpu[str(case)]
        workers_cpu = statistics.median(sum(v for k, v in c.items() if k.startswith("worker")) for c in spent)
        store_cpu = statistics.median(c.get("store", 0.0) for c in spent)
        driver_cpu = statistics.median(c["driver"] for c in spent)
        if case == "headers":
            label, rest = f"`ckptdiff {' '.join(SPECS[settings['source']])}` (headers only)", "| | | |"
        elif case == "local":
            label, rest = "`ckptdiff A B --values` (local files, threads)", "| | | |"
        else:
            pass_s = passes[case]
            rate = pair_mb / pass_s
            links = rate * 8 / (case * settings["rate_mbit"])
            ratio = f"{one / pass_s:.2f}×" if one else ""
            label = f"`--values --scheduler`, {case} worker{'s' if case > 1 else ''}"
            rest = f"{pass_s:.1f} | {rate:.0f} | {ratio} | {links:.0%} |"
        lines.append(f"| {label} | {seconds:.1f} | {rest} {workers_cpu:.1f} / {store_cpu:.1f} / {driver_cpu:.1f} |")
    lines.append("")
    lines.append(
        f"JSON equal across worker counts: {result['same_across_workers']}; "
        f"to the local run's (the sides' names, kinds and revisions aside): {result['same_as_local']}"
    )
    peaks = [p for values in result["worker_peak_mib"].values() for p in values if p is not None]
    if peaks:
        lines.append(f"workers' peak memory (cgroup, page cache included): {min(peaks):.0f}–{max(peaks):.0f} MiB")
    if one and 2 in passes:
        speedup = one / passes[2]
        verdict = "met" if speedup >= TARGET_SPEEDUP else "NOT met"
        lines.append(f"target: 2 workers ≥ {TARGET_SPEEDUP}× one: {speedup:.2f}× ({verdict})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate-mbit", type=int, default=100, help="each worker's link, both ways (default 100)")
    parser.add_argument("--shards", type=int, default=16, help="shards a side (default 16)")
    parser.add_argument("--shard-mib", type=int, default=32, help="MiB a shard (default 32)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, medians over them (default 2)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    parser.add_argument(
        "--worker-memory-mib", type=int, default=768, help="each worker's memory cgroup, 0 for none (default 768)"
    )
    parser.add_argument("--source", choices=("s3", "hub"), default="s3", help="moto (default) or the Hub emulator")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    options = parser.parse_args(argv)
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        print("dask_bench: needs root and iproute2 (ip, tc): network namespaces and shaped links", file=sys.stderr)
        return 2
    workers = tuple(int(n) for n in options.workers.split(","))
    settings = Settings(
        options.rate_mbit,
        options.shards,
        options.shard_mib,
        options.rounds,
        workers,
        options.worker_memory_mib,
        options.source,
    )
    try:
        result = run(settings)
    except KeyboardInterrupt:
        print("dask_bench: interrupted (namespaces and processes removed)", file=sys.stderr)
        return 130
    if options.json:
        options.json.write_text(json.dumps(result, indent=1))
    print(render(result))
    return 0 if result["same_across_workers"] and result["same_as_local"] else 1


if __name__ == "__main__":
    sys.exit(main())
