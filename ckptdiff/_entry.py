"""The ``ckptdiff`` command's entry: Hub listing calls leave before the CLI loads, the collector rests during the run.

``ckptdiff`` (the console script) and ``python -m ckptdiff`` both start here. Before importing click and the
comparison machinery, this looks at the command line for the checkpoints A and B (or, with neither, the config
file's ``reference`` and ``candidate``) and sends the listing call of each Hub repo among them on a thread
(:func:`ckptdiff.sources.hub.send_listing_early`); the run's Hub source takes that answer. The imports then
overlap the network's round trip instead of preceding it. Anything unexpected here is left to the CLI, which
reports it as it always does.

The cyclic garbage collector is paused for the run (a run's objects live until it ends) and the survivors are
frozen before the interpreter exits, so that its teardown does not walk them again.
"""

from __future__ import annotations

import gc
import sys

from .process import prepare

#: Options after which the command line holds no spec to send early for (the CLI answers them alone).
_NO_CALLS = frozenset(("-h", "--help", "-V", "--version", "--offline"))


def main() -> None:
    gc.disable()
    try:
        args = sys.argv[1:]
        prepare(args)  # before the listing calls, which import huggingface_hub
        send_listings_early(args)
        from .cli import main as cli_main

        cli_main()
    finally:
        gc.freeze()


def send_listings_early(args: list[str]) -> int:
    """Send the listing call of each Hub spec among A and B now; how many were sent. Never raises: a spec
    this cannot read, or a call that fails, is reported by the run itself, with the error it always gives."""
    if _NO_CALLS.intersection(args):
        return 0
    try:
        specs = _positional(args) or _specs_from_config(args)
        if not specs or len(specs) > 2:
            return 0
        from .sources import SourceOptions
        from .sources.hub import send_listing_early

        options = SourceOptions()
        return sum(_sent(spec, options, send_listing_early) for spec in specs)
    except Exception:  # noqa: BLE001 - the CLI reports it in its turn
        return 0


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
