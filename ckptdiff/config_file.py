"""Settings from a config file, so a CI gate's policy lives in the repository instead of a long command line.

Looked for from the working directory upward to the git repository's root, first hit wins; in each folder
``ckptdiff.toml`` (settings at the top level) comes before ``pyproject.toml`` (settings under
``[tool.ckptdiff]``; a pyproject without that table is passed over). ``--config FILE`` names the file
instead. Flags override the file: a flag given on the command line replaces that setting's value from the
file (lists are replaced, not extended).

    [tool.ckptdiff]
    ignore = ["*.rotary_emb.inv_freq"]
    allow-missing = ["lm_head.weight"]
    allow-dtype-change = ["BF16:F32"]   # or true: any dtype change
    engine = ["sglang", "vllm"]         # --engine: replay these engines' drafter loaders
    allow-event = ["sglang:aux_ids_default"]
    fail-on = "warning"
    format = "markdown"
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import CkptdiffError, closest
from .families.engines import ENGINE_CHOICES
from .formats import FORMAT_ALIASES, FORMAT_NAMES
from .policy_keys import FAIL_ON_CHOICES, PATTERN_FIELDS

if TYPE_CHECKING:
    from .policy import Policy

CKPTDIFF_TOML = "ckptdiff.toml"
PYPROJECT_TOML = "pyproject.toml"
#: Settings a config file may hold (snake_case; kebab-case spellings are accepted too).
LIST_SETTINGS: tuple[str, ...] = (*PATTERN_FIELDS, "rename", "engine")
BOOL_SETTINGS: tuple[str, ...] = ("only_diffs", "expand", "step_summary", "allow_empty", "fail_on_conditional")
CHOICE_SETTINGS: dict[str, tuple[str, ...]] = {
    "fail_on": FAIL_ON_CHOICES,
    "format": FORMAT_NAMES,
}
#: ``reference`` and ``candidate`` are A and B for a run that names neither (the pre-commit hook's way).
TEXT_SETTINGS: tuple[str, ...] = ("profile", "reference", "candidate")
KNOWN_SETTINGS: tuple[str, ...] = (*LIST_SETTINGS, *BOOL_SETTINGS, *CHOICE_SETTINGS, *TEXT_SETTINGS)


class ConfigError(CkptdiffError):
    """A config file that cannot be read or holds a setting ckptdiff does not understand."""


class FileSettings(msgspec.Struct, frozen=True):
    """What a config file says; ``path`` is None when there is no config file."""

    path: Path | None = None
    values: Mapping[str, Any] = msgspec.field(default_factory=dict)

    @property
    def shown(self) -> str:
        """The file as reports name it: relative to the working directory when inside it."""
        if self.path is None:
            return ""
        try:
            return os.path.relpath(self.path)
        except ValueError:  # another drive on Windows
            return str(self.path)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def spec(self, key: str) -> str | None:
        """A checkpoint spec from the file: a relative path found beside the file is taken from there (so the
        gate works from any folder below it); anything else, such as a Hub repo ``org/name``, is kept as written."""
        value: str | None = self.values.get(key)  # a text setting: validated as a string
        if value is None or self.path is None:
            return value
        beside = self.path.parent / Path(value).expanduser()
        if not Path(value).expanduser().is_absolute() and beside.exists():
            try:
                return os.path.relpath(beside)
            except ValueError:  # another drive on Windows
                return str(beside)
        return value


def _toml_loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError(None, "reading a config file on Python 3.10 needs tomli", "pip install tomli") from None
    return tomllib.loads(text)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as err:
        raise ConfigError(str(path), f"cannot read the config file: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), "is not UTF-8 text") from None
    try:
        return _toml_loads(text)
    except ValueError as err:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(str(path), f"is not valid TOML: {err}") from None


def _section(path: Path, document: dict[str, Any], *, required: bool) -> dict[str, Any] | None:
    """The ckptdiff settings in a parsed file, or None for a pyproject.toml that has none."""
    if path.name != PYPROJECT_TOML:
        if "tool" in document and isinstance(document["tool"], dict) and "ckptdiff" in document["tool"]:
            raise ConfigError(
                str(path),
                "has a [tool.ckptdiff] table",
                f"in {CKPTDIFF_TOML} settings go at the top level, with no table header",
            )
        return document
    tool = document.get("tool", {})
    section = tool.get("ckptdiff") if isinstance(tool, dict) else None
    if section is None:
        if required:
            raise ConfigError(str(path), "has no [tool.ckptdiff] table")
        return None
    if not isinstance(section, dict):
        raise ConfigError(str(path), "[tool.ckptdiff] is not a table")
    return section


def _validate(path: Path, section: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for raw_key, value in section.items():
        key = raw_key.replace("-", "_")
        where = f"{path}: {raw_key}"
        if key not in KNOWN_SETTINGS:
            raise ConfigError(where, "is not a ckptdiff setting", _closest_setting(key))
        if key in values:
            raise ConfigError(where, "is given twice (kebab-case and snake_case)")
        if key == "allow_dtype_change" and isinstance(value, bool):
            value = ["*"] if value else []
        elif key in LIST_SETTINGS and isinstance(value, str):
            value = [value]
        if key in LIST_SETTINGS:
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                what = {"rename": "REGEX=REPLACEMENT rules", "engine": "engine names"}.get(key, "globs")
                raise ConfigError(where, f"must be a list of non-empty strings ({what})")
            value = tuple(value)
            unknown = [name for name in value if key == "engine" and name not in ENGINE_CHOICES]
            if unknown:
                raise ConfigError(where, f"{unknown[0]!r} is not an engine", f"one of {', '.join(ENGINE_CHOICES)}")
            if key == "rename":
                _check_renames(where, value)
        elif key in BOOL_SETTINGS:
            if not isinstance(value, bool):
                raise ConfigError(where, "must be true or false")
        elif key in CHOICE_SETTINGS:
            value = FORMAT_ALIASES.get(value, value) if key == "format" else value
            if value not in CHOICE_SETTINGS[key]:
                raise ConfigError(where, f"must be one of {', '.join(CHOICE_SETTINGS[key])}, not {value!r}")
        elif not isinstance(value, str) or not value:
            raise ConfigError(where, "must be a non-empty string")
        if key == "profile":
            from .families import profile_choices

            choices = profile_choices()
            if value not in choices:
                raise ConfigError(where, f"must be one of {', '.join(choices)}, not {value!r}")
        values[key] = value
    return values


def _check_renames(where: str, rules: tuple[str, ...]) -> None:
    """Each rule parsed as --rename parses it, a bad one refused naming this file (not a --rename never given)."""
    from .naming import parse_rename  # only a file that has rules pays for it

    for rule in rules:
        try:
            parse_rename(rule)
        except CkptdiffError as err:
            raise ConfigError(where, err.defect, err.hint) from None


def _closest_setting(key: str) -> str:
    """A near miss's "did you mean allow-missing?", else the list of settings."""
    close = closest(key, KNOWN_SETTINGS)
    if close:
        return f"did you mean {close.replace('_', '-')}?"
    return "known settings: " + ", ".join(k.replace("_", "-") for k in KNOWN_SETTINGS)


def find_config(start: Path | None = None) -> Path | None:
    """The nearest ckptdiff.toml, or pyproject.toml with a [tool.ckptdiff] table, from ``start`` upward.

    The search ends at the root of the git repository it starts in (the folder holding ``.git``) or at the home
    directory, whichever comes first; outside both it looks in ``start`` only. A gate's policy belongs to its
    repository or its user, never to a shared folder above them (a ``ckptdiff.toml`` planted in /tmp).
    """
    folder = (start or Path.cwd()).resolve()
    home = _home()
    chain = (folder, *folder.parents)
    last = next((i for i, c in enumerate(chain) if (c / ".git").exists() or c == home), None)
    for candidate in chain[: 1 if last is None else last + 1]:
        own = candidate / CKPTDIFF_TOML
        if own.is_file():
            return own
        pyproject = candidate / PYPROJECT_TOML
        if (
            pyproject.is_file()
            and _may_hold_settings(pyproject)
            and _section(pyproject, _read_toml(pyproject), required=False) is not None
        ):
            return pyproject
    return None


def _may_hold_settings(pyproject: Path) -> bool:
    """Whether a pyproject.toml can have a [tool.ckptdiff] table: one that never spells the name has none and
    is not parsed (loading the TOML parser is most of a config-less run's start-up cost here)."""
    try:
        return b"ckptdiff" in pyproject.read_bytes()
    except OSError:
        return True  # reading it again reports why it cannot be read


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None


def load_config(path: str | Path | None = None, *, start: Path | None = None) -> FileSettings:
    """Read ``path`` (``--config``), or the file :func:`find_config` finds; no file gives empty settings."""
    if path is not None and not str(path).strip():  # Path("") is the current folder
        raise ConfigError(f"--config {str(path)!r}", "is empty; give the config file's name")
    found = Path(path) if path is not None else find_config(start)
    if found is None:
        return FileSettings()
    if path is not None and not found.is_file():
        raise ConfigError(str(path), "no such config file" if not found.exists() else "is not a file")
    section = _section(found, _read_toml(found), required=True)
    assert section is not None
    return FileSettings(found.absolute(), _validate(found, section))


def merge_policy(settings: FileSettings, flags: Mapping[str, Any]) -> Policy | None:
    """A Policy from the config file's settings, each replaced by its flag when the flag was given; None when
    neither sets anything (the default policy, whose module then loads while the first requests are answered).

    ``flags`` maps policy field names to the command line's values; an empty tuple or None means "not given".
    """
    chosen: dict[str, Any] = {}
    origins: list[tuple[str, str]] = []
    for key in (*PATTERN_FIELDS, "fail_on"):
        flag = flags.get(key)
        if flag:
            chosen[key] = tuple(flag) if key in PATTERN_FIELDS else flag
        elif key in settings.values:
            chosen[key] = settings.values[key]
            if settings.values[key]:
                origins.append((key, settings.shown))
    for key in ("allow_empty", "fail_on_conditional"):
        if flags.get(key):
            chosen[key] = True
        elif settings.values.get(key):
            chosen[key] = True
            origins.append((key, settings.shown))
    if not chosen and not origins:
        return None
    from .policy import Policy

    return Policy(**chosen, origins=tuple(origins), flags=True)
