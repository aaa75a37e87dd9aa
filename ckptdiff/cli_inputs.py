"""What the command line's options become before the run: A and B (or the config file's pair), the rename rules,
where --values runs, and the command line as the report's footer quotes it."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from .errors import CkptdiffError, scrub_secrets

if TYPE_CHECKING:
    from .config_file import FileSettings
    from .naming import RenameRule
    from .values import ValuesOptions


def specs_from_config(a: str | None, b: str | None, settings: FileSettings) -> tuple[str, str | None]:
    """A and B as given; with neither, the config file's ``reference`` and ``candidate`` (the pre-commit hook's way)."""
    if a is not None:
        return a, b
    reference, candidate = settings.spec("reference"), settings.spec("candidate")
    if reference is None or candidate is None:
        raise click.UsageError("Missing argument 'A' (or set reference and candidate in the config file).")
    return reference, candidate


def refuse_lone_options(b: str | None, engines: tuple[str, ...], values: bool, scheduler: str | None) -> None:
    """Options missing what they need, or that would change nothing without another: usage errors, before anything
    is read (``engines``: the command line's and the config file's)."""
    if b is None and not engines:
        raise click.UsageError("Missing argument 'B': give B to compare A with, or --engine NAME to check A on its own")
    if b is None and values:
        raise click.UsageError("--values compares A's tensor values with B's: give B")
    if scheduler is not None and not values:
        raise click.UsageError("--scheduler runs the --values pass: give --values too")
    from click.core import ParameterSource

    given = click.get_current_context().get_parameter_source("vllm_runner") == ParameterSource.COMMANDLINE
    if given and not {"vllm", "all"} & set(engines):
        raise click.UsageError("--vllm-runner chooses how --engine vllm is replayed: give --engine vllm (or all)")


def refuse_empty_globs(values_only: tuple[str, ...]) -> None:
    """An empty or blank --values-only glob (an unset variable, ``--values-only "$NAMES"``, or one holding a space)
    matches no name: refused before anything is read, as an empty --ignore is, rather than after both sides were
    read."""
    for glob in values_only:
        if not glob.strip():
            hint = "give a tensor name or glob, e.g. fc.weight"
            raise CkptdiffError("--values-only", f"{glob!r} is not a non-empty glob", hint)


def refuse_blank_specs(specs: dict[str, str | None]) -> None:
    """A blank --base or --from-base (``--base "$BASE"`` with BASE unset) named by its option, before anything is
    read: the spec's own check would say only ``'': is empty``."""
    for option, spec in specs.items():
        if spec is not None and not spec.strip():
            raise CkptdiffError(f"{option} {spec!r}", "is empty", "give a file, folder, Hub repo id or URL")


_SECRET_OPTIONS = ("--token",)


def command_line(ctx: click.Context) -> str:
    """The command that produced a report (or ``convert.json``), with secrets scrubbed, shell-quoted, for the
    report's footer: the program as ``cli.main`` named it (``ckptdiff``, ``ckptdiff convert``), then its
    arguments."""
    argv = list((ctx.obj or {}).get("argv", sys.argv[1:]))
    for i, arg in enumerate(argv):
        if arg in _SECRET_OPTIONS and i + 1 < len(argv):
            argv[i + 1] = "***"
        elif arg.startswith(tuple(f"{option}=" for option in _SECRET_OPTIONS)):
            argv[i] = arg.split("=", 1)[0] + "=***"
    return " ".join([*map(shlex.quote, ctx.command_path.split()), *map(_quoted_scrubbed, argv)])


def _quoted_scrubbed(arg: str) -> str:
    """An argument shell-quoted without its secrets. Quoting writes a quote inside as ``'"'"'``, which would
    split a secret holding one past the scrubber: such an argument is scrubbed first (``***`` is then quoted)."""
    return shlex.quote(scrub_secrets(arg)) if "'" in arg else scrub_secrets(shlex.quote(arg))


def rename_rules_of(rules: Sequence[str], where: str = "--rename") -> list[RenameRule]:
    """The rules parsed (their module loads only for a run that has some); ``where``: the option or the config
    file's setting they came from, which their errors name."""
    if not rules:
        return []
    from .naming import parse_rename

    return [parse_rename(rule, where) for rule in rules]


def values_options(values: bool, jobs: int, scheduler: str | None) -> ValuesOptions | None:
    """Where --values runs: --scheduler's Dask cluster, --jobs local processes if given on the command line, or
    (None) threads in this process."""
    if not values:
        return None
    from click.core import ParameterSource

    from .pipeline import require_values

    require_values()  # before ckptdiff.values, which imports numpy
    from .values import ValuesOptions

    given = click.get_current_context().get_parameter_source("jobs") == ParameterSource.COMMANDLINE
    return ValuesOptions(jobs=jobs if given else None, scheduler=scheduler)
