"""The command line: parse, call compare, render, write, exit (0 compatible, 1 incompatible, 2 trouble).

Kept thin and light: heavy modules (huggingface_hub, torch) load only when a comparison needs them, so
``ckptdiff --help`` is instant.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import traceback
from pathlib import Path

import click

from . import __version__
from .errors import CkptdiffError, ReportWriteError

EXIT_TROUBLE = 2
_TOKEN_PATTERN = re.compile(r"hf_[A-Za-z0-9]{8,}")
_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN")


def scrub_secrets(text: str) -> str:
    """Remove Hugging Face tokens from anything we print."""
    for variable in _TOKEN_VARIABLES:
        token = os.environ.get(variable)
        if token and len(token) >= 4:
            text = text.replace(token, "***")
    return _TOKEN_PATTERN.sub("hf_***", text)


def write_report(text: str, destination: str | None) -> None:
    """Write the whole report before the caller exits. A file is replaced only once the new one is complete."""
    if destination is None or destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(destination)
    if target.is_dir():
        raise ReportWriteError(destination, "is a folder; give a file name for the report")
    if target.exists() and not target.is_file():
        # a device or pipe (e.g. /dev/null, a fifo): nothing to replace atomically
        try:
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as err:
            raise ReportWriteError(destination, f"cannot write the report: {err.strerror or err}") from None
        return
    folder = target.parent if str(target.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise ReportWriteError(destination, f"cannot write the report: {err.strerror or err}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o777)
        else:
            os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except OSError as err:
        Path(temporary).unlink(missing_ok=True)
        raise ReportWriteError(destination, f"cannot write the report: {err.strerror or err}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _format_for(fmt: str | None, output: str | None) -> str:
    if fmt:
        return fmt
    if output and output != "-":
        from .formats import FORMAT_BY_EXTENSION

        return FORMAT_BY_EXTENSION.get(Path(output).suffix.lower(), "table")
    return "table"


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]),
              help="Report format (default: table, or from the -o file's extension: .md, .json).")  # fmt: skip
@click.option("-o", "--output", metavar="FILE", help="Write the report to FILE instead of stdout.")
@click.option("--profile", default="auto", show_default=True, metavar="auto|eagle3|none",
              help="Architecture knowledge to apply; auto detects it from config.json.")  # fmt: skip
@click.option("--base", metavar="SPEC", help="Base (target) model: verify weights the engine injects from it.")
@click.option("--rename", "renames", multiple=True, metavar="REGEX=REPLACEMENT",
              help="Rename tensors of both sides before matching (re.sub, in order; repeatable).")  # fmt: skip
@click.option("--values", "values", is_flag=True,
              help="Also compare tensor contents (max/mean |Δ|, cosine, relative L2); needs ckptdiff[torch] "
                   "and downloads Hub weights into the HF cache.")  # fmt: skip
@click.option("--offline", is_flag=True, help="Use only cached Hub data; make no network requests.")
@click.option("--jobs", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Shard headers fetched in parallel from the Hub.")  # fmt: skip
@click.option("-q", "--quiet", is_flag=True, help="No progress or diagnostics on stderr.")
@click.option("--debug", is_flag=True, help="Show a traceback on errors (for bug reports).")
@click.version_option(__version__, "-V", "--version", prog_name="ckptdiff")
def command(
    a: str, b: str, fmt: str | None, output: str | None, profile: str, base: str | None,
    offline: bool, jobs: int, quiet: bool, debug: bool, values: bool = False, renames: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Compare checkpoints A and B: tensor names, shapes, dtypes and config.json.

    A and B are local files or folders (model.safetensors, a *.safetensors.index.json, ...) or Hugging Face
    Hub repos, org/name[@revision]. Only headers are read, never weights.

    Exit status: 0 compatible, 1 incompatible, 2 trouble (bad usage, unreadable or invalid checkpoint).
    """
    from .compare import compare_specs
    from .formats import render
    from .profiles import profile_names
    from .sources import SourceOptions

    if profile not in ("auto", "none", *profile_names()):
        raise click.BadParameter(f"choose from auto, none, {', '.join(profile_names())}", param_hint="--profile")
    from .profiles.naming import parse_rename

    rename_rules = [parse_rename(rule) for rule in renames]  # a bad rule fails before anything is read
    options = SourceOptions(offline=offline, jobs=jobs, progress=not quiet and sys.stderr.isatty())
    if values:
        from .values import require_torch

        require_torch()  # fail before any download
    notify = None if quiet else (lambda message: click.echo(f"ckptdiff: {message}", err=True))
    report = compare_specs(a, b, profile=profile, base=base, source_options=options, values=values, notify=notify,
                           renames=rename_rules)  # fmt: skip
    fmt = _format_for(fmt, output)
    color = output in (None, "-") and fmt == "table" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    text = render(report, fmt, color=color)
    write_report(text, output)
    sys.exit(report.exit_code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: CkptdiffError → one line on stderr and exit 2; never a traceback unless --debug."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        command.main(args=args, prog_name="ckptdiff", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(EXIT_TROUBLE)
    except click.exceptions.Abort:
        click.echo("ckptdiff: aborted", err=True)
        sys.exit(EXIT_TROUBLE)
    except CkptdiffError as err:
        if debug:
            click.echo(scrub_secrets(traceback.format_exc()), err=True)
        click.echo(f"ckptdiff: {scrub_secrets(err.line())}", err=True)
        sys.exit(EXIT_TROUBLE)
    except KeyboardInterrupt:
        click.echo("ckptdiff: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(EXIT_TROUBLE)
    except Exception as err:  # a bug in ckptdiff, still one line unless --debug
        if debug:
            click.echo(scrub_secrets(traceback.format_exc()), err=True)
        detail = scrub_secrets(" ".join(f"{type(err).__name__}: {err}".split()))[:300]
        click.echo(f"ckptdiff: internal error: {detail} (rerun with --debug for a traceback)", err=True)
        sys.exit(EXIT_TROUBLE)
