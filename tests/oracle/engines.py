"""The pinned engine environments (pins.txt) and running the worker in them, with results cached by content."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


#: Targets whose text model sits inside a wrapper (its sizes in text_config, its capture through language_model):
#: architecture → the adapter the worker runs instead of worker_<engine>.py (worker_<engine>_<adapter>.py, which
#: wraps it) and the helper module it reads the wrapper with.
WRAPPED = {"KimiK25ForConditionalGeneration": ("k25", "k25_target.py")}


def driver_of(pin: Pin, target: Path) -> str:
    """The worker's driver for cases against ``target``: the engine's, or its adapter for a wrapped target."""
    architectures = json.loads((target / "config.json").read_text()).get("architectures") or [""]
    adapter = WRAPPED.get(architectures[0])
    return f"{pin.engine}_{adapter[0]}" if adapter else pin.engine


def _cache_key(pin: Pin, case_digest: str, target_digest: str, driver: str | None = None) -> str:
    sha = hashlib.sha256()
    engine_driver = WORKER.with_name(f"worker_{pin.engine}.py")
    for part in (
        pin.engine,
        pin.version,
        pin.requirements,
        WORKER.read_text(),
        engine_driver.read_text(),
        case_digest,
        target_digest,
    ):
        sha.update(part.encode() + b"\0")
    if driver is not None and driver != pin.engine:  # an adapter: its files are part of what ran
        helper = next(h for a, h in WRAPPED.values() if driver.endswith(f"_{a}"))
        for path in (WORKER.with_name(f"worker_{driver}.py"), WORKER.with_name(helper)):
            sha.update(path.read_text().encode() + b"\0")
    return sha.hexdigest()[:24]


class NotCached(RuntimeError):
    """An engine result the cache does not hold, asked for with ``cached_only`` (mutate.py)."""


def run_engine(
    pin: Pin, cases: dict[str, tuple[Path, Path]], log: Any = sys.stderr, cached_only: bool = False
) -> dict[str, dict[str, Any]]:
    """The engine's observation for every case (name → (case folder, target folder)): from the cache when nothing
    it depends on changed (``cached_only``: never run the engine; a missing result raises NotCached)."""
    cache = oracle_home() / "results" / f"{pin.engine}-{pin.version}"
    cache.mkdir(parents=True, exist_ok=True)
    targets = {target: digest(target) for _, target in cases.values()}
    drivers = {name: driver_of(pin, target) for name, (_, target) in cases.items()}
    keys = {
        name: _cache_key(pin, digest(path), targets[target], drivers[name]) for name, (path, target) in cases.items()
    }
    results: dict[str, dict[str, Any]] = {}
    todo: dict[str, tuple[Path, Path]] = {}
    for name, paths in cases.items():
        cached = cache / f"{name}-{keys[name]}.json"
        if cached.is_file():
            results[name] = json.loads(cached.read_text())
        else:
            todo[name] = paths
    print(f"oracle: {pin.label}: {len(results)} cached, {len(todo)} to run", file=log, flush=True)
    if not todo:
        return results
    if cached_only:
        raise NotCached(f"{pin.label}: no cached result for {', '.join(sorted(todo))} (run tests/oracle/run.py first)")
    out = Path(tempfile.mkdtemp(prefix=f"ckptdiff-oracle-{pin.engine}-"))
    try:
        # The engine's environment only: no ckptdiff on the path, no CUDA device.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(CUDA_VISIBLE_DEVICES="", PYTHONNOUSERSITE="1", TOKENIZERS_PARALLELISM="false")
        outputs = []
        for driver in sorted({drivers[name] for name in todo}):  # one worker per driver
            pairs = [f"{case}{PAIR}{target}" for name, (case, target) in todo.items() if drivers[name] == driver]
            command = [str(pin.python), str(WORKER), driver, str(out), *pairs]
            completed = subprocess.run(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S
            )
            outputs.append(completed)
        for name in todo:
            produced = out / f"{name}.json"
            if not produced.is_file():
                tail = "\n".join(done.stdout[-3000:] for done in outputs)[-3000:]
                codes = ", ".join(str(done.returncode) for done in outputs)
                raise RuntimeError(f"oracle worker for {pin.label} wrote no result for {name} (exit {codes}):\n{tail}")
            results[name] = json.loads(produced.read_text())
            fresh = cache / f"{name}-{keys[name]}.json"
            for stale in cache.glob(f"{name}-*.json"):
                if stale != fresh:
                    stale.unlink(missing_ok=True)
            # Atomic, so two runs sharing the cache never read half a file.
            partial = cache / f".{name}-{keys[name]}.{os.getpid()}"
            shutil.copy(produced, partial)
            os.replace(partial, fresh)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return results


if __name__ == "__main__":  # exit 0 when every pinned environment is installed, else name what is missing
    absent = missing_environments(pins())
    if absent:
        print(f"not installed: {', '.join(pin.label for pin in absent)} under {oracle_home()}")
    sys.exit(1 if absent else 0)
