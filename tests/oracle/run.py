"""The oracle job for any checkout: every case through the pinned engines and through ckptdiff, and where they differ.

    python tests/oracle/run.py [--ckptdiff-root PATH] [--engine vllm] [--case NAME ...] [--out FILE]

Prints one line per disagreement (case, engine, subject, what ckptdiff says, what the engine did) and a
count per engine; writes the same to --out (default /tmp/oracle-disagreements.txt). Exit 0: none; 1: some;
2: an engine environment is missing (tests/oracle/install_engines.sh) or a run broke.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from cases import Case, write_all  # noqa: E402
from catalogue import CASES  # noqa: E402
from compare import Disagreement, ckptdiff_view, disagreements, engine_view  # noqa: E402
from engines import Pin, missing_environments, pins, run_engine  # noqa: E402

REPO = HERE.parent.parent
DEFAULT_OUT = Path("/tmp/oracle-disagreements.txt")


@dataclass
class Result:
    """One run: what was compared and every disagreement."""

    engines: list[Pin]
    cases: list[Case]
    found: list[Disagreement] = field(default_factory=list)
    not_comparable: list[tuple[str, str, str]] = field(default_factory=list)  # case, engine, why
    agreeing: dict[str, int] = field(default_factory=dict)  # engine → cases with no disagreement

    def table(self) -> str:
        lines = []
        for pin in self.engines:
            compared = sum(1 for c in self.cases if pin.engine not in c.not_comparable)
            cases_off = len({d.case for d in self.found if d.engine == pin.engine})
            lines.append(
                f"{pin.label}: {compared} cases compared, {self.agreeing.get(pin.engine, 0)} agree, "
                f"{cases_off} disagree ({sum(1 for d in self.found if d.engine == pin.engine)} disagreements)"
            )
        for case, engine, why in self.not_comparable:
            lines.append(f"not comparable: {case} under {engine}: {why}")
        if self.found:
            header = ("case", "engine", "subject", "ckptdiff says", "engine did")
            rows = [header, *(d.row() for d in self.found)]
            widths = [min(max(len(r[i]) for r in rows), 60) for i in range(4)]
            lines.append("")
            lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[4])
            for d in self.found:
                row = d.row()
                lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)) + "  " + row[4])
        return "\n".join(lines) + "\n"


def ckptdiff_report(root: Path, case_dir: Path, target: Path, engines: list[str]) -> dict[str, Any]:
    """ckptdiff's JSON report on one case, from the checkout at ``root``, run as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
    env.update(PYTHONPATH=str(root), NO_COLOR="1", HF_HUB_OFFLINE="1")
    command = [sys.executable, "-m", "ckptdiff", str(case_dir), "--base", str(target), "--format", "json"]
    for engine in engines:
        command += ["--engine", engine]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=root)
    if completed.returncode not in (0, 1):
        raise RuntimeError(f"ckptdiff exit {completed.returncode} on {case_dir.name}: {completed.stderr.strip()}")
    return json.loads(completed.stdout)


def run(root: Path, engine_names: list[str] | None, case_names: list[str] | None, log: Any = sys.stderr) -> Result:
    wanted = [pin for pin in pins() if not engine_names or pin.engine in engine_names]
    cases = [case for case in CASES if not case_names or case.name in case_names]
    if case_names and len(cases) != len(set(case_names)):
        unknown = sorted(set(case_names) - {c.name for c in CASES})
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
    result = Result(wanted, cases)
    with tempfile.TemporaryDirectory(prefix="ckptdiff-oracle-cases-") as scratch:
        directories = write_all(Path(scratch), cases)
        target = Path(scratch) / "_target"
        observed = {
            pin.engine: run_engine(
                pin,
                {c.name: directories[c.name] for c in cases if pin.engine not in c.not_comparable},
                target,
                log,
            )
            for pin in wanted
        }
        names = [pin.engine for pin in wanted]
        with ThreadPoolExecutor(max_workers=2) as pool:
            reports = dict(
                zip(
                    [c.name for c in cases],
                    pool.map(lambda c: ckptdiff_report(root, directories[c.name], target, names), cases),
                )
            )
    for case in cases:
        entries = {entry["engine"]: entry for entry in reports[case.name].get("engines", [])}
        for pin in wanted:
            if pin.engine in case.not_comparable:
                result.not_comparable.append((case.name, pin.engine, case.not_comparable[pin.engine]))
                continue
            entry = entries.get(pin.engine)
            theirs = engine_view(observed[pin.engine][case.name], case)
            if entry is None:
                found = [Disagreement(case.name, pin.engine, "outcome", "(no engine entry)", theirs.outcome)]
            else:
                found = disagreements(case.name, pin.engine, ckptdiff_view(entry), theirs)
            result.found += found
            if not found:
                result.agreeing[pin.engine] = result.agreeing.get(pin.engine, 0) + 1
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckptdiff-root", type=Path, default=REPO, help="the checkout whose ckptdiff is checked")
    parser.add_argument("--engine", action="append", help="vllm or sglang (repeatable; default: every pin)")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the table is also written")
    args = parser.parse_args(argv)
    wanted = [pin for pin in pins() if not args.engine or pin.engine in args.engine]
    missing = missing_environments(wanted)
    if missing:
        labels = ", ".join(pin.label for pin in missing)
        print(f"oracle: no environment for {labels}: run bash tests/oracle/install_engines.sh", file=sys.stderr)
        return 2
    result = run(args.ckptdiff_root.resolve(), args.engine, args.case)
    text = f"ckptdiff at {args.ckptdiff_root.resolve()}\n" + result.table()
    args.out.write_text(text)
    print(text, end="")
    return 1 if result.found else 0


if __name__ == "__main__":
    sys.exit(main())
