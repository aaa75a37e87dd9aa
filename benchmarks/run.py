"""ckptdiff's benchmarks, each case side by side with its anchor in the same run.

    python benchmarks/run.py            # the full run: a few minutes on 2 cores
    python benchmarks/run.py --quick    # one round, no warm-up, quick remote/values; prints, writes nothing

Inputs are sparse files under benchmarks/.work/ (gitignored), built on first use and rebuilt whenever
fixtures/generate.py changes: two Kimi-K2-base-shaped checkpoints (61 shards, ~140 k tensors, ~1 TB apparent
size each, a few MB on disk) and smaller pairs of the same layout for the scaling case.

Every measured thing runs in its own subprocess: wall time is taken around fork → exit, peak RSS is the
child's ``ru_maxrss`` from ``os.wait4`` (both taken by a tiny launcher process, see LAUNCHER). Rounds
interleave a case with its anchors, so a noisy neighbour on a shared machine slows both alike; the tables give
medians over the rounds. The remote and ``--values`` cases come from benchmarks/hub_bench.py and
benchmarks/values_bench.py (their ``run(quick)``), skipped with a note when absent. Results go to stdout
and (not with --quick, unless --write) to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work"
RESULTS = HERE / "RESULTS.md"
for extra in (ROOT, HERE):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from fixtures.generate import KIMI_K2_BASE_CONFIG, write_kimi_k2_base  # noqa: E402

#: The issue's targets for the local Kimi-K2-scale comparison and for start-up.
TARGET_SECONDS = 2.0
TARGET_RSS_MB = 300.0
TARGET_SPEEDUP = 2.0
TARGET_HELP_SECONDS = 0.3

#: The ``__metadata__`` of every shard of the variant of B whose headers all differ from A's (A has the default).
OTHER_METADATA = {"format": "pt", "producer": "fine-tune run 7"}

#: Kimi-K2 has 384 routed experts per MoE layer; the scaling sizes keep the layout and shrink the experts.
FULL_EXPERTS = 384
SCALES = {"1×": 24, "4×": 96, "16×": FULL_EXPERTS}

# The anchors read the same metadata the way their libraries offer it, both sides like ckptdiff does.
HF_ANCHOR = """
import sys
from huggingface_hub import get_local_safetensors_metadata
for path in sys.argv[1:]:
    get_local_safetensors_metadata(path)
"""
SAFE_OPEN_ANCHOR = """
import json, sys
from pathlib import Path
from safetensors import safe_open
for folder in map(Path, sys.argv[1:]):
    weight_map = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    for shard in sorted(set(weight_map.values())):
        with safe_open(folder / shard, framework="numpy") as handle:
            for name in handle.keys():
                piece = handle.get_slice(name)
                piece.get_shape(), piece.get_dtype()
"""
#: ckptdiff as of another commit (``--against REV``): that tree's package, not this checkout's installed one.
OTHER_REVISION = """
import sys
sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in repr(finder).lower()]
sys.path.insert(0, sys.argv.pop(1))
from ckptdiff.cli import main
main(sys.argv[1:])
"""
READ_ONLY = """
import sys
from ckptdiff.sources import resolve_both
resolve_both(sys.argv[1], sys.argv[2])
"""


# --- inputs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    a: Path
    b: Path
    tensors: int  # per side
    #: B with a different ``__metadata__`` in every shard (its header bytes differ from A's in every shard)
    b_metadata: Path | None = None
    #: B' with each shard's header JSON written with a space after its opening brace: the same tensors, but no
    #: header's text is A's outside its metadata either, so every header of this side is decoded on its own
    b_respaced: Path | None = None


def _generator_stamp() -> str:
    recipe = {"scales": SCALES, "version": 2}
    digest = hashlib.sha256((ROOT / "fixtures" / "generate.py").read_bytes() + json.dumps(recipe).encode())
    return digest.hexdigest()


def _count_tensors(folder: Path) -> int:
    return len(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"])


def build_inputs(names: Sequence[str]) -> dict[str, Pair]:
    """The checkpoint pairs for these scales, under benchmarks/.work/ (sparse; rebuilt if the generator changed)."""
    stamp_file = WORK / "inputs.stamp"
    stamp = _generator_stamp()
    if not stamp_file.is_file() or stamp_file.read_text() != stamp:
        shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    # B is the same architecture with a longer context (as a K2 → K2.5-style fine-tune would be): every tensor
    # matches, one config key differs.
    config_b = dict(KIMI_K2_BASE_CONFIG, max_position_embeddings=262144)
    pairs = {}
    for name in names:
        experts = SCALES[name]
        folder = WORK / f"kimi-k2-{experts}-experts"
        a, b = folder / "a", folder / "b"
        if not (folder / "done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            write_kimi_k2_base(a, experts=experts)
            write_kimi_k2_base(b, experts=experts, config=config_b)
            if experts == FULL_EXPERTS:
                write_kimi_k2_base(folder / "b-metadata", experts=experts, config=config_b, metadata=OTHER_METADATA)
            (folder / "done").write_text("")
        b_metadata, b_respaced = folder / "b-metadata", folder / "b-respaced"
        if b_metadata.is_dir() and not (folder / "b-respaced.done").is_file():
            _respaced_copy(b_metadata, b_respaced)
        pairs[name] = Pair(
            a,
            b,
            _count_tensors(a),
            b_metadata if b_metadata.is_dir() else None,
            b_respaced if b_metadata.is_dir() else None,
        )
    stamp_file.write_text(stamp)
    return pairs


def _respaced_copy(source: Path, target: Path) -> None:
    """``source`` with a space after each shard header's opening brace (the 8-byte padding absorbs it or grows
    by 8), its data regions left sparse; the other files copied as they are."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.suffix != ".safetensors":
            shutil.copy(path, target / path.name)
            continue
        with open(path, "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            text = handle.read(length)
        data_length = path.stat().st_size - 8 - length
        respaced = b"{ " + text[1:].rstrip(b" ")
        respaced += b" " * (-len(respaced) % 8)
        with open(target / path.name, "wb") as handle:
            handle.write(len(respaced).to_bytes(8, "little") + respaced)
            handle.truncate(8 + len(respaced) + data_length)
    (target.parent / f"{target.name}.done").write_text("")


# --- measuring -------------------------------------------------------------------------------------------


@dataclass
class Command:
    label: str
    argv: list[str]
    ok_codes: tuple[int, ...] = (0,)
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu_seconds)

    @property
    def peak_rss(self) -> float:
        return max(self.rss_mb)


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PYTHON"))}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's ckptdiff, installed or not
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_HOME"] = str(WORK / "hf-home")
    return env


#: Forks and execs the measured command, waits for it with wait4 and prints its wall time, CPU time (user +
#: system), peak RSS (KiB) and exit code. It runs as a bare ``python -S`` (a few MB) because a child's ru_maxrss
#: starts from its parent's RSS at fork time: forking from this runner, which has built 140 k-tensor indexes,
#: would inflate every figure.
LAUNCHER = """
import os, sys, time
errors_path, argv = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(errors_path, os.O_WRONLY | os.O_TRUNC), 2)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
cpu = usage.ru_utime + usage.ru_stime
print(time.perf_counter() - start, cpu, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def measure_once(command: Command) -> None:
    """Run the command once in a fresh process (through LAUNCHER): wall time spawn → exit, peak RSS, exit code."""
    with tempfile.NamedTemporaryFile(prefix="ckptdiff-bench-", suffix=".err") as errors:
        launcher = [sys.executable, "-S", "-c", LAUNCHER, errors.name, *command.argv]
        done = subprocess.run(launcher, capture_output=True, text=True, env=_environment(), cwd=ROOT, check=True)
        seconds, cpu_seconds, rss_kib, code = done.stdout.split()
        if int(code) not in command.ok_codes:
            detail = Path(errors.name).read_text(errors="replace").strip()[-2000:]
            raise SystemExit(f"benchmark command failed ({code}): {' '.join(command.argv)}\n{detail}")
    command.seconds.append(float(seconds))
    command.cpu_seconds.append(float(cpu_seconds))
    command.rss_mb.append(int(rss_kib) / 1024)  # ru_maxrss is in KiB on Linux


def measure(commands: Sequence[Command], rounds: int, *, warmup: bool) -> None:
    """Interleave: each round runs every command once, so load on a shared machine hits all of them alike."""
    if warmup:
        for command in commands:
            measure_once(command)
            command.seconds.clear()
            command.cpu_seconds.clear()
            command.rss_mb.clear()
    for _ in range(rounds):
        for command in commands:
            measure_once(command)


def ckptdiff(*args: str) -> list[str]:
    return [sys.executable, "-m", "ckptdiff", *args]


def python_script(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


# --- cases -----------------------------------------------------------------------------------------------


@dataclass
class Section:
    title: str
    lines: list[str]
    checks: list[tuple[str, bool]] = field(default_factory=list)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True).splitlines()


def checkout(revision: str) -> Path:
    """This repository's tree at ``revision``, extracted once under benchmarks/.work/ (git archive)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    folder = WORK / f"tree-{commit[:12]}"
    if not (folder / "ckptdiff" / "cli.py").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit, "ckptdiff"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def case_local_scale(pair: Pair, rounds: int, warmup: bool, against: str | None) -> tuple[Section, Command]:
    a, b = str(pair.a), str(pair.b)
    ours = Command(
        "ckptdiff A B --format json -o /dev/null",
        ckptdiff(a, b, "--format", "json", "-o", "/dev/null"),
        ok_codes=(0, 1),
    )
    commands = [
        ours,
        Command("huggingface_hub get_local_safetensors_metadata(A), (B)", python_script(HF_ANCHOR, a, b)),
        Command(
            "safetensors safe_open loop: keys + get_slice shape/dtype, A and B", python_script(SAFE_OPEN_ANCHOR, a, b)
        ),
        Command(
            "ckptdiff A B -o /dev/null (table, the default format)", ckptdiff(a, b, "-o", "/dev/null"), ok_codes=(0, 1)
        ),
        Command("ckptdiff.sources.resolve_both(A, B) only (no compare, no report)", python_script(READ_ONLY, a, b)),
    ]

    def against_a(label: str, other: Path | None) -> list[Command]:
        """ckptdiff A ``other`` in JSON and as a table, and the anchor on the same pair (nothing without it)."""
        if other is None:
            return []
        b_other = str(other)
        return [
            Command(
                f"{label}: ckptdiff A {label} --format json -o /dev/null",
                ckptdiff(a, b_other, "--format", "json", "-o", "/dev/null"),
                ok_codes=(0, 1),
            ),
            Command(
                f"{label}: ckptdiff A {label} -o /dev/null (table)",
                ckptdiff(a, b_other, "-o", "/dev/null"),
                ok_codes=(0, 1),
            ),
            Command(
                f"{label}: huggingface_hub get_local_safetensors_metadata(A), ({label})",
                python_script(HF_ANCHOR, a, b_other),
            ),
        ]

    # B'': B's shard headers all decoded on their own (their text differs); B': all differ from A's in __metadata__
    respaced, variant = against_a("B''", pair.b_respaced), against_a("B'", pair.b_metadata)
    commands += respaced + variant
    if against:
        tree = str(checkout(against))
        commands.append(
            Command(
                f"ckptdiff at {against}: A B --format json -o /dev/null",
                python_script(OTHER_REVISION, tree, a, b, "--format", "json", "-o", "/dev/null"),
                ok_codes=(0, 1),
            )
        )
        if pair.b_respaced is not None:
            commands.append(
                Command(
                    f"ckptdiff at {against}: A B'' --format json -o /dev/null",
                    python_script(OTHER_REVISION, tree, a, str(pair.b_respaced), "--format", "json", "-o", "/dev/null"),
                    ok_codes=(0, 1),
                )
            )
    measure(commands, rounds, warmup=warmup)
    rows = []
    for command in commands:
        ratio = command.median / ours.median
        rows.append(
            [
                f"`{command.label}`",
                f"{command.median:.2f}",
                f"{min(command.seconds):.2f}",
                f"{command.median_cpu:.2f}",
                f"{command.peak_rss:.0f}",
                f"{ratio:.2f}×",
            ]
        )
    hf = commands[1]
    lines = [
        f"Two Kimi-K2-base-shaped checkpoints, {pair.tensors:,} tensors and 61 shards each (every tensor matches, "
        "one config key differs; B's shard headers are byte-identical to A's, B' is B with another `__metadata__` "
        "in every shard, so no shard header matches A's byte for byte (each differs only in its metadata), and B'' "
        "is B' with a space after each header's opening brace, so every header of B'' is decoded on its own). "
        "Medians over the rounds (wall time; CPU s is user + system time of the process, "
        "steadier when the machine is shared); \"× ckptdiff\" is that row's wall time over ckptdiff's "
        "end-to-end time (above 1: ckptdiff is faster). Every row starts its own Python process.",
        "",
        *_table(["command", "median s", "min s", "CPU s", "peak RSS MB", "× ckptdiff"], rows),
    ]
    checks = [
        (f"end to end ≤ {TARGET_SECONDS:.0f} s (median {ours.median:.2f} s)", ours.median <= TARGET_SECONDS),
        (f"peak RSS ≤ {TARGET_RSS_MB:.0f} MB ({ours.peak_rss:.0f} MB)", ours.peak_rss <= TARGET_RSS_MB),
        (
            f"≥ {TARGET_SPEEDUP:.0f}× faster than huggingface_hub's local reader ({hf.median / ours.median:.2f}×)",
            hf.median / ours.median >= TARGET_SPEEDUP,
        ),
    ]
    table = commands[3]
    checks.append(
        (
            f"table: ≥ {TARGET_SPEEDUP:.0f}× faster than huggingface_hub's ({hf.median / table.median:.2f}×)",
            hf.median / table.median >= TARGET_SPEEDUP,
        )
    )
    for name, group in (("B'", variant), ("B''", respaced)):
        if group:
            json_other, table_other, hf_other = group
            decoded = " (every header decoded)" if name == "B''" else ""
            for label, command in ((f"{name}{decoded}, JSON", json_other), (f"{name}, table", table_other)):
                ratio = hf_other.median / command.median
                checks.append(
                    (
                        f"{label}: ≥ {TARGET_SPEEDUP:.0f}× faster than huggingface_hub's ({ratio:.2f}×)",
                        ratio >= TARGET_SPEEDUP,
                    )
                )
            peak = max(json_other.peak_rss, table_other.peak_rss)
            checks.append((f"{name}: peak RSS ≤ {TARGET_RSS_MB:.0f} MB ({peak:.0f} MB)", peak <= TARGET_RSS_MB))
    return Section("Local, Kimi-K2 scale", lines, checks), ours


def case_scaling(pairs: dict[str, Pair], full: Command | None, rounds: int) -> Section:
    commands = {}
    for name, pair in pairs.items():
        if name == "16×" and full is not None:
            commands[name] = full  # the local-scale pair is the 16× size: its rounds are reused
            continue
        argv = ckptdiff(str(pair.a), str(pair.b), "--format", "json", "-o", "/dev/null")
        commands[name] = Command(f"{name}", argv, ok_codes=(0, 1))
    measure([c for n, c in commands.items() if not (n == "16×" and full is not None)], rounds, warmup=False)
    baseline = None
    rows = []
    for name, command in commands.items():
        tensors = pairs[name].tensors
        per_tensor = command.median / tensors * 1e6
        baseline = baseline or per_tensor
        rows.append(
            [
                name,
                f"{SCALES[name]}",
                f"{tensors:,}",
                f"{command.median:.2f}",
                f"{command.median_cpu:.2f}",
                f"{per_tensor:.1f}",
                f"{per_tensor / baseline:.2f}",
                f"{command.peak_rss:.0f}",
            ]
        )
    lines = [
        "`ckptdiff A B --format json -o /dev/null` on pairs of the same 61-shard layout with fewer routed experts "
        "per layer. Linear cost shows as a flat time per tensor (start-up, a fixed cost, weighs most at 1×).",
        "",
        *_table(
            ["size", "experts/layer", "tensors/side", "median s", "CPU s", "µs/tensor", "vs 1×", "peak RSS MB"], rows
        ),
    ]
    return Section("Scaling with the number of tensors", lines)


def case_startup(rounds: int) -> Section:
    commands = [
        Command("python -c pass", [sys.executable, "-c", "pass"]),
        Command("python -m ckptdiff --help", ckptdiff("--help")),
        Command("python -m ckptdiff --version", ckptdiff("--version")),
    ]
    measure(commands, rounds, warmup=True)
    base = commands[0].median
    rows = [
        [f"`{c.label}`", f"{c.median * 1000:.0f}", f"{(c.median - base) * 1000:.0f}", f"{c.peak_rss:.0f}"]
        for c in commands
    ]
    lines = [
        f"Medians of {rounds} runs each. tests/test_startup.py asserts that this path imports no torch, "
        "huggingface_hub, numpy or safetensors.",
        "",
        *_table(["command", "median ms", "over python -c pass, ms", "peak RSS MB"], rows),
    ]
    help_median = commands[1].median
    checks = [
        (f"`ckptdiff --help` ≤ {TARGET_HELP_SECONDS} s ({help_median:.3f} s)", help_median <= TARGET_HELP_SECONDS)
    ]
    return Section("Start-up", lines, checks)


def case_delegated(module_name: str, title: str, quick: bool) -> Section:
    """A case another benchmark module owns: its ``run(quick)`` rows, shown with its ``render`` if it has one."""
    if not (HERE / f"{module_name}.py").is_file():
        return Section(title, [f"Skipped: benchmarks/{module_name}.py is not in this checkout."])
    try:
        module = importlib.import_module(module_name)
        rows = module.run(quick)
        text = module.render(rows) if hasattr(module, "render") else json.dumps(rows, indent=2, default=str)
    except Exception as err:  # noqa: BLE001 - a broken sibling benchmark is reported, not fatal
        return Section(title, [f"Failed: `{module_name}.run({quick})` raised {type(err).__name__}: {err}"])
    doc = (module.__doc__ or "").strip()
    lines = [
        f"From `benchmarks/{module_name}.py` (`run(quick={quick})`)" + (": " + doc.splitlines()[0] if doc else ".")
    ]
    checks = module.checks(rows) if hasattr(module, "checks") else []
    return Section(title, [*lines, "", "```text", *str(text).splitlines(), "```"], checks)


# --- the machine and the report --------------------------------------------------------------------------


def machine() -> list[str]:
    cpu = "unknown"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as handle:
        mem_kb = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
    versions = []
    for package in ("huggingface_hub", "safetensors", "click"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} absent")
    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical CPUs (`nproc`: {len(os.sched_getaffinity(0))})",
        f"- RAM: {mem_kb / 1024**2:.1f} GiB",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {platform.system()} "
        f"{platform.release()}",
        f"- {', '.join(versions)}",
    ]


def load_line(when: str) -> str:
    one, five, _ = os.getloadavg()
    return f"- load average {when}: {one:.2f} (1 min), {five:.2f} (5 min)"


def report(sections: Sequence[Section], header: list[str]) -> str:
    out = [*header]
    for section in sections:
        out += ["", f"## {section.title}", "", *section.lines]
        if section.checks:
            out += ["", *(f"- {'met' if ok else '**not met**'}: {text}" for text, ok in section.checks)]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, no warm-up, quick remote/values")
    parser.add_argument("--rounds", type=int, help="rounds per case (default: 3, or 1 with --quick)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/RESULTS.md alone")
    parser.add_argument("--write", action="store_true", help="with --quick: write benchmarks/RESULTS.md all the same")
    parser.add_argument("--against", metavar="REV", help="also time the Kimi-K2 case with ckptdiff at git REV")
    parser.add_argument("--local-only", action="store_true", help="only the local Kimi-K2 case (writes nothing)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    started = time.perf_counter()
    command_line = " ".join(["python benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])])
    header = [
        "# ckptdiff benchmarks",
        "",
        f"Generated by `{command_line}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {rounds} round(s).",
        "",
        *machine(),
        load_line("at the start"),
    ]

    def progress(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {text}", file=sys.stderr, flush=True)

    progress("building inputs (sparse) under benchmarks/.work/")
    pairs = build_inputs(["16×"] if args.local_only else list(SCALES))
    sections = []
    progress("local Kimi-K2 scale vs huggingface_hub and safetensors")
    section, full = case_local_scale(pairs["16×"], rounds, warmup=not args.quick, against=args.against)
    sections.append(section)
    if args.local_only:
        print(report(sections, [*header, load_line("at the end")]))
        return
    progress("scaling 1×, 4×, 16×")
    sections.append(case_scaling(pairs, full, rounds))
    progress("start-up")
    sections.append(case_startup(max(rounds, 3) * 2))
    progress("remote (benchmarks/hub_bench.py)")
    sections.append(case_delegated("hub_bench", "Remote (Hub emulator)", args.quick))
    progress("--values (benchmarks/values_bench.py)")
    sections.append(case_delegated("values_bench", "--values throughput", args.quick))
    header += [load_line("at the end"), f"- total benchmark time: {time.perf_counter() - started:.0f} s"]
    text = report(sections, header)
    print(text)
    if args.no_write or (args.quick and not args.write):  # a quick look never replaces the tracked results
        progress(f"left {RESULTS.relative_to(ROOT)} alone" + (" (--quick; add --write to replace it)" * args.quick))
    else:
        RESULTS.write_text(text)
        progress(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
