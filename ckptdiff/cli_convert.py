"""``ckptdiff convert SRC OUT --to ENGINE``: the click command (thin: parse, call :mod:`ckptdiff.convert`, print)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .errors import CkptdiffError, inert_in_ci_log, printable_name

if TYPE_CHECKING:
    from .convert.plan import Plan

ENGINES = ("sglang", "vllm", "trtllm")
FORMATS = ("table", "markdown", "json")


if TYPE_CHECKING:  # click 8.2 made ParamType generic; 8.1, which setup.cfg allows, cannot subscript it
    _IntType = click.ParamType[int]
else:
    _IntType = click.ParamType


class ShardSize(_IntType):
    """``--max-shard-size``: a size, checked as click parses the command line (an empty one was "no sharding")."""

    name = "size"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from .convert.layout import parse_size

        try:
            return parse_size(str(value))
        except CkptdiffError as err:
            self.fail(err.defect, param, ctx)


@click.command(
    name="convert",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="\b\nExamples:\n"
    "  ckptdiff convert AQ-MedAI/Kimi-K2-Instruct-eagle3 ./k25-sglang --to sglang \\\n"
    "      --base moonshotai/Kimi-K2.5 --from-base moonshotai/Kimi-K2-Instruct --embed base\n"
    "  ckptdiff convert ./drafter ./drafter-vllm --to vllm --plan\n\n"
    "Manual: docs/convert.md of the ckptdiff repository.",
)
@click.argument("src", metavar="SRC", type=click.Path(readable=False))
@click.argument("out", metavar="OUT", type=click.Path(readable=False))
@click.option("--to", "engine", required=True, type=click.Choice(ENGINES), help="The engine that will load OUT.")
@click.option("--base", metavar="BASE", help="The model OUT will serve: its context length, hidden size, embedding.")
@click.option(
    "--from-base",
    metavar="BASE",
    help="The model SRC was trained for: its vocabulary is compared with BASE's before d2t is carried over.",
)
@click.option(
    "--embed",
    type=click.Choice(("base", "drop", "keep")),
    help="embed_tokens: taken from BASE, dropped (the engine injects the base's), or SRC's kept "
    "(default: keep if SRC has one, else drop).",
)
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan and write nothing.")
@click.option("--force", is_flag=True, help="Replace OUT (and a left OUT.partial) once the new output is proven.")
@click.option(
    "--max-shard-size", metavar="SIZE", type=ShardSize(), help="Shard by size (5GB, 500MiB) instead of as SRC did."
)
@click.option(
    "--allow-tokenizer-change", is_flag=True, help="Carry d2t to a BASE whose vocabulary differs or is unchecked."
)
@click.option(
    "--allow-event",
    "allowed_events",
    multiple=True,
    metavar="CODE",
    help="Accept this engine warning (e.g. aux_ids_default): the output loads, but not as trained (repeatable).",
)
@click.option(
    "--rename", "renames", multiple=True, metavar="REGEX=REPL", help="Rename SRC's tensors first (repeatable)."
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="How the plan prints."
)
@click.option(
    "--expand/--collapse",
    default=None,
    help="One plan row per tensor, or (default) tensors that differ only in layer/expert indices folded into one "
    "row each (JSON and convert.json list every tensor).",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    type=click.Path(readable=False),
    help="Settings file; convert takes expand from it (default: nearest ckptdiff.toml or pyproject.toml "
    "[tool.ckptdiff]).",
)
@click.option("--offline", is_flag=True, help="Use only cached Hub data.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, only the outcome.")
@click.option("--debug", is_flag=True, help="Show a traceback on errors (for bug reports).")
def convert_command(
    src: str,
    out: str,
    engine: str,
    base: str | None,
    from_base: str | None,
    embed: str | None,
    plan_only: bool,
    force: bool,
    max_shard_size: int | None,
    allow_tokenizer_change: bool,
    allowed_events: tuple[str, ...],
    renames: tuple[str, ...],
    fmt: str,
    expand: bool | None,
    config_path: str | None,
    offline: bool,
    quiet: bool,
    debug: bool,
) -> None:
    """Convert drafter SRC into OUT, the checkpoint ENGINE loads as trained, and prove it before naming it OUT.

    Every output tensor comes from a named input tensor (SRC's, or BASE's embedding with --embed base); the
    provenance map is written beside it as OUT/convert.json. Nothing is written under OUT until the output,
    built in OUT.partial, reads back as planned, passes ckptdiff's engine check and holds its inputs' bytes.

    Exit status: 0 converted (or, with --plan, a plan that holds), 1 not converted (the plan fails, or the
    output is not proven: OUT.partial is left), 2 trouble (bad usage, unreadable input, a refused plan, an
    output that cannot be written).
    """
    from .cli_inputs import command_line, refuse_blank_specs
    from .cli_output import exit_interrupted, run_started, terminal_width
    from .config_file import load_config
    from .convert.render import RENDERERS
    from .convert.run import ConvertRequest, convert, partial_of
    from .formats.layout import hang
    from .naming import parse_rename
    from .progress import terminal_progress
    from .sources import SourceOptions

    run_started()
    _check_allowed_events(allowed_events)  # a typo fails before anything is read
    refuse_blank_specs({"--base": base, "--from-base": from_base if base is not None else None})  # else: needs --base
    if offline:  # a store SRC or BASE, refused as the comparison refuses one: before either is read
        from .sources import refuse_offline_stores

        refuse_offline_stores(
            {"SRC": src, "--base": base}, "--offline", "only local paths and cached Hub repos are read offline"
        )

    settings = load_config(config_path)  # a broken config file fails before anything is read
    # the comparison's file: of its settings only how the plan's rows show applies here; a flag overrides it
    expand = bool(settings.get("expand") if expand is None else expand)
    request = ConvertRequest(
        src=src,
        out=out,
        engine=engine,
        base=base,
        from_base=from_base,
        embed=embed,  # type: ignore[arg-type]  # click's Choice
        plan_only=plan_only,
        force=force,
        max_shard_size=max_shard_size,
        allow_tokenizer_change=allow_tokenizer_change,
        renames=[parse_rename(rule, "--rename") for rule in renames],
        allowed_events=allowed_events,
        command=command_line(click.get_current_context()),
    )
    progress = None if quiet else terminal_progress()
    options = SourceOptions(offline=offline, progress=progress)

    def bar_for(label: str, total: int) -> object:
        if progress is None:
            return None
        return progress(label, total, "B").advance

    try:
        outcome = convert(request, options, bar_for)  # type: ignore[arg-type]
    except BaseException as stop:  # Ctrl-C, SIGTERM (ckptdiff.cli.Interrupted): say what is left unfinished
        if isinstance(stop, Exception):
            raise
        partial = partial_of(Path(out).expanduser())
        if not partial.exists():
            raise
        line = f"ckptdiff: interrupted: {printable_name(str(partial))} is incomplete"  # OUT as every line names it
        exit_interrupted(getattr(stop, "signum", signal.SIGINT), line)
    plan = outcome.plan
    width = terminal_width(sys.stdout)

    def render(plan: Plan) -> str:
        return RENDERERS[fmt](plan, expand=expand, width=width)

    style = "json" if fmt == "json" else "text"  # how a name that would form a workflow command is escaped

    def say(first: str, text: str, *, err: bool, indent: str = "  ", path: bool = False) -> None:
        """A line of the outcome, wrapped to its stream's terminal as the plan is (``path``: it names OUT, which
        may break after a ``/``)."""
        width = terminal_width(sys.stderr if err else sys.stdout)
        _echo("\n".join(hang(first, text, width, indent, guard=True, path=path)), err=err)

    if plan_only or not plan.ok:
        _echo(render(plan), nl=False, style=style)
        if not plan.ok:
            say("", f"ckptdiff: not converted: {_plan_failure(plan.problems)}", err=True)
        sys.exit(outcome.exit_code)
    if fmt == "json":
        _echo(json.dumps(outcome.document, indent=2), style="json")
    elif not quiet:
        _echo(render(plan), nl=False, style=style)
        _echo("")
    proof = outcome.proof
    if outcome.failure is not None:
        for problem in proof.problems if proof is not None else ():
            say("  ", problem, err=True, indent="    ")
        say("", f"ckptdiff: not converted: {outcome.failure}", err=True)
        sys.exit(outcome.exit_code)
    assert proof is not None
    engine = "" if plan.engine_proven else "; not proven by an engine"
    message = (
        f"converted: {outcome.written_to} ({len(plan.tensors)} tensors; {plan.label} check: {proof.engine_outcome}; "
        f"{proof.tensors_by_bytes + proof.tensors_by_digest} tensors compared byte for byte, "
        f"{proof.tensors_by_value} by value{engine})"
    )
    say("", message, err=fmt == "json", path=True)
    if proof.safetensors_check != "passed":
        say("  ", f"note: the safetensors package's check {proof.safetensors_check}", err=fmt == "json", indent="    ")
    for warning in proof.warnings:
        say("  ", f"warning: {warning}", err=fmt == "json", indent="    ")
    sys.exit(outcome.exit_code)


def _check_allowed_events(codes: tuple[str, ...]) -> None:
    """Refuse a ``--allow-event`` code no engine event has, or one that is never a warning (a conversion fails on
    an error whatever is allowed, and an info event never stops it): accepted, it changed nothing."""
    from .families.event_codes import EVENT_CODES, unknown_code

    for code in codes:
        if not code.strip():  # "$CODE" unset: named as typed, not as "--allow-event :"
            raise CkptdiffError(f"--allow-event {code!r}", "is empty", "give a warning's code, e.g. lm_head_random")
        why = unknown_code(code)
        if why is not None:
            raise CkptdiffError(f"--allow-event {code}", why)
        if "warning" not in EVENT_CODES[code]:
            severity = EVENT_CODES[code][0]
            effect = "fails a conversion whatever is allowed" if severity == "error" else "never stops a conversion"
            raise CkptdiffError(
                f"--allow-event {code}",
                f"is an {severity} event, which {effect}",
                "--allow-event accepts warnings: the output loads, but not as trained",
            )


def _plan_failure(problems: list[str]) -> str:
    """The last line of a failed plan: its problem, or the first of many (the plan above lists them all)."""
    if len(problems) == 1:
        return f"the plan fails ({problems[0]})"
    more = len(problems) - 1
    return f"the plan fails ({problems[0]}; and {more} more problem{'s' if more > 1 else ''}, listed with the plan)"


def _echo(text: str, *, err: bool = False, nl: bool = True, style: str = "text") -> None:
    """A line or the plan on stdout or stderr, as a CI log shows it: no tensor name forms a workflow command
    (:func:`ckptdiff.errors.inert_in_ci_log`)."""
    from .cli_output import echo_checked

    echo_checked(inert_in_ci_log(text, style), err=err, nl=nl)


def is_convert(args: list[str]) -> bool:
    """``ckptdiff convert ...``: the first word is ``convert`` (a folder named so is ``./convert``), unless a
    folder of that name exists and no ``--to`` follows (then it is the comparison's A)."""
    import os

    if not args or args[0] != "convert":
        return False
    if not os.path.exists("convert"):
        return True
    return any(a == "--to" or a.startswith("--to=") for a in args[1:])


__all__ = ["CkptdiffError", "convert_command", "is_convert"]
