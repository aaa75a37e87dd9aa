"""Shaped links on one machine, for benchmarks: namespaces behind tc-limited veth pairs, cgroups, processes.

Everything made is recorded in a :class:`Started` and removed by its ``close`` (run it in a ``finally``;
:func:`signals_end_the_run` turns SIGTERM and SIGHUP into SystemExit so that it runs). Needs Linux, root and
iproute2 (``ip``, ``tc`` with the tbf qdisc); memory cgroups need cgroup v1's memory controller or cgroup v2.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Names of the namespaces, links and cgroups made here start with it (left-overs of a killed run are removed).
PREFIX = "ckdb"


@dataclass
class Started:
    """What this run started, torn down in reverse by :meth:`close`."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    cgroups: list[Path] = field(default_factory=list)

    def close(self) -> None:
        for process in reversed(self.processes):
            _signal_group(process, signal.SIGTERM)  # its own session: it and what it started
        for process in reversed(self.processes):
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        for namespace in self.namespaces:  # its veth pair goes with it
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        for cgroup in self.cgroups:
            for _ in range(50):  # a killed process leaves its cgroup a moment later
                try:
                    cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def _signal_group(process: subprocess.Popen[bytes], number: int) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:  # it ended in between
            pass


def sh(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"dask_bench: {' '.join(command)}: {done.stderr.strip()}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


def start(started: Started, command: list[str], env: dict[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, env=env, start_new_session=True, **kwargs)
    started.processes.append(process)
    return process


def remove_leftovers() -> None:
    """Namespaces and cgroups of a run that was killed before it could clean up (only this benchmark's names)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    for name in listed:
        if name.startswith(f"{PREFIX}-w"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for parent in (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")):
        for cgroup in parent.glob(f"{PREFIX}-w*") if parent.is_dir() else ():
            try:
                cgroup.rmdir()
            except OSError:
                pass


def make_link(started: Started, index: int, rate_mbit: int) -> tuple[str, str, str]:
    """A namespace joined to the root one by a veth pair shaped at ``rate_mbit`` both ways:
    (namespace, the root end's address, the namespace end's address)."""
    namespace, outside, inside = f"{PREFIX}-w{index}", f"{PREFIX}{index}h", f"{PREFIX}{index}w"
    host, worker = f"10.213.{index}.1", f"10.213.{index}.2"
    sh("ip", "netns", "add", namespace)
    started.namespaces.append(namespace)
    sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside, "netns", namespace)
    sh("ip", "addr", "add", f"{host}/30", "dev", outside)
    sh("ip", "link", "set", outside, "up")
    sh("ip", "-n", namespace, "addr", "add", f"{worker}/30", "dev", inside)
    sh("ip", "-n", namespace, "link", "set", inside, "up")
    sh("ip", "-n", namespace, "link", "set", "lo", "up")
    burst = str(max(64 * 1024, rate_mbit * 10**6 // 8 // 100))  # 10 ms of the rate, at least a GSO packet
    shaping = ["root", "tbf", "rate", f"{rate_mbit}mbit", "burst", burst, "latency", "50ms"]
    sh("tc", "qdisc", "replace", "dev", outside, *shaping)
    sh("ip", "netns", "exec", namespace, "tc", "qdisc", "replace", "dev", inside, *shaping)
    return namespace, host, worker


def memory_cgroup(started: Started, index: int, limit_mib: int) -> Path | None:
    """A memory cgroup capped at ``limit_mib`` (page cache included): v1's memory controller, else v2's."""
    if limit_mib <= 0:
        return None
    v1 = Path("/sys/fs/cgroup/memory")
    cgroup = (v1 if v1.is_dir() else Path("/sys/fs/cgroup")) / f"{PREFIX}-w{index}"
    cgroup.mkdir()
    started.cgroups.append(cgroup)
    limit = str(limit_mib * 2**20)
    (cgroup / ("memory.limit_in_bytes" if v1.is_dir() else "memory.max")).write_text(limit)
    return cgroup


def peak_memory_mib(cgroup: Path | None) -> float | None:
    if cgroup is None:
        return None
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        if (cgroup / name).exists():
            return int((cgroup / name).read_text()) / 2**20
    return None


def cpu_seconds(process: subprocess.Popen[bytes]) -> float:
    """User + system CPU seconds of a running process (and its waited-for children), from /proc."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@contextmanager
def signals_end_the_run() -> Iterator[None]:
    """SIGTERM (and SIGHUP) raise SystemExit like Ctrl-C raises KeyboardInterrupt, so cleanup runs for all."""

    def stop(number: int, frame: Any) -> None:
        raise SystemExit(f"dask_bench: signal {number}, cleaning up")

    previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
