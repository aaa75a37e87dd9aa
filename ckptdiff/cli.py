"""The command line: parse, call compare, render, write, exit (0 compatible, 1 incompatible, 2 trouble).

Kept thin and light: heavy modules (huggingface_hub, torch) load only when a comparison needs them, so
``ckptdiff --help`` is instant. :func:`main` is the process's entry (the ``ckptdiff`` console script and
``python -m ckptdiff``): the one place that installs signal handlers, and click parses the command line before
anything is read, sent or set in the environment (:func:`.cli_environment.set_environment`).
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import traceback
from dataclasses import replace

import click

from .cli_completion import completing_convert
from .cli_destinations import check_report_destinations, refuse_reports_over_inputs
from .cli_environment import set_environment
from .cli_help import EPILOG, GroupedCommand
from .cli_inputs import (
    command_line,
    refuse_blank_specs,
    refuse_empty_globs,
    refuse_lone_options,
    rename_rules_of,
    specs_from_config,
    values_options,
)
from .cli_output import (
    EXIT_TROUBLE,
    STEP_SUMMARY_LIMIT,
    StdoutClosed,
    append_step_summary,
    deliver,
    exit_interrupted,
    file_format,
    format_for,
    run_started,
    save_format,
    say,
    silence_stdout,
    stdout_failed,
    wants_color,
    write_failed,
    write_report,
)
from .errors import DISK_WRITE_ERRNOS, CkptdiffError, scrub_secrets, url_credentials_pinned
from .families import profile_choices
from .families.engines import ENGINE_CHOICES
from .formats import FORMAT_ALIASES, FORMAT_NAMES
from .version import __version__

#: Specs, -o, --save and --config are typed as paths so that shell completion offers files (a Hub repo or a URL is
#: accepted as it is). Nothing is checked here: click's own readability check would refuse an unreadable file in
#: its usage-error block, before the reader or the writer could name the file and the defect in one line.
PATH = click.Path(readable=False)
SPEC = PATH


@click.command(
    cls=GroupedCommand,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("a", metavar="A", required=False, type=SPEC)
@click.argument("b", metavar="[B]", required=False, type=SPEC)
@click.option(
    "--format",
    "fmt",
    type=click.Choice((*FORMAT_NAMES, *FORMAT_ALIASES)),
    help="Report format (default: table, or from the -o file's extension: .md, .json, .xml, .txt, .html); "
    "md is markdown; github: the table with ::error/::warning annotations for a GitHub job's log; html: one "
    "self-contained page (a table to filter; with --values, drift plots by layer).",
)
@click.option("-o", "--output", metavar="FILE", type=PATH, help="Write the report to FILE instead of stdout.")
@click.option(
    "--save",
    "saves",
    multiple=True,
    metavar="FILE",
    type=PATH,
    help="Also write the report to FILE, in the format its extension names (.md, .json, .html, .xml, .txt): "
    "one comparison, several reports (repeatable).",
)
@click.option(
    "--profile",
    metavar="|".join(profile_choices()),
    help="Architecture knowledge to apply (default: auto, which detects it from config.json).",
)
@click.option(
    "--base", metavar="SPEC", type=SPEC, help="Base (target) model: verify weights the engine injects from it."
)
@click.option(
    "--engine",
    "engines",
    multiple=True,
    type=click.Choice(ENGINE_CHOICES),
    help="Replay this serving engine's drafter loader on each side (repeatable; all: every engine). "
    "With --engine, B is optional: one checkpoint is checked on its own.",
)
@click.option(
    "--vllm-runner",
    type=click.Choice(("v2", "v1")),
    default="v2",
    show_default=True,
    help="The vLLM model runner --engine vllm models: v2 (vLLM's default) or v1 (VLLM_USE_V2_MODEL_RUNNER=0); they "
    "read the drafter's aux-layer ids from different keys and share the target's embedding differently.",
)
@click.option(
    "--rename",
    "renames",
    multiple=True,
    metavar="REGEX=REPLACEMENT",
    help="Rename tensors of both sides before matching (re.sub, in order; repeatable).",
)
@click.option(
    "--values",
    "values",
    is_flag=True,
    help="Also compare tensor contents (max/mean |Δ|, cosine, relative L2; needs ckptdiff[values]); downloads "
    "Hub weights into the HF cache; .bin/.pt files need ckptdiff[torch].",
)
@click.option(
    "--values-only",
    "values_only",
    multiple=True,
    metavar="GLOB",
    help="--values for the tensors GLOB matches only (on the full name; * crosses dots; repeatable): a Hub repo or "
    "store is read by each tensor's byte range, not whole files.",
)
@click.option(
    "--scheduler",
    metavar="tcp://HOST:PORT",
    help="With --values: run the value pass on this dask.distributed scheduler's workers, which read the "
    "files themselves (needs ckptdiff[dask]).",
)
@click.option("--offline", is_flag=True, help="Use only cached Hub data; make no network requests.")
@click.option(
    "--follow-symlinks",
    is_flag=True,
    help="Read a local checkpoint's files that are symlinks to outside its folder (refused by default).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 256),
    default=128,
    show_default=True,
    help="Most shard-header reads in flight at once, both sides together (Hub, object stores). Given with "
    "--values: also that many local processes compute the values (default: threads on the free cores).",
)
@click.option("--ignore", multiple=True, metavar="GLOB", help="Leave tensors matching GLOB out (repeatable).")
@click.option(
    "--allow-missing",
    multiple=True,
    metavar="GLOB",
    help="Accept tensors matching GLOB that are in A but not in B (repeatable).",
)
@click.option(
    "--allow-extra",
    multiple=True,
    metavar="GLOB",
    help="Accept tensors matching GLOB that are in B but not in A (repeatable).",
)
@click.option(
    "--allow-dtype-change",
    multiple=True,
    is_flag=False,
    flag_value="*",
    metavar="[FROM:TO]",
    help="Accept dtype FROM in A becoming TO in B (e.g. BF16:F32); bare: any (repeatable).",
)
@click.option(
    "--allow-event",
    multiple=True,
    metavar="ENGINE:CODE",
    help="Accept an engine event that would fail the gate, e.g. sglang:lm_head_random (globs; repeatable).",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    default=False,
    help="Let a comparison in which no tensor is compared pass (by default it fails: nothing_compared).",
)
@click.option(
    "--fail-on-conditional",
    is_flag=True,
    default=False,
    help="Fail the gate on an engine verdict that holds only on some targets (without --base it is a notice).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning"]),
    help="Which findings fail the gate: errors only (default) or warnings too.",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    type=PATH,
    help="Settings file (default: nearest ckptdiff.toml or pyproject.toml [tool.ckptdiff]).",
)
@click.option(
    "--expand/--collapse",
    default=None,
    help="One row per tensor, or (default) layer/expert patterns collapsed into one row each.",
)
@click.option(
    "--only-diffs/--all",
    " /--all-rows",
    "only_diffs",
    default=None,
    help="Hide tensors that match, or list them all (default: the table hides them, markdown lists them).",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the table by severity; auto: on a terminal, unless NO_COLOR is set (FORCE_COLOR forces it).",
)
@click.option("--no-step-summary", is_flag=True, help="Do not append the markdown report to $GITHUB_STEP_SUMMARY.")
@click.option(
    "-q", "--quiet", is_flag=True, help="Only the verdict and what failed it; no progress or notes on stderr."
)
@click.option("-v", "--verbose", is_flag=True, help="Also show info findings and engine events.")
@click.option("--debug", is_flag=True, help="Show a traceback on errors (for bug reports).")
@click.version_option(__version__, "-V", "--version", prog_name="ckptdiff")
def command(
    a: str | None,
    b: str | None,
    fmt: str | None,
    output: str | None,
    saves: tuple[str, ...],
    profile: str | None,
    base: str | None,
    ignore: tuple[str, ...],
    allow_missing: tuple[str, ...],
    allow_extra: tuple[str, ...],
    allow_dtype_change: tuple[str, ...],
    fail_on: str | None,
    config_path: str | None,
    expand: bool | None,
    only_diffs: bool | None,
    no_step_summary: bool,
    offline: bool,
    follow_symlinks: bool,
    jobs: int,
    quiet: bool,
    debug: bool,
    color: str = "auto",
    verbose: bool = False,
    values: bool = False,
    values_only: tuple[str, ...] = (),
    scheduler: str | None = None,
    renames: tuple[str, ...] = (),
    engines: tuple[str, ...] = (),
    allow_event: tuple[str, ...] = (),
    allow_empty: bool = False,
    fail_on_conditional: bool = False,
    vllm_runner: str = "v2",
) -> None:
    """Compare checkpoints A and B: tensor names, shapes, dtypes and config.json.

    A and B are local files or folders (model.safetensors, a *.safetensors.index.json, ...), Hugging Face
    Hub repos (org/name[@revision], hf://org/name[@revision][/subfolder]), or object-store URLs (s3://, gs://,
    az://, https://; needs ckptdiff[s3], [gcs], [azure] or [http]). Only headers are read, never weights.
    With --engine, B may be left out: ckptdiff A --engine sglang [--base BASE] checks whether that engine
    loads A as trained.

    Exit status: 0 compatible, 1 incompatible, 2 trouble (bad usage, unreadable or invalid checkpoint).

    Without A and B, the config file's reference and candidate are compared (the pre-commit hook's way).
    """
    run_started()
    set_environment(debug=debug, offline=offline)  # the command line is accepted: nothing was read or sent before
    from .config_file import load_config, merge_policy
    from .formats import RenderOptions, load_format, render
    from .pipeline import compare_specs
    from .sources import SourceOptions, refuse_offline_stores

    settings = load_config(config_path)  # a broken config file fails before anything is read
    save_formats = [save_format(path) for path in saves]  # an extension naming no format: before any read
    fmt = format_for(fmt, output, settings.get("format"))  # an -o extension naming no format: before any read
    file_format(fmt, output)  # --format github's -o file gets its extension's format: checked before any read too
    a, b = specs_from_config(a, b, settings)
    policy = merge_policy(
        settings,
        {
            "ignore": ignore,
            "allow_missing": allow_missing,
            "allow_extra": allow_extra,
            "allow_dtype_change": allow_dtype_change,
            "allow_event": allow_event,
            "allow_empty": allow_empty,
            "fail_on_conditional": fail_on_conditional,
            "fail_on": fail_on,
        },
    )
    profile = settings.get("profile", "auto") if profile is None else profile  # --profile "" is no profile
    if profile not in profile_choices():
        raise click.BadParameter(f"choose from {', '.join(profile_choices())}", param_hint="--profile")
    engines = engines or tuple(settings.get("engine", ()))
    refuse_empty_globs(values_only)
    refuse_blank_specs({"--base": base})
    values = values or bool(values_only)  # --values-only implies --values
    refuse_lone_options(b, engines, values, scheduler)
    # --rename replaces the config file's rules, like every other flag; a bad rule fails before anything is read
    if renames:
        rename_rules = rename_rules_of(renames)
    else:
        rename_rules = rename_rules_of(settings.get("rename", ()), f"{settings.shown}: rename")
    from .progress import terminal_progress

    options = SourceOptions(
        offline=offline,
        jobs=jobs,
        progress=None if quiet else terminal_progress(),
        follow_symlinks=follow_symlinks,
    )
    notify = None if quiet else (lambda message: say(f"ckptdiff: {message}"))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if no_step_summary or not settings.get("step_summary", True):
        step_summary = None
    inputs = {"A": a, "B": b, "--base": base}
    if offline:  # a store side is refused before the other side's read, which may be long
        refuse_offline_stores(inputs, "--offline", "only local paths and cached Hub repos are read offline")
    refuse_reports_over_inputs((output, *saves), inputs)
    refuse_reports_over_inputs((step_summary,), inputs, "GITHUB_STEP_SUMMARY names it; or pass --no-step-summary")
    check_report_destinations((output, *saves))
    from .families.engine_settings import EngineSettings, using

    with using(EngineSettings(vllm_runner=vllm_runner)):  # the engines' rules read it (--vllm-runner)
        report = compare_specs(
            a,
            b,
            profile=profile,
            base=base,
            policy=policy,
            source_options=options,
            values=values,
            values_options=values_options(values, jobs, scheduler),
            values_only=values_only,
            notify=notify,
            renames=rename_rules,
            engines=engines,
            command=command_line(click.get_current_context()),
            meanwhile=lambda: load_format(fmt),
        )
    to_stdout = output in (None, "-")
    if only_diffs is None:  # the terminal table hides matches unless --all; markdown lists every row
        only_diffs = settings.get("only_diffs", fmt in ("table", "github"))
    view = RenderOptions(
        color=fmt == "table" and (wants_color(color, sys.stdout) if to_stdout else color == "always"),
        expand=bool(settings.get("expand") if expand is None else expand),
        only_diffs=bool(only_diffs),
    )
    verbosity = -1 if quiet else 1 if verbose else 0
    try:
        text: str | None = deliver(report, fmt, output, view, verbosity, color)
    except StdoutClosed:  # the reader of stdout left (`| head`): the reports asked for as files are still written
        text = None
    for path, saved_as in zip(saves, save_formats, strict=True):
        write_report(render(report, saved_as, replace(view, color=False, only_diffs=saved_as == "table")), path)
    if step_summary:
        plain = replace(view, color=False, expand=False)
        reuse = text is not None and fmt == "markdown" and not view.expand
        summary = text if reuse and text is not None else render(report, "markdown", plain)
        if len(summary) > STEP_SUMMARY_LIMIT // 4 and len(summary.encode()) > STEP_SUMMARY_LIMIT:
            summary = render(report, "markdown", replace(plain, only_diffs=True))  # GitHub's limit: differences only
        append_step_summary(summary, step_summary)
    if text is None:
        raise StdoutClosed()
    sys.exit(report.exit_code)


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) or SIGTERM, raised in the main thread so that the run unwinds like any error: its pools
    cancel the reads not started (those under way end by their timeouts), partial files and the --values scratch
    folder are removed, worker processes are stopped. A BaseException, as KeyboardInterrupt is, so that no
    ``except Exception`` takes it for a failure, and not a KeyboardInterrupt, which click turns into "Aborted"."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame: object) -> None:
    # A second signal ends the process at once (the default action), should the clean-up itself hang.
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_DFL)
    raise Interrupted(signum)


def _not_lost(unraisable: sys.UnraisableHookArgs) -> None:
    """The signal came while Python ran a callback whose errors it ignores (a weakref's, the collector's, a
    ``__del__``), so its Interrupted could not propagate: it is raised again 10 ms later, from SIGALRM, where the
    run's own code has resumed (a lost one let the run go on to its end, or to a timeout). Raising it from here
    would be ignored too."""
    if isinstance(unraisable.exc_value, Interrupted):
        signum = unraisable.exc_value.signum
        signal.signal(signal.SIGALRM, lambda _alarm, frame: _interrupt(signum, frame))
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    sys.__unraisablehook__(unraisable)


def main(argv: list[str] | None = None) -> None:
    """Entry point: CkptdiffError → one line on stderr and exit 2; never a traceback unless --debug. Ctrl-C and
    SIGTERM cancel the run (:class:`Interrupted`): exit 130 or 143 once its clean-up has run."""
    args = sys.argv[1:] if argv is None else argv
    handlers = {}
    unraisable_hook = sys.unraisablehook
    if threading.current_thread() is threading.main_thread():  # an in-process runner's thread may not install them
        for stop in (signal.SIGINT, signal.SIGTERM):
            handlers[stop] = signal.signal(stop, _interrupt)
        handlers[signal.SIGALRM] = signal.getsignal(signal.SIGALRM) or signal.SIG_DFL
        sys.unraisablehook = _not_lost
    try:
        with url_credentials_pinned("\n".join(args)):  # no user:password@ of the command line is ever printed
            _run(args)
    except Interrupted as interrupt:  # one that came while another line waited on a full stderr
        exit_interrupted(interrupt.signum)
    except OSError as err:
        # stderr itself cannot be written (`2>log` on a full disk): no line can say so, but the run is still in
        # trouble (exit 2), not the "incompatible" (exit 1) of the interpreter's traceback nobody could read
        if err.errno not in DISK_WRITE_ERRNOS and not isinstance(err, BrokenPipeError):
            raise
        silence_stdout(sys.stderr)  # its buffered rest would fail again at the interpreter's exit
        sys.exit(EXIT_TROUBLE)
    finally:
        if handlers:
            signal.setitimer(signal.ITIMER_REAL, 0)  # an interrupt raised again (_not_lost) that did not come
        for stop, handler in handlers.items():
            signal.signal(stop, handler)
        sys.unraisablehook = unraisable_hook


def _run(args: list[str]) -> None:
    debug = "--debug" in args
    chosen: click.Command = command
    leading = 1 if args[:1] == ["--debug"] else 0  # `ckptdiff --debug convert ...`: convert takes --debug too
    completing = not args and completing_convert()  # a shell completing `ckptdiff convert …`: its argv is empty
    if completing or args[leading : leading + 1] == ["convert"]:  # beside the comparison (ckptdiff/cli_convert.py)
        from .cli_convert import convert_command, is_convert

        if completing or is_convert(args[leading:]):
            chosen, args = convert_command, args[:leading] + args[leading + 1 :]
    state: dict[str, object] = {"argv": list(args)}  # "started" once a command's callback runs (run_started)
    stdout, stderr = sys.stdout, sys.stderr
    try:
        name = "ckptdiff convert" if chosen is not command else "ckptdiff"
        chosen.main(args=args, prog_name=name, complete_var="_CKPTDIFF_COMPLETE", standalone_mode=False, obj=state)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except SystemExit:
        if sys.stdout is not stdout:  # click's own output (--help, --version) met a closed pipe: it exits 1
            sys.stdout, sys.stderr = stdout, stderr
            silence_stdout()
            sys.exit(EXIT_TROUBLE)
        raise
    except click.ClickException as err:
        shown = io.StringIO()
        err.show(file=shown)  # the usage and the message, which may quote an argument
        say(scrub_secrets(shown.getvalue().rstrip("\n")))  # it may quote an argument: a URL's user:password@
        sys.exit(EXIT_TROUBLE)
    except click.exceptions.Abort:
        click.echo("ckptdiff: aborted", err=True)
        sys.exit(EXIT_TROUBLE)
    except CkptdiffError as err:
        if debug:
            say(scrub_secrets(traceback.format_exc()))
        say(f"ckptdiff: {scrub_secrets(err.line())}")
        sys.exit(EXIT_TROUBLE)
    except Interrupted as stop:
        exit_interrupted(stop.signum)
    except KeyboardInterrupt:
        exit_interrupted(signal.SIGINT)
    except (StdoutClosed, BrokenPipeError):  # the reader left (`| head`): nothing to say, nothing more to write
        silence_stdout()
        sys.exit(EXIT_TROUBLE)
    except Exception as err:  # a bug in ckptdiff, still one line unless --debug
        if isinstance(err, OSError) and err.errno in DISK_WRITE_ERRNOS:
            if not state.get("started"):  # click's own output (--help, --version), the only write before a command
                stdout_failed(err)
            write_failed(err, debug)
        if debug:
            say(scrub_secrets(traceback.format_exc()))
        detail = scrub_secrets(" ".join(f"{type(err).__name__}: {err}".split()))[:300]
        say(f"ckptdiff: internal error: {detail} (rerun with --debug for a traceback)")
        sys.exit(EXIT_TROUBLE)
