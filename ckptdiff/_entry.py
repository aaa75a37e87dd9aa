"""The ``ckptdiff`` command's entry: Hub calls leave before the CLI loads, the collector rests during the run.

``ckptdiff`` (the console script) and ``python -m ckptdiff`` both start here. Before importing click and the
comparison machinery, this looks at the command line for the checkpoints A and B (or, with neither, the config
file's ``reference`` and ``candidate``) and sends the listing call of each Hub repo among them on a thread, which
sends the repo's first reads (config.json, the index, the shard headers) as soon as the listing answers
(:func:`ckptdiff.sources.hub_early.send_early`); the run's Hub sources take those answers. The imports then
overlap the network's round trips instead of preceding them. Anything unexpected here is left to the CLI, which
reports it as it always does.

The cyclic garbage collector is paused for the run (a run's objects live until it ends), and the command ends
the process once its exit handlers have run and its streams are flushed, without freeing the run's objects one
by one (:func:`_exit_now`).
"""

from __future__ import annotations

import gc
import sys
from typing import NoReturn

from .process import prepare

#: Options after which the command line holds no spec to send early for (the CLI answers them alone).
_NO_CALLS = frozenset(("-h", "--help", "-V", "--version", "--offline"))


def main() -> None:
    gc.disable()
    try:
        run(sys.argv[1:])
    except SystemExit as done:
        gc.freeze()
        _exit_now(done.code)
    gc.freeze()


def _exit_now(code: object) -> NoReturn:
    """End the process as ``sys.exit(code)`` would, once the exit handlers have run and the streams are flushed,
    but without freeing the run's objects one at a time (a large pair's 140 k rows and 280 k header entries take
    ~0.06 s): the operating system takes the memory back whole."""
    import atexit
    import os

    if code is None or isinstance(code, int):
        status = code or 0
    else:  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left, or a closed stream: nothing more can be said
            status = status or 120  # what the interpreter returns when its own last flush fails
    os._exit(status)


def run(args: list[str]) -> None:
    """The command on ``args``: the early Hub calls, then the CLI, which exits (SystemExit) with its code. The
    early calls the run did not take are ended before it returns (:func:`ckptdiff.sources.early_answers.finish`)."""
    prepare(args)  # before the listing calls, which import huggingface_hub
    sent = send_early(args)
    try:
        from .cli import main as cli_main

        cli_main(args)
    finally:
        if sent:
            from .sources import early_answers

            early_answers.finish()


def send_early(args: list[str]) -> int:
    """Send the listing call of each Hub spec among A and B now (and its first reads when it answers); for how
    many specs. Never raises: a spec this cannot read, or a call that fails, is reported by the run itself, with
    the error it always gives."""
    if _NO_CALLS.intersection(args):
        return 0
    try:
        specs = _positional(args) or _specs_from_config(args)
        if not specs or len(specs) > 2:
            return 0
        from .sources import SourceOptions
        from .sources.hub_early import ready_for_answers
        from .sources.hub_early import send_early as send

        options = SourceOptions(jobs=_jobs(args, SourceOptions.jobs))
        sent = sum(_sent(spec, options, send) for spec in specs)
        if sent:
            ready_for_answers()
        return sent
    except Exception:  # noqa: BLE001 - the CLI reports it in its turn
        return 0


def _jobs(args: list[str], default: int) -> int:
    """``--jobs N`` as the CLI will read it (the last one given; the most reads in flight), or ``default``."""
    jobs = default
    for index, word in enumerate(args):
        value = args[index + 1] if word == "--jobs" and index + 1 < len(args) else None
        if word.startswith("--jobs="):
            value = word.partition("=")[2]
        if value is not None:
            jobs = int(value) if value.isdigit() and 1 <= int(value) <= 256 else default
    return jobs


def _sent(spec: str, options: object, send: object) -> bool:
    try:
        return bool(send(spec, options))  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - a spec that is not a repo, or a source that cannot start: the run says why
        return False


def _positional(args: list[str]) -> list[str]:
    """The words that can only be A and B: not an option, and not after one (an option's value could be
    anything; a flag's next word is passed over too, which costs only the early call)."""
    found: list[str] = []
    previous = ""
    for index, word in enumerate(args):
        if word == "--":
            return found + args[index + 1 :]
        if not word.startswith("-") and not (previous.startswith("-") and "=" not in previous):
            found.append(word)
        previous = word
    return found


def _specs_from_config(args: list[str]) -> list[str]:
    """With no A and B on the command line: the config file's ``reference`` and ``candidate``, as the CLI takes
    them (``--config FILE`` or the nearest file). A word right after a flag is taken for an option's value here
    (``-o report.md``); were it A, the two early calls would go unused, and the run would make its own."""
    path = None
    for index, word in enumerate(args):
        if word == "--config" and index + 1 < len(args):
            path = args[index + 1]
        elif word.startswith("--config="):
            path = word.partition("=")[2]
    from .config_file import load_config

    settings = load_config(path)
    specs = [settings.spec("reference"), settings.spec("candidate")]
    return [spec for spec in specs if spec is not None] if all(specs) else []
