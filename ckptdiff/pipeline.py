"""A run end to end: read the sources, compare, replay engines, attach value statistics → a Report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .errors import CkptdiffError
from .families import AUTO
from .version import __version__

if TYPE_CHECKING:
    from .naming import RenameRule
    from .policy import Policy
    from .report import Report
    from .sources import SourceOptions
    from .values import ValuesOptions

#: What ``--values`` imports beyond the base install (the ``values`` extra).
VALUES_NEEDS = ("numpy", "ml_dtypes")
VALUES_INSTALL_HINT = "pip install 'ckptdiff[values]'"


def require_values() -> None:
    """Before anything is read: the one line saying how to get what --values needs, when it is not installed."""
    from importlib.util import find_spec

    missing = [name for name in VALUES_NEEDS if find_spec(name) is None]
    if missing:
        raise CkptdiffError("--values", f"needs {' and '.join(missing)}, not installed", VALUES_INSTALL_HINT)


def compare_specs(
    a: str,
    b: str | None,
    *,
    profile: str = AUTO,
    policy: Policy | None = None,
    base: str | None = None,
    source_options: SourceOptions | None = None,
    values: bool = False,
    notify: Callable[[str], None] | None = None,
    renames: Sequence[str | RenameRule] = (),
    engines: Sequence[str] = (),
    command: str | None = None,
    values_options: ValuesOptions | None = None,
    values_only: Sequence[str] = (),
    meanwhile: Callable[[], object] | None = None,
) -> Report:
    """Resolve two specs (and an optional base) through the sources, then compare them.

    With ``values``, tensor contents are compared too (:mod:`ckptdiff.values`: the ``values`` extra; torch
    too for .bin/.pt files); ``notify``
    receives its announcements (downloads). ``engines`` (``--engine``) replays those engines' drafter loaders on
    each side; with ``b`` None the one checkpoint is checked on its own against them. ``command`` is the command
    line the report names (the CLI's). ``values_options`` says where the value pass runs (threads, ``--jobs``
    processes, a Dask scheduler) and carries its progress hook. ``values_only`` (``--values-only``, implies
    ``values``): globs; only the tensors they match are compared, each read by its byte range. ``meanwhile`` is
    called while a pair's reads are in flight (the CLI loads its output format then).
    """
    from .sources import reading_both, resolve
    from .sources.wanted import Wanted

    if values:
        require_values()

    if b is None:
        side = resolve(a, source_options)
        base_checkpoint = resolve(base, source_options, wanted=set()) if base is not None else None
        from .comparison import check_checkpoint

        return check_checkpoint(
            side,
            engines=engines,
            policy=policy,
            base=base_checkpoint,
            command=command,
            tool_version=__version__,
            profile=profile,
        )
    with reading_both(a, b, source_options) as both:
        # the comparison (and the caller's output) loads while the network answers: a Hub pair's reads are under way
        from .comparison import choose_profile, compare_checkpoints

        if meanwhile is not None:
            meanwhile()
        side_a, side_b = both()
    chosen = choose_profile(profile, side_a, side_b)
    base_checkpoint = None
    if base is not None:
        from .base_layouts import wanted_groups  # base layouts load only for a run with a base

        roles = chosen.base_roles(side_a.config, side_b.config) if chosen else None
        wanted = Wanted(wanted_groups(roles)) if roles else None
        base_checkpoint = resolve(base, source_options, wanted=wanted)
        if not roles and not engines and not values and notify is not None:
            notify(_base_unused(chosen.name if chosen else None))
    report = compare_checkpoints(
        side_a,
        side_b,
        profile=chosen,
        policy=policy,
        base=base_checkpoint,
        renames=renames,
        engines=engines,
        command=command,
        tool_version=__version__,
    )
    if values or values_only:
        from .values import attach_values

        report = attach_values(
            report,
            side_a,
            side_b,
            base=base_checkpoint,
            profile=chosen,
            offline=source_options.offline if source_options is not None else False,
            progress=source_options.progress if source_options is not None else None,
            notify=notify,
            options=values_options,
            only=tuple(values_only),
        )
    return report


def _base_unused(family: str | None) -> str:
    """The note for a --base nothing in the run reads: only a drafter whose engine takes weights from the base
    (EAGLE-3, DFlash), an engine's replay and --values' embedding check read it. On stderr, not in the report,
    which stays the comparison's."""
    why = "neither side is a drafter taking weights from it"
    if family:
        why = f"{family} checkpoints take no weight from it"
    return f"--base: read, but nothing in this comparison uses it ({why}; --engine and --values check against it)"
