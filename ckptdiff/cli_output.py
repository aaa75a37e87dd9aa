"""Writing the report: stdout or a file replaced only once complete, the verdict on stderr, the step summary, and
how the terminal is (its width, whether it takes colour)."""

from __future__ import annotations

import errno
import os
import stat
import sys
import traceback
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn

import click

from .cli_destinations import destination_status, stream_named
from .errors import (
    DISK_WRITE_ERRNOS,
    ReportWriteError,
    inert_in_ci_log,
    printable_name,
    scrub_secrets,
    write_failure,
)
from .formats import FORMAT_ALIASES

if TYPE_CHECKING:
    from .formats import RenderOptions
    from .report import Report

#: The exit status of trouble: bad usage, an unreadable input, an output that cannot be written.
EXIT_TROUBLE = 2
#: GitHub rejects a step summary over 1 MiB: a longer report is cut to its differences (or, failing that, a note).
STEP_SUMMARY_LIMIT = 1024 * 1024
STEP_SUMMARY_TOO_LONG = "## ckptdiff\n\nEven the differences alone are over 1 MiB, too long for a step summary.\n"


class StdoutClosed(Exception):
    """The reader of stdout went away. Not an OSError: click would end the run with exit 1 for one."""


def write_report(text: str, destination: str | None) -> None:
    """Write the whole report before the caller exits. A file is replaced only once the new one is complete."""
    stream = None if destination is None or destination == "-" else stream_named(destination)
    if stream is not None and stream is sys.stderr:
        try:
            write_text(stream, text)
            stream.flush()
        except OSError as err:
            raise ReportWriteError(destination or "", f"cannot write the report: {write_failure(err)}") from None
        return
    if destination is None or destination == "-" or stream is sys.stdout:
        try:
            write_text(sys.stdout, text)
            sys.stdout.flush()
        except OSError as err:
            if err.errno == errno.EPIPE:  # the reader left (`| head`): main() ends quietly
                raise StdoutClosed() from None
            silence_stdout()  # the buffer's rest would fail again at the interpreter's exit (exit 120, a traceback)
            raise ReportWriteError("stdout", f"cannot write the report: {write_failure(err)}") from None
        return
    # a link (latest.json -> reports/run-42.json) is written through, as `> latest.json` would: the file it names
    # is replaced, the link stays
    target = Path(os.path.realpath(destination)) if os.path.islink(destination) else Path(destination)
    status = destination_status(destination)
    if status is not None and not stat.S_ISREG(status.st_mode):
        # a device or pipe (e.g. /dev/null, a fifo): nothing to replace atomically. Opened by the name given, not
        # the link's target: /dev/stdout's, when stdout is a pipe, is /proc/self/fd/1's "pipe:[…]", no file's name
        try:
            with open(destination, "w", encoding="utf-8") as handle:
                write_text(handle, text)
        except OSError as err:
            raise ReportWriteError(destination, f"cannot write the report: {write_failure(err)}") from None
        return
    import tempfile  # only a report written to a file needs it (and the random module it loads)

    folder = target.parent if str(target.parent) else Path(".")
    try:
        # the name cut: a 250-byte report name is valid, the temporary's would not be with the prefix's dots added
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise ReportWriteError(destination, f"cannot write the report: {err.strerror or err}") from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            write_text(out, text)
            out.flush()
            os.fsync(out.fileno())
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o777)
        else:
            os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except OSError as err:
        Path(temporary).unlink(missing_ok=True)
        raise ReportWriteError(destination, f"cannot write the report: {write_failure(err)}") from None


#: A report is written this many characters at a time: each piece is encoded into memory the last one freed.
_WRITE_CHARACTERS = 1 << 20


def write_text(handle: IO[str], text: str) -> None:
    """``text`` written in pieces: a Kimi-K2 JSON report (27 MB) encoded whole is a second copy of it in fresh
    memory, which costs more than the encoding (measured: 68-95 ms against 13-28 ms to a file).

    A handle on a file descriptor is written through it, every byte accounted for: a write that stops short (a
    file size limit reached mid-piece) is followed by the one that fails and says why, where Python's buffered
    file took the short write for the whole and dropped the rest (a cut report, and exit 0)."""
    try:
        descriptor = handle.fileno()
    except (OSError, ValueError, AttributeError):  # no descriptor: an in-process runner's buffer
        descriptor = None
    if descriptor is None:
        for start in range(0, len(text), _WRITE_CHARACTERS):
            handle.write(text[start : start + _WRITE_CHARACTERS])
        return
    handle.flush()  # what was written to it before goes first
    encoding, errors = getattr(handle, "encoding", None) or "utf-8", getattr(handle, "errors", None) or "strict"
    for start in range(0, len(text), _WRITE_CHARACTERS):
        view = memoryview(text[start : start + _WRITE_CHARACTERS].encode(encoding, errors))
        while view:
            view = view[os.write(descriptor, view) :]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def format_for(fmt: str | None, output: str | None, default: str | None = None) -> str:
    """--format, else the -o file's extension, else the config file's format, else table. An extension that
    names no format (``-o report.html``) is refused rather than filled with a table."""
    if fmt:
        return FORMAT_ALIASES.get(fmt, fmt)
    if output and output != "-":
        from .formats import FORMAT_BY_EXTENSION

        suffix = Path(output).suffix.lower()
        by_extension = FORMAT_BY_EXTENSION.get(suffix)
        if by_extension:
            return by_extension
        if suffix and not default:
            known = ", ".join(sorted(FORMAT_BY_EXTENSION))
            raise ReportWriteError(
                output, f"no report format is written as {suffix}", f"give --format, or name it {known}"
            )
    return default or "table"


def file_format(fmt: str, output: str | None) -> str:
    """The format the report file ``output`` is written in: ``fmt``, except for ``github``, whose annotations go to
    stdout (the job's log) while the file gets the format its extension names. Called before anything is read, so
    that ``--format github -o ckptdiff.log`` is refused then, not once the report is ready."""
    if fmt != "github" or output in (None, "-"):
        return fmt
    from .formats import FORMAT_BY_EXTENSION

    suffix = Path(output).suffix.lower()
    if not suffix:
        return "table"
    if suffix not in FORMAT_BY_EXTENSION:
        known = ", ".join(sorted(FORMAT_BY_EXTENSION))
        raise ReportWriteError(
            output,
            f"no report format is written as {suffix}",
            f"with --format github the annotations go to stdout and the file gets the format its extension names: "
            f"{known}",
        )
    return FORMAT_BY_EXTENSION[suffix]


def save_format(path: str) -> str:
    """The format a ``--save`` file is written in, by its extension. ``--save -`` is refused: it printed a second
    report (a table, whatever the first one's format) after the one on stdout, so ``--format json --save -``
    fed a reader JSON with a table after it."""
    if path == "-":
        raise ReportWriteError("--save -", "names stdout; --save writes a file", "the report goes to stdout without -o")
    return format_for(None, path)


def wants_color(choice: str, stream: IO[str]) -> bool:
    """--color always/never; auto: NO_COLOR (when not empty, no-color.org) turns it off, FORCE_COLOR (when not
    empty) on, else colour only on a terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _isatty(stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width(stream: IO[str]) -> int | None:
    """The width to wrap the table at: the terminal's, else $COLUMNS, else none (a file or pipe keeps long lines)."""
    if _isatty(stream):
        import shutil

        return max(shutil.get_terminal_size().columns, 40)
    columns = os.environ.get("COLUMNS", "")
    return max(int(columns), 40) if columns.isdigit() and int(columns) > 0 else None


def append_step_summary(markdown: str, path: str | None) -> None:
    """GitHub Actions: append the markdown report to the job's step summary file ($GITHUB_STEP_SUMMARY)."""
    if not path:
        return
    if len(markdown.encode()) > STEP_SUMMARY_LIMIT:
        markdown = STEP_SUMMARY_TOO_LONG
    try:
        _append_whole(path, markdown.encode("utf-8"))
    except OSError as err:
        raise ReportWriteError(
            path, f"cannot append the step summary: {err.strerror or err}", "or pass --no-step-summary"
        ) from None


def _append_whole(path: str, data: bytes) -> None:
    """Append ``data`` to ``path``, or, when a write fails (a full disk), leave the file as it was: the earlier
    steps' summaries without half of this one after them. Unbuffered, so that nothing is written after the cut."""
    out = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        before = os.fstat(out).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(out, view) :]
        except OSError:
            if stat.S_ISREG(os.fstat(out).st_mode):
                os.truncate(out, before)
            raise
    finally:
        os.close(out)


#: How each format escapes what could start a workflow command in a CI log (:func:`.errors.inert_in_ci_log`).
LOG_STYLES = {"json": "json", "junit": "xml", "html": "xml"}


def run_started() -> None:
    """Called first by each command's callback: an unhandled write error from then on is the run's (a file, shared
    memory), no longer click's own output to stdout (--help, --version, a completion script)."""
    context = click.get_current_context(silent=True)
    if context is not None and isinstance(context.obj, dict):
        context.obj["started"] = True


def echo_checked(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` for a command's own output: a full disk under stdout (or stderr) is one line naming it, as
    a report's write is (``stdout: cannot write: No space left on device``), not a failure of the run's files."""
    try:
        write_text(sys.stderr if err else sys.stdout, text + ("\n" if nl else ""))  # every byte, as a report's
    except OSError as error:
        if error.errno == errno.EPIPE and not err:  # the reader left (`| head`): main() ends quietly
            raise StdoutClosed() from None
        if error.errno not in DISK_WRITE_ERRNOS:
            raise
        silence_stdout(sys.stderr if err else None)  # the buffer's rest would fail again at the interpreter's exit
        raise ReportWriteError("stderr" if err else "stdout", f"cannot write: {write_failure(error)}") from None


def say_if_it_can(line: str) -> None:
    """One line on stderr if stderr takes it now, else none: a run ending on a signal must end with the signal's
    status whether stderr is a full disk (the write fails) or a pipe nobody reads (the write would wait forever).
    To a pipe the line goes in one write that never waits, cut to what a pipe takes whole (PIPE_BUF bytes): all
    of it or nothing, however little room is left or whoever else writes there. After a line it could not take,
    or any line to a pipe, stderr goes to /dev/null, so the interpreter's last flush neither fails nor waits."""
    try:
        descriptor = sys.stderr.fileno()
    except (OSError, ValueError, AttributeError):  # no descriptor: an in-process runner's buffer, never full
        descriptor = None
    if descriptor is not None and _is_pipe(descriptor):
        _write_without_waiting(descriptor, _fitting(inert_in_ci_log(line) + "\n"))
        silence_stdout(sys.stderr)
        return
    if descriptor is not None:  # a terminal or a file: a write ends (a full disk fails), unless a terminal is held
        import select

        try:
            ready = bool(select.select([], [descriptor], [], 0)[1])
        except (OSError, ValueError):
            ready = False
        if not ready:
            silence_stdout(sys.stderr)
            return
    try:
        say(line)
    except OSError:
        silence_stdout(sys.stderr)


def _is_pipe(descriptor: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(descriptor).st_mode)
    except OSError:
        return False


def _fitting(text: str) -> bytes:
    """``text`` in stderr's encoding, cut in the middle to PIPE_BUF bytes if longer (its start and its end kept)."""
    import select

    most = getattr(select, "PIPE_BUF", 512)  # POSIX's least
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    data = text.encode(encoding, "backslashreplace")
    if len(data) <= most:
        return data
    keep = (most - 8) // 2
    head = data[:keep].decode(encoding, "ignore")
    tail = data[-keep:].decode(encoding, "ignore")
    return f"{head} … {tail}".encode(encoding, "backslashreplace")


def _write_without_waiting(descriptor: int, data: bytes) -> None:
    """``data`` (at most PIPE_BUF bytes) written to the pipe at ``descriptor`` if it has the room now, else dropped.
    The write is non-blocking on a file description of its own (Linux's /proc/self/fd opens the pipe anew), so
    whoever else shares stderr's description never sees it non-blocking; without /proc, stderr's own is, for that
    one write."""
    try:
        own = os.open(f"/proc/self/fd/{descriptor}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ENXIO:  # nobody holds the pipe's other end: no one would read the line
            return
        own = None
    try:
        if own is not None:
            os.write(own, data)
            return
        import fcntl

        flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
        fcntl.fcntl(descriptor, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        try:
            os.write(descriptor, data)
        finally:
            fcntl.fcntl(descriptor, fcntl.F_SETFL, flags)
    except (OSError, ImportError):  # no room (EAGAIN), no reader (EPIPE), no fcntl: the line is dropped
        pass
    finally:
        if own is not None:
            os.close(own)


def exit_interrupted(signum: int, line: str = "ckptdiff: interrupted") -> NoReturn:
    """Exit 128 + the signal (130 for Ctrl-C, 143 for SIGTERM), with ``line`` if stderr can take it: a full disk
    or a pipe nobody reads under stderr must not turn the interrupt into trouble (2) or a hang."""
    say_if_it_can(line)
    sys.exit(128 + signum)


def say(line: str) -> None:
    """One line on stderr, as a CI log may show it: nothing in it acts as a workflow command."""
    click.echo(inert_in_ci_log(line), err=True)


def deliver(report: Report, fmt: str, output: str | None, view: RenderOptions, verbosity: int, color: str) -> str:
    """Render the report and write it to stdout or ``output``; returns the text rendered.

    The terminal formats (table, github) get the terminal's width and the verbosity. ``github`` is what a job's
    log shows: with ``-o FILE`` its annotations stay on stdout and FILE gets the format its extension names.
    With ``-o``, the verdict line goes to stderr, so that the log still says it. stdout may be a CI job's log:
    what goes there is written with nothing a name or key holds acting as a workflow command
    (:func:`.errors.inert_in_ci_log`); a file gets the text as rendered.
    """
    from .formats import render, table

    to_stdout = output in (None, "-")
    width = terminal_width(sys.stdout) if to_stdout else None
    terminal = table.Terminal(width=width, verbosity=verbosity, log=to_stdout)
    stdout_closed = False
    if fmt == "github":
        from .formats import github

        if to_stdout:
            text = github.render(report, view, terminal)
        else:
            try:
                write_report("".join(github.workflow_commands(report)), None)
            except StdoutClosed:  # the log's reader left: the file is still written, then the run ends quietly
                stdout_closed = True
            fmt = file_format(fmt, output)
    if fmt == "table":
        text = table.render(report, view, terminal)
    elif fmt != "github" or not to_stdout:
        text = render(report, fmt, view)
    if to_stdout and fmt != "github":  # github's text guards its table and keeps its own annotations
        write_report(inert_in_ci_log(text, LOG_STYLES.get(fmt, "text")), output)
    else:
        write_report(text, output)
    if not to_stdout:
        _echo_verdict(report, color)
    if stdout_closed:
        raise StdoutClosed()
    return text


def _echo_verdict(report: Report, color: str) -> None:
    from .formats.table import _painter, verdict_lines

    paint = _painter(wants_color(color, sys.stderr))
    say("\n".join(verdict_lines(report, terminal_width(sys.stderr), paint, guard=True)))


def silence_stdout(stream: IO[str] | None = None) -> None:
    """Point stdout (or ``stream``) at /dev/null, so that the interpreter's final flush does not fail on the
    closed pipe or full disk again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (stream or sys.stdout).fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (an in-process runner's buffer)
        pass


def stdout_failed(err: OSError) -> None:
    """One line and exit 2; the rest of stdout's buffer goes nowhere instead of failing again at the exit."""
    silence_stdout()
    say(f"ckptdiff: stdout: cannot write: {err.strerror or err}")
    sys.exit(EXIT_TROUBLE)


def write_failed(err: OSError, debug: bool) -> None:
    """A full disk (or quota, or file-size limit) under a write no writer of ckptdiff's handled (a library's: a
    cache, a lock in shared memory): one line naming the file when the error does, and exit 2."""
    if debug:
        say(scrub_secrets(traceback.format_exc()))
    named = isinstance(err.filename, str | bytes | os.PathLike)  # not a descriptor's number
    where = f"{scrub_secrets(printable_name(os.fsdecode(err.filename)))}: " if named else ""
    hint = "" if where else " (rerun with --debug to see where)"
    say(f"ckptdiff: {where}cannot write: {err.strerror or err}{hint}")
    sys.exit(EXIT_TROUBLE)
