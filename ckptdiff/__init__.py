"""ckptdiff: are two model checkpoints drop-in compatible? Reads only safetensors headers."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import CkptdiffError
from .version import __version__

if TYPE_CHECKING:
    from .formats import RenderOptions
    from .naming import RenameRule
    from .policy import Policy
    from .progress import Progress
    from .report import Report
    from .result import Result

__all__ = ["CkptdiffError", "Policy", "RenderOptions", "Report", "Result", "__version__", "compare", "render"]


def compare(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str] | None = None,
    *,
    profile: str = "auto",
    policy: Policy | None = None,
    base: str | os.PathLike[str] | None = None,
    engines: Sequence[str] = (),
    renames: Sequence[str | RenameRule] = (),
    values: bool = False,
    values_only: Sequence[str] = (),
    offline: bool = False,
    jobs: int = 128,
    progress: bool | Progress = False,
    notify: Callable[[str], None] | None = None,
    follow_symlinks: bool = False,
    vllm_runner: str = "v2",
) -> Result:
    """Compare two checkpoint specs and return the report (a :class:`~ckptdiff.result.Result`: the
    :class:`~ckptdiff.report.Report` with a short repr, ``to_dict()``, Jupyter's rendering and each finding's
    words in its ``message``); the CLI's options by name.

    ``a`` and ``b`` are local paths, Hub repos ``org/name[@revision]`` or store URLs, as on the command line (a
    revision is part of the spec); a :class:`pathlib.Path` (any ``os.PathLike``) is always a local path.
    ``profile`` is ``auto``, ``none`` or a profile name (``--profile``); ``policy`` holds the rules (``--ignore``,
    ``--allow-*``, ``--fail-on``, ``--allow-empty``); ``base`` is ``--base``; ``engines`` is ``--engine`` (with
    ``b`` None the one checkpoint is checked against them); ``renames`` is ``--rename``; ``values`` is
    ``--values`` (needs ``ckptdiff[values]``; torch too for .bin/.pt), ``values_only`` ``--values-only`` (globs;
    implies ``values``); ``offline`` and ``jobs`` are ``--offline`` and ``--jobs``; ``progress`` draws progress
    bars on stderr (True) or reports to your own :data:`ckptdiff.progress.Progress` callback; ``notify`` receives
    announcements; ``follow_symlinks`` is ``--follow-symlinks``; ``vllm_runner`` is ``--vllm-runner`` (``v2`` or
    ``v1``).

    Raises :class:`CkptdiffError` for every mistake in the input: an unreadable or invalid checkpoint, an
    unknown profile or engine, a bad rule, a missing ``b`` without ``engines``, an argument of the wrong type (a
    string where a list is expected, None, a flag that is not True or False). Its ``where``, ``defect`` and
    ``hint`` say what and where.
    """
    from .families import profile_names
    from .families.engines import ENGINE_CHOICES
    from .pipeline import compare_specs
    from .sources import SourceOptions

    a = _spec(a, "a")
    b = None if b is None else _spec(b, "b")
    base = None if base is None else _spec(base, "base")
    engines = _listed(engines, "engines", "engine names, e.g. ['sglang']")
    renames = _listed(renames, "renames", "'REGEX=REPLACEMENT' rules, e.g. [r'^layers\\.0\\.=midlayer.']")
    values_only = _listed(values_only, "values_only", "globs, e.g. ['fc.weight']")
    for name, flag in (("values", values), ("offline", offline), ("follow_symlinks", follow_symlinks)):
        if not isinstance(flag, bool):
            raise CkptdiffError(name, f"{flag!r} is not True or False")
    if not (isinstance(progress, bool) or callable(progress)):
        raise CkptdiffError("progress", f"{progress!r} is not True, False or a callback")
    if notify is not None and not callable(notify):
        raise CkptdiffError("notify", f"{notify!r} is not a callback")
    for rule in renames:
        if not isinstance(rule, str) and not _is_rename_rule(rule):
            raise CkptdiffError("renames", f"{rule!r} is not a 'REGEX=REPLACEMENT' string")
    for glob in values_only:
        if not isinstance(glob, str) or not glob.strip():  # a blank glob, like an empty one, matches no name
            raise CkptdiffError("values_only", f"{glob!r} is not a non-empty glob")
    profiles = ("auto", "none", *profile_names())
    if profile not in profiles:
        raise CkptdiffError("profile", f"unknown profile {profile!r}", f"choose from {', '.join(profiles)}")
    for engine in engines:
        if engine not in ENGINE_CHOICES:
            raise CkptdiffError("engines", f"unknown engine {engine!r}", f"choose from {', '.join(ENGINE_CHOICES)}")
    if b is None and not engines:
        raise CkptdiffError("b", "missing", "give B to compare A with, or engines to check A on its own")
    if vllm_runner not in ("v2", "v1"):
        raise CkptdiffError("vllm_runner", f"unknown vLLM runner {vllm_runner!r}", "choose from v2, v1")
    values = values or bool(values_only)
    if b is None and values:
        raise CkptdiffError("values", "compares A's tensor values with B's", "give B")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise CkptdiffError("jobs", f"{jobs!r} is not a positive number")
    if offline:
        from .sources import refuse_offline_stores

        sides = {"a": a, "b": b, "base": base}
        refuse_offline_stores(sides, "offline", "only local paths and cached Hub repos are read with offline=True")
    if policy is not None and not _is_policy(policy):
        raise CkptdiffError("policy", f"{type(policy).__name__} is not a ckptdiff.Policy")
    from .families.engine_settings import EngineSettings, using
    from .policy import Policy
    from .result import Result

    options = SourceOptions(offline=offline, jobs=jobs, progress=_bars(progress), follow_symlinks=follow_symlinks)
    with using(EngineSettings(vllm_runner=vllm_runner)):  # the engines' rules read it
        report = compare_specs(
            a,
            b,
            profile=profile,
            policy=policy if policy is not None else Policy(),  # a report asked for in Python: worded as Python
            base=base,
            source_options=options,
            values=values,
            notify=notify,
            renames=renames,
            engines=tuple(engines),
            values_only=tuple(values_only),
        )
    return Result.of(report)


def _spec(value: object, where: str) -> str:
    """A spec as ``compare`` takes it: a string as on the command line, or a path (``os.PathLike``), which is always
    local: a relative one that does not exist is spelled ``./path``, so that it is not taken for a Hub repo id."""
    if isinstance(value, str):
        if not value.strip():  # named by its argument, as a wrong type is: `base=""` is not "'': is empty"
            raise CkptdiffError(where, f"{value!r} is empty", "give a path, a Hub repo id (org/name) or a URL")
        return value
    path = os.fspath(value) if isinstance(value, os.PathLike) else None
    if not isinstance(path, str):
        hint = "give a path, a Hub repo id (org/name) or a URL, as a string or a pathlib.Path"
        raise CkptdiffError(where, f"{value!r} is not a checkpoint spec", hint)
    if path and not os.path.isabs(path) and not os.path.lexists(path):
        return os.path.join(os.curdir, path)
    return path


def _listed(value: object, where: str, example: str) -> tuple[Any, ...]:
    """A list argument as a tuple; a string (which would be taken character by character) or anything that is no
    collection is refused."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        shown = f"{value!r} is a string" if isinstance(value, str) else f"{value!r} is not a list"
        raise CkptdiffError(where, shown, f"give a list of {example}, or () for none")
    return tuple(value)


def _is_rename_rule(value: object) -> bool:
    from .naming import RenameRule

    return isinstance(value, RenameRule)


def _bars(progress: bool | Progress) -> Progress | None:
    """``compare``'s ``progress``: True → bars on a terminal's stderr, False → none, a callback → itself."""
    if progress is True:
        from .progress import terminal_progress

        return terminal_progress()
    return None if progress is False else progress


def _is_policy(value: object) -> bool:
    from .policy import Policy

    return isinstance(value, Policy)


def render(report: Report, fmt: str = "table", options: RenderOptions | None = None, **by_name: Any) -> str:
    """A report in one of the formats (table, markdown, json, junit, github, html), as the CLI writes it, drawn with
    ``options`` (a :class:`RenderOptions`) and any of its fields by name, which take precedence:
    ``render(report, "markdown", only_diffs=True)``."""
    from .formats import render as render_format

    return render_format(report, fmt, options, **by_name)


_LAZY = {
    "Report": "ckptdiff.report",
    "Policy": "ckptdiff.policy",
    "RenderOptions": "ckptdiff.formats",
    "Result": "ckptdiff.result",
}


def __getattr__(name: str) -> Any:
    # on demand: `import ckptdiff` (and so `ckptdiff --help`) loads none of the comparison machinery
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CompareModuleAlias(types.ModuleType):
    """``ckptdiff.compare`` the module, as it was before it became ``ckptdiff.comparison`` (the package's
    ``compare`` attribute stays the function): names resolve in the comparison, then the pipeline."""

    def __getattr__(self, name: str) -> Any:
        import importlib

        for module in ("ckptdiff.comparison", "ckptdiff.pipeline"):
            found = importlib.import_module(module)
            if hasattr(found, name):
                return getattr(found, name)
        raise AttributeError(f"module 'ckptdiff.compare' has no attribute {name!r}")


sys.modules.setdefault(f"{__name__}.compare", _CompareModuleAlias(f"{__name__}.compare"))
