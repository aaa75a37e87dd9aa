"""The pinned engine environments (pins.txt) and running the worker in them, with results cached by content."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cases import digest

HERE = Path(__file__).resolve().parent
PINS = HERE / "pins.txt"
WORKER = HERE / "worker.py"
#: Whole-engine time limit: start-up (20-45 s) plus a few seconds a case.
TIMEOUT_S = 3600
#: Between a case's folder and its target's on the worker's command line.
PAIR = "::"
#: The results cache keeps, per case name, this many results of distinct keys (the most recently used ones), so
#: checkouts whose worker files or cases differ (worktrees, branches, families) do not evict each other's...
KEEP_PER_CASE = 4
#: ...and drops any result no run has used for this long.
KEEP_UNUSED_DAYS = 30


def oracle_home() -> Path:
    return Path(os.environ.get("CKPTDIFF_ORACLE_HOME", Path.home() / ".cache" / "ckptdiff" / "oracle"))


@dataclass(frozen=True)
class Pin:
    """One line of pins.txt: an engine, its version, the pip requirements its environment is built from."""

    engine: str
    version: str
    requirements: str

    @property
    def environment(self) -> Path:
        return oracle_home() / f"{self.engine}-{self.version}"

    @property
    def python(self) -> Path:
        return self.environment / "bin" / "python"

    @property
    def installed(self) -> bool:
        return (self.environment / ".complete").is_file() and self.python.exists()

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"


def pins() -> list[Pin]:
    found = []
    for line in PINS.read_text().splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and not line.startswith("#"):
            found.append(Pin(*fields))
    return found


def missing_environments(wanted: list[Pin]) -> list[Pin]:
    return [pin for pin in wanted if not pin.installed]


def _cache_key(pin: Pin, case_digest: str, target_digest: str, driver: str = "", shared: tuple[str, ...] = ()) -> str:
    sha = hashlib.sha256()
    module = WORKER.with_name(f"worker_{driver}{pin.engine}.py")
    for part in (
        pin.engine,
        pin.version,
        pin.requirements,
        WORKER.read_text(),
        module.read_text(),
        *(WORKER.with_name(name).read_text() for name in shared),
        case_digest,
        target_digest,
    ):
        sha.update(part.encode() + b"\0")
    return sha.hexdigest()[:24]


class NotCached(RuntimeError):
    """An engine result the cache does not hold, asked for with ``cached_only`` (mutate.py)."""


def run_engine(
    pin: Pin,
    cases: dict[str, tuple[Path, Path]],
    log: Any = sys.stderr,
    cached_only: bool = False,
    driver: str = "",
    shared: tuple[str, ...] = (),
) -> dict[str, dict[str, Any]]:
    """The engine's observation for every case (name → (case folder, target folder)): from the cache when nothing
    it depends on changed (``cached_only``: never run the engine; a missing result raises NotCached). ``driver``:
    a family's worker driver prefix (worker_<driver><engine>.py; "" is EAGLE-3's), ``shared``: the other worker
    files it imports; both key its results, which are cached apart (results/<driver><engine>-<version>)."""
    cache = oracle_home() / "results" / f"{driver}{pin.engine}-{pin.version}"
    cache.mkdir(parents=True, exist_ok=True)
    targets = {target: digest(target) for _, target in cases.values()}
    keys = {
        name: _cache_key(pin, digest(path), targets[target], driver, shared) for name, (path, target) in cases.items()
    }
    results: dict[str, dict[str, Any]] = {}
    todo: dict[str, tuple[Path, Path]] = {}
    for name, paths in cases.items():
        cached = cached_result(cache, name, keys[name])
        if cached is not None:
            results[name] = cached
        else:
            todo[name] = paths
    label = f"{pin.label} ({driver.rstrip('_')})" if driver else pin.label
    print(f"oracle: {label}: {len(results)} cached, {len(todo)} to run", file=log, flush=True)
    if not todo:
        return results
    if cached_only:
        raise NotCached(f"{pin.label}: no cached result for {', '.join(sorted(todo))} (run tests/oracle/run.py first)")
    out = Path(tempfile.mkdtemp(prefix=f"ckptdiff-oracle-{pin.engine}-"))
    try:
        # The engine's environment only: no ckptdiff on the path, no CUDA device.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(CUDA_VISIBLE_DEVICES="", PYTHONNOUSERSITE="1", TOKENIZERS_PARALLELISM="false")
        pairs = [f"{case}{PAIR}{target}" for case, target in todo.values()]
        command = [str(pin.python), str(WORKER), f"{driver}{pin.engine}", str(out), *pairs]
        completed = subprocess.run(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S
        )
        for name in todo:
            produced = out / f"{name}.json"
            if not produced.is_file():
                tail = completed.stdout[-3000:]
                raise RuntimeError(
                    f"oracle worker for {pin.label} wrote no result for {name} (exit {completed.returncode}):\n{tail}"
                )
            results[name] = json.loads(produced.read_text())
            store_result(cache, name, keys[name], produced)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return results


def cached_result(cache: Path, name: str, key: str) -> dict[str, Any] | None:
    """The cached result of case ``name`` under ``key``, or None; a result read counts as used (its time is now).
    The key is the case's content, not its name: a renamed case finds its result under its old name."""
    path = cache / f"{name}-{key}.json"
    if not path.is_file():
        path = next(iter(sorted(cache.glob(f"*-{key}.json"))), path)
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    try:
        os.utime(path)
    except OSError:  # a cache shared read-only: the result still counts
        pass
    return loaded


def store_result(cache: Path, name: str, key: str, produced: Path) -> None:
    """Cache ``produced`` as case ``name``'s result under ``key`` beside the results of its other keys, then keep the
    ``KEEP_PER_CASE`` most recently used of them and drop every result unused for ``KEEP_UNUSED_DAYS``."""
    # Atomic, so two runs sharing the cache never read half a file.
    partial = cache / f".{name}-{key}.{os.getpid()}"
    shutil.copy(produced, partial)
    os.replace(partial, cache / f"{name}-{key}.json")
    mine = re.compile(rf"^{re.escape(name)}-[0-9a-f]{{24}}\.json$")
    versions = []
    for path in cache.glob("*.json"):
        try:
            used = path.stat().st_mtime
        except FileNotFoundError:  # another run pruned it meanwhile
            continue
        if time.time() - used > KEEP_UNUSED_DAYS * 86400:
            path.unlink(missing_ok=True)
        elif mine.match(path.name):
            versions.append((used, path))
    for _, stale in sorted(versions, reverse=True)[KEEP_PER_CASE:]:
        stale.unlink(missing_ok=True)


if __name__ == "__main__":  # exit 0 when every pinned environment is installed, else name what is missing
    absent = missing_environments(pins())
    if absent:
        print(f"not installed: {', '.join(pin.label for pin in absent)} under {oracle_home()}")
    sys.exit(1 if absent else 0)
