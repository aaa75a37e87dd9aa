"""The oracle job for any checkout: every case through the pinned engines and through ckptdiff, and where they differ.

    python tests/oracle/run.py [--ckptdiff-root PATH] [--engine vllm] [--case NAME ...] [--split held-out]
                               [--family mtp] [--capture] [--no-variants] [--out FILE]

Prints one line per disagreement (case, engine, subject, what ckptdiff says, what the engine did) and a
count per engine and split; writes the same to --out (default /tmp/oracle-disagreements.txt). ``--capture``
also prints, per case and engine, the target layers the engine captured (observed from its own classes)
beside the ones ckptdiff says. An engine setting compared as an engine of its own (``ORACLE_VARIANTS``
in oracle_families.py: vLLM's V1 model runner, ``vllm_v1``) runs with its engine unless ``--no-variants``.
Exit 0: none; 1: some; 2: an engine environment is missing
(tests/oracle/install_engines.sh) or a run broke.
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
REPO = HERE.parent.parent
for path in (str(HERE), str(REPO)):  # REPO: fixtures/ (the published layouts some families' cases rebuild)
    if path not in sys.path:
        sys.path.insert(0, path)

from cases import Case  # noqa: E402
from compare import (  # noqa: E402
    FAILURE_OF,
    Disagreement,
    ckptdiff_view,
    engine_view,
    environment_failure,
)
from compare_diff import disagreements, runner_capture  # noqa: E402
from engines import Pin, missing_environments, pins, run_engine  # noqa: E402
from oracle_families import (  # noqa: E402
    ORACLE_FAMILIES,
    ORACLE_VARIANTS,
    OracleVariant,
    all_cases,
    failure_codes,
    family_of,
    oracle_family,
)

DEFAULT_OUT = Path("/tmp/oracle-disagreements.txt")


@dataclass(frozen=True)
class VariantPin(Pin):
    """An engine setting compared as an engine of its own (``engine`` is the variant's name, e.g. ``vllm_v1``)."""

    of: str = ""
    setting: str = ""

    @property
    def label(self) -> str:
        return f"{self.of} {self.version} ({self.setting})"


def variant_pin(variant: OracleVariant, pin: Pin) -> VariantPin:
    return VariantPin(variant.name, pin.version, pin.requirements, of=pin.engine, setting=variant.setting)


@dataclass
class Result:
    """One run: what was compared and every disagreement."""

    engines: list[Pin]
    cases: list[Case]  # every family's (Case is EAGLE-3's; the others have the fields used here)
    found: list[Disagreement] = field(default_factory=list)
    not_comparable: list[tuple[str, str, str]] = field(default_factory=list)  # case, engine, why
    agreeing: dict[str, int] = field(default_factory=dict)  # engine → cases with no disagreement
    #: (case, engine) → (what the engine captured, what ckptdiff says it captures), for --capture
    captures: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    #: A variant's own cases (engine name → cases), where they are not ``cases``.
    cases_of: dict[str, list[Case]] = field(default_factory=dict)

    def comparable(self, engine: str) -> list[Case]:
        off = {case for case, each, _ in self.not_comparable if each == engine}
        return [c for c in self.cases_of.get(engine, self.cases) if c.name not in off]

    def agrees(self, engine: str, split: str | None = None) -> tuple[int, int]:
        """(cases that agree, cases compared) under ``engine``, in ``split`` (None: all)."""
        cases = [c for c in self.comparable(engine) if split is None or c.split == split]
        off = {d.case for d in self.found if d.engine == engine}
        return sum(1 for c in cases if c.name not in off), len(cases)

    def table(self) -> str:
        lines = []
        for pin in self.engines:
            agree, compared = self.agrees(pin.engine)
            cases_off = len({d.case for d in self.found if d.engine == pin.engine})
            lines.append(
                f"{pin.label}: {compared} cases compared, {agree} agree, "
                f"{cases_off} disagree ({sum(1 for d in self.found if d.engine == pin.engine)} disagreements)"
            )
            for split in sorted({c.split for c in self.cases_of.get(pin.engine, self.cases)} - {"main"}):
                agree, compared = self.agrees(pin.engine, split)
                if compared:
                    lines.append(f"  {split}: {agree} of {compared} agree ({100 * agree / compared:.1f} %)")
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


def ckptdiff_report(
    root: Path, case_dir: Path, target: Path | None, engines: list[str], extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """ckptdiff's JSON report on one case, from the checkout at ``root``, run as a user runs it (``target`` None:
    the case is checked on its own, as a target carrying MTP layers is; ``extra``: more arguments, a variant's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
    env.update(PYTHONPATH=str(root), NO_COLOR="1", HF_HUB_OFFLINE="1")
    base = ["--base", str(target)] if target is not None else []
    command = [sys.executable, "-m", "ckptdiff", str(case_dir), *base, "--format", "json", *extra]
    for engine in engines:
        command += ["--engine", engine]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=root)
    if completed.returncode == 2 and completed.stderr.strip() and not completed.stdout.strip():
        # ckptdiff refuses the case's files (a CkptdiffError's one line): no verdict, so no engine entry to agree
        return {"engines": [], "refused": completed.stderr.strip()}
    if completed.returncode not in (0, 1):
        raise RuntimeError(f"ckptdiff exit {completed.returncode} on {case_dir.name}: {completed.stderr.strip()}")
    return json.loads(completed.stdout)


def in_process_report(
    case_dir: Path, target: Path | None, engines: list[str], extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """ckptdiff's JSON report on one case from the ckptdiff imported here (mutate.py: with a rule changed)."""
    import contextlib
    import io

    import click

    from ckptdiff.cli import command
    from ckptdiff.errors import CkptdiffError

    base = ["--base", str(target)] if target is not None else []
    args = [str(case_dir), *base, "--format", "json", "--no-step-summary", *extra]
    for engine in engines:
        args += ["--engine", engine]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            command.main(args=args, prog_name="ckptdiff", standalone_mode=False, obj={"argv": args})
        except (click.exceptions.Exit, SystemExit):  # the exit code is the verdict, which the JSON holds
            pass
        except CkptdiffError as error:  # ckptdiff refuses the case's files: no verdict (as ckptdiff_report's exit 2)
            return {"engines": [], "refused": str(error)}
    return dict(json.loads(out.getvalue()))


def run(
    root: Path,
    engine_names: list[str] | None,
    case_names: list[str] | None,
    log: Any = sys.stderr,
    split: str | None = None,
    reporter: Any = None,
    cached_only: bool = False,
    families: list[str] | None = None,
    variants: bool = True,
) -> Result:
    wanted = [pin for pin in pins() if not engine_names or pin.engine in engine_names]
    every = [case for case in all_cases() if not families or family_of(case) in families]
    cases = [case for case in every if (not case_names or case.name in case_names) and split in (None, case.split)]
    chosen = {
        variant: [
            case
            for case in variant.cases()
            if (not case_names or case.name in case_names)
            and split in (None, case.split)
            and (not families or family_of(case) in families)
        ]
        for variant in ORACLE_VARIANTS
        if variants and any(pin.engine == variant.engine for pin in wanted)
    }
    if case_names:
        known = {c.name for c in every} | {c.name for each in ORACLE_VARIANTS for c in each.cases()}
        unknown = sorted(set(case_names) - known)
        if unknown:
            raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
    result = Result(wanted, cases)
    with tempfile.TemporaryDirectory(prefix="ckptdiff-oracle-cases-") as scratch:
        # name → (the checkpoint ckptdiff checks, its --base or None: the checkpoint is its own target)
        written: dict[str, tuple[Path, Path | None]] = {}
        observed: dict[str, dict[str, dict[str, Any]]] = {pin.engine: {} for pin in wanted}
        for family in ORACLE_FAMILIES:
            mine = [c for c in cases if family_of(c) == family.name]
            if not mine:
                continue
            here = family.write(Path(scratch) / family.name, mine)
            written |= here
            for pin in wanted:
                observed[pin.engine] |= run_engine(
                    pin,
                    _pairs(here, mine, pin.engine),
                    log,
                    cached_only=cached_only,
                    driver=family.driver,
                    shared=family.shared,
                )
        names = [pin.engine for pin in wanted]
        reports = _reports(root, reporter, cases, written, names, ())
        codes = {**FAILURE_OF, **failure_codes()}
        _judge(result, cases, wanted, {pin.engine: pin.engine for pin in wanted}, observed, reports, codes)
        for variant, mine in chosen.items():
            if not mine:
                continue
            pin = next(pin for pin in wanted if pin.engine == variant.engine)
            column = variant_pin(variant, pin)
            result.engines.append(column)
            result.cases_of[column.engine] = mine
            here = {}
            for family in ORACLE_FAMILIES:
                group = [c for c in mine if family_of(c) == family.name]
                if group:
                    here |= family.write(Path(scratch) / variant.name / family.name, group)
            seen = run_engine(
                pin,
                _pairs(here, mine, column.engine),
                log,
                cached_only=cached_only,
                driver=variant.driver,
                shared=variant.shared,
            )
            variant_reports = _reports(root, reporter, mine, here, [pin.engine], variant.args)
            _judge(result, mine, [column], {column.engine: pin.engine}, {column.engine: seen}, variant_reports, codes)
    return result


def _pairs(here: dict[str, tuple[Path, Path | None]], cases: list[Case], engine: str) -> dict[str, tuple[Path, Path]]:
    """The worker's (checkpoint, target) per case: a case with no --base is its own target."""
    return {
        c.name: (here[c.name][0], here[c.name][1] or here[c.name][0]) for c in cases if engine not in c.not_comparable
    }


def _reports(
    root: Path,
    reporter: Any,
    cases: list[Case],
    written: dict[str, tuple[Path, Path | None]],
    names: list[str],
    extra: tuple[str, ...],
) -> dict[str, dict[str, Any]]:
    """ckptdiff's JSON report per case: run as a user runs it, or by ``reporter`` (mutate.py: in process)."""
    if reporter is not None:
        return {c.name: reporter(*written[c.name], names, extra) for c in cases}
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(lambda c: ckptdiff_report(root, *written[c.name], names, extra), cases)
        return dict(zip([c.name for c in cases], found))


def _judge(
    result: Result,
    cases: list[Case],
    columns: list[Pin],
    entry_of: dict[str, str],
    observed: dict[str, dict[str, dict[str, Any]]],
    reports: dict[str, dict[str, Any]],
    codes: dict[str, tuple[str, str | None]],
) -> None:
    """Every case under every column (an engine, or a variant whose ckptdiff entry is its engine's, ``entry_of``):
    not comparable, agreeing, or its disagreements, into ``result``."""
    for case in cases:
        family = oracle_family(family_of(case))
        entries = {entry["engine"]: entry for entry in reports[case.name].get("engines", [])}
        for pin in columns:
            if pin.engine in case.not_comparable:
                result.not_comparable.append((case.name, pin.engine, case.not_comparable[pin.engine]))
                continue
            seen = observed[pin.engine][case.name]
            lacking = environment_failure(seen)
            if lacking is not None:
                result.not_comparable.append((case.name, pin.engine, f"environment: this machine lacks {lacking}"))
                continue
            entry = entries.get(entry_of[pin.engine])
            result.captures[(case.name, pin.engine)] = (capture_observed(seen), capture_believed(entry))
            if entry is None:
                refused = reports[case.name].get("refused")
                said = f"refused: {refused}"[:200] if refused else "(no engine entry)"
                found = [Disagreement(case.name, pin.engine, "outcome", said, "(an engine result)")]
            elif family.judge is not None:
                found = family.judge(case, pin.engine, seen, entry)
            else:
                inert = family.inert(case, seen) if family.inert is not None else None
                unread = entry_of[pin.engine] if family.unread else None
                theirs = engine_view(seen, case, family.names(case), inert, unread)
                found = disagreements(case.name, pin.engine, ckptdiff_view(entry, codes), theirs)
                found += runner_capture(case.name, pin.engine, seen, entry)  # a runner's own set-up, where watched
            result.found += found
            if not found:
                result.agreeing[pin.engine] = result.agreeing.get(pin.engine, 0) + 1


def capture_observed(result: dict[str, Any]) -> str:
    """The target layers the engine captured, as the worker observed them from the engine's own objects."""
    aux = result.get("aux") or {}
    if "outputs" not in aux:
        return "(not observed: " + str((result.get("raised") or {}).get("type", "no capture")) + ")"
    how = aux.get("how", "")
    return f"outputs {aux['outputs']} ({aux.get('model_class', '?')}: {how})"


def capture_believed(entry: dict[str, Any] | None) -> str:
    """What ckptdiff says the engine captures: its aux-id event, in its words."""
    if entry is None:
        return "(no engine entry)"
    for event in entry.get("events", []):
        if event["code"] in ("aux_ids", "aux_ids_default", "aux_ids_convention", "aux_capture_conditional"):
            return " ".join(str(event["message"]).rsplit(" [", 1)[0].split())
    return "(ckptdiff says nothing about the capture)"


def capture_table(result: Result) -> str:
    lines = []
    for (case, engine), (observed, believed) in sorted(result.captures.items()):
        lines.append(f"{case} / {engine}\n  engine:   {observed}\n  ckptdiff: {believed}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckptdiff-root", type=Path, default=REPO, help="the checkout whose ckptdiff is checked")
    parser.add_argument("--engine", action="append", help="vllm or sglang (repeatable; default: every pin)")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the table is also written")
    parser.add_argument("--split", choices=("main", "held-out"), help="only the cases of this split")
    parser.add_argument("--capture", action="store_true", help="print the observed capture beside ckptdiff's")
    parser.add_argument("--no-variants", action="store_true", help="skip the engine settings compared as engines")
    parser.add_argument(
        "--family", action="append", choices=[f.name for f in ORACLE_FAMILIES], help="only this family's cases"
    )
    args = parser.parse_args(argv)
    wanted = [pin for pin in pins() if not args.engine or pin.engine in args.engine]
    missing = missing_environments(wanted)
    if missing:
        labels = ", ".join(pin.label for pin in missing)
        print(f"oracle: no environment for {labels}: run bash tests/oracle/install_engines.sh", file=sys.stderr)
        return 2
    result = run(
        args.ckptdiff_root.resolve(),
        args.engine,
        args.case,
        split=args.split,
        families=args.family,
        variants=not args.no_variants,
    )
    text = f"ckptdiff at {args.ckptdiff_root.resolve()}\n" + result.table()
    if args.capture:
        text += "\n" + capture_table(result)
    args.out.write_text(text)
    print(text, end="")
    return 1 if result.found else 0


if __name__ == "__main__":
    sys.exit(main())
