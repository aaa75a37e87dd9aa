"""Where a report may go, checked before anything is read: not over a checkpoint's files, not into a folder that
is missing or not writable, not named twice; and a destination that is the process's own stdout or stderr."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from .errors import CkptdiffError, ReportWriteError, printable_name


def stream_named(destination: str) -> IO[str] | None:
    """sys.stdout or sys.stderr when ``destination`` is the very file it writes to (``/dev/stdout``, or the file
    stdout was redirected to): written through the stream, as ``-o -`` is. Opened by its name instead, a
    ``/dev/stdout`` appended to a log (``>> log``) was the log, replaced by the report; and a pipe's is no file."""
    try:
        status = os.stat(destination)
    except (OSError, ValueError):
        return None
    for stream in (sys.stdout, sys.stderr):
        try:
            own = os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):  # a stream with no descriptor (io.UnsupportedOperation)
            continue
        if (own.st_dev, own.st_ino) == (status.st_dev, status.st_ino):
            return stream
    return None


def check_report_destinations(destinations: Iterable[str | None]) -> None:
    """Refuse, before anything is read, a report file that cannot be written: a folder, a folder that does not
    exist, a parent that is a file, a folder this user may not write in (the report is written beside the file and
    renamed onto it); and one that two flags name (the second report would replace the first). Found only once the
    report was ready, it threw away a run of minutes (the Hub, --values) for a typo in ``-o``; the write itself
    still says why when the file system changes meanwhile."""
    named: dict[str, str] = {}  # each file (resolved) → the flag that named it first
    for number, destination in enumerate(destinations):
        if destination is None or destination == "-":
            continue
        what = "-o" if number == 0 else "--save"  # the first is -o's, the rest --save's
        if not destination.strip():
            stdout = " (or - for stdout)" if number == 0 else ""
            raise ReportWriteError(f"{what} {destination!r}", f"is empty; give a file name for the report{stdout}")
        if stream_named(destination) is not None:  # written through stdout or stderr, never replaced
            continue
        resolved = os.path.realpath(destination)
        if resolved in named:
            twice = f"{named[resolved]} and {what}"
            raise ReportWriteError(
                destination, f"is named by {twice}: one report would replace the other", "give each its own file"
            )
        named[resolved] = what
        existing = destination_status(destination)
        parent = Path(resolved if existing is not None else destination).parent
        if existing is None:
            try:
                parent_status = parent.stat()
            except OSError as err:
                raise ReportWriteError(destination, f"cannot write the report: {err.strerror or err}") from None
            if not stat.S_ISDIR(parent_status.st_mode):
                raise ReportWriteError(destination, f"cannot write the report: {os.strerror(errno.ENOTDIR)}")
        if existing is None or stat.S_ISREG(existing.st_mode):  # a device (/dev/stdout) is written in place
            if not os.access(parent, os.W_OK | os.X_OK):  # false on a read-only mount, for root too
                statvfs = getattr(os, "statvfs", None)  # POSIX only
                read_only = statvfs is not None and statvfs(parent).f_flag & os.ST_RDONLY
                reason = os.strerror(errno.EROFS if read_only else errno.EACCES)
                raise ReportWriteError(destination, f"cannot write the report: {reason}")


def destination_status(destination: str) -> os.stat_result | None:
    """What ``destination`` is now (None: nothing yet), or the line saying why no report can be written there."""
    if not destination.strip():  # Path("") is the current folder
        raise ReportWriteError("-o ''", "is empty; give a file name for the report (or - for stdout)")
    try:
        status = os.stat(destination)
    except FileNotFoundError:
        return None
    except OSError as err:  # a name longer than the file system allows, a parent that is a file
        raise ReportWriteError(destination, f"cannot write the report: {err.strerror or err}") from None
    if stat.S_ISDIR(status.st_mode):
        raise ReportWriteError(destination, "is a folder; give a file name for the report")
    return status


def refuse_reports_over_inputs(
    destinations: Iterable[str | None], specs: Mapping[str, str | None], hint: str = "name another file for the report"
) -> None:
    """Refuse, before anything is read, a report that would replace a file of a local checkpoint the run reads:
    ``-o model/config.json`` (a typo, a tab completion) wrote the report over A's config, and ``--format json
    -o b/model.safetensors`` would write it over B's weights. ``specs``: each side's label and spec."""
    reports = [destination for destination in destinations if destination and destination != "-"]
    if not reports:  # the report goes to stdout: no spec is looked at twice
        return
    from .checkpoint import WEIGHT_FILE_SUFFIXES
    from .sources import LocalSpec, parse_spec

    inputs: list[tuple[str, str, Path]] = []  # (label, spec, the file or folder it names, resolved)
    for label, spec in specs.items():
        try:
            parsed = parse_spec(spec) if spec else None
        except CkptdiffError:
            continue  # reading it says why
        if isinstance(parsed, LocalSpec):
            inputs.append((label, spec or "", Path(os.path.realpath(parsed.path))))
    for destination in reports:
        target = Path(os.path.realpath(destination))
        for label, spec, named in inputs:
            folder = named if named.is_dir() else named.parent
            named_file = target == named and folder != named
            in_folder = target.parent == folder and (
                target.name == "config.json" or target.name.endswith(WEIGHT_FILE_SUFFIXES)
            )
            if named_file or in_folder:
                whose = f"{label}'s {printable_name(target.name)} ({printable_name(spec)})"
                raise ReportWriteError(
                    destination,
                    f"would be {whose}: a report never replaces or adds a checkpoint's files",
                    hint,
                )
