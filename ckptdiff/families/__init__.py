"""Architecture knowledge as data: naming conventions, weights the engine injects, shapes a config implies.

A profile is chosen by name (``--profile eagle3``) or detected from either side's config.json. Checkpoints of
an architecture without a profile get the plain generic comparison. A profile never decides the verdict
itself: it names tensors canonically, says which missing tensors the engine supplies, and returns findings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Convention as Convention
    from .model import InjectedWeight as InjectedWeight
    from .model import Profile as Profile
    from .model import Review as Review

Config = Mapping[str, Any]
#: The profile model (:mod:`.model`), loaded with the first profile a run uses: a run that uses none (and
#: ``--help``) does not define its classes.
_MODEL = ("Convention", "InjectedWeight", "Profile", "Review")


def __getattr__(name: str) -> Any:
    if name in _MODEL:
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Every profile: its name and the module that defines it as ``PROFILE``. Names are known without importing
#: the modules, so ``--help`` and the config file's checks stay light.
PROFILE_MODULES: dict[str, str] = {"eagle3": "ckptdiff.profiles.eagle3"}
#: Every profile's detector (its ``Profile.detect``) as ``module:function`` in a light module, so that detecting
#: loads a profile's module only for the configs it claims.
PROFILE_DETECTORS: dict[str, str] = {"eagle3": "ckptdiff.profiles.detect:is_eagle3"}


def _registry() -> dict[str, Profile]:
    from importlib import import_module

    return {name: import_module(module).PROFILE for name, module in PROFILE_MODULES.items()}


def profile_names() -> tuple[str, ...]:
    return tuple(PROFILE_MODULES)


#: ``--profile`` values besides the profiles' names.
AUTO, NONE = "auto", "none"


def profile_choices() -> tuple[str, ...]:
    """Every value ``--profile`` and the config file's ``profile`` accept."""
    return (AUTO, NONE, *profile_names())


def get_profile(name: str) -> Profile | None:
    """A profile by name; ``none`` means the generic comparison."""
    if name == "none":
        return None
    return _registry()[name]


def detect_profile(*configs: Config | None) -> Profile | None:
    """The first profile whose detector accepts any of the given configs."""
    for name in PROFILE_MODULES:
        detect = _detector(name)
        if any(config is not None and detect(config) for config in configs):
            return get_profile(name)
    return None


def _detector(name: str) -> Callable[[Config], bool]:
    from importlib import import_module

    module, _, function = PROFILE_DETECTORS[name].partition(":")
    detect: Callable[[Config], bool] = getattr(import_module(module), function)
    return detect
