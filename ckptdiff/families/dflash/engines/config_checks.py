"""The config settings an engine refuses before it builds a DFlash drafter (``DFlashEngine.config_checks``):
each check's rule as a parse of the value, as the engine's own parse takes it, and the one place they are run;
the settings read as the drafter is built or the runtime starts (attention sink biases, the mask-token lookup)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...rules import Event
from .model import ConfigCheck, DFlashEngine


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def dotted(config: Mapping[str, Any], key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def present(config: Mapping[str, Any], key: str) -> bool:
    *path, last = key.split(".")
    holder = dotted(config, ".".join(path)) if path else config
    return isinstance(holder, Mapping) and last in holder


class _Refused(Exception):
    pass


def _optional_int(minimum: int) -> Callable[[Any], int | None]:
    """SGLang's ``_parse_optional_int``: null is unset; anything ``int()`` takes (``"16"``, ``2.5``, ``true``),
    then at least ``minimum``."""

    def parse(value: Any) -> int | None:
        if value is None:
            return None
        try:
            parsed = int(value)
        except (TypeError, ValueError, OverflowError):
            raise _Refused from None
        if parsed < minimum:
            raise _Refused
        return parsed

    return parse


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise _Refused from None


def _positive_float(value: Any) -> float:
    parsed = _float(value)
    if parsed <= 0:  # a NaN passes, as in the engine's ``<= 0``
        raise _Refused
    return parsed


def _token(value: Any) -> Any:
    if value is not None and (not isinstance(value, str) or not value):
        raise _Refused
    return value


def _token_id(value: Any) -> Any:
    if value is not None and (_int(value) is None or value < 0):
        raise _Refused
    return value


def _bool(value: Any) -> Any:
    if not isinstance(value, bool):
        raise _Refused
    return value


def _number(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise _Refused
    return value


#: A config check's rule (``ConfigCheck.rule``) → its parse of the value (the parsed value, or ``_Refused``).
RULES: dict[str, Callable[[Any], Any]] = {
    "int_min_1": _optional_int(1),
    "int_min_0": _optional_int(0),
    "positive_float": _positive_float,
    "float_or_falsy": lambda value: _float(value or 0.0),
    "token": _token,
    "token_id": _token_id,
    "bool": _bool,
    "number": _number,
}


def config_refusal(checks: tuple[ConfigCheck, ...], config: Mapping[str, Any]) -> tuple[Event, dict[str, Any]] | None:
    """The first of an engine's ``checks`` that refuses ``config``, and its event's params (None: every one passes).
    A check made ``together`` with another is run among the same ``checks``."""
    parsed: dict[str, tuple[dict[str, Any], Any]] = {}
    for check in checks:
        key = next((k for k in check.keys if present(config, k)), None)
        value = dotted(config, key) if key is not None else check.default
        shown = key or check.keys[0]
        found = {"key": shown, "found": value, "unset": key is None}
        try:
            parsed[check.keys[0]] = (found, RULES[check.rule](value))
        except _Refused:
            return check.event, found | {"rule": check.rule}
        if check.together is not None and check.together in parsed:
            pair, pair_parsed = parsed[check.together]
            if bool(pair_parsed) != bool(parsed[check.keys[0]][1]):
                return check.event, pair | {
                    "rule": "together",
                    "pair_key": shown,
                    "pair_found": value,
                    "pair_unset": key is None,
                }
    return None


def sink_bias_built(engine: DFlashEngine, config: Mapping[str, Any]) -> bool:
    """Whether the engine's drafter layers build attention sink biases: the flag's first present key, by truth."""
    if engine.sink_bias is None:
        return False
    key = next((k for k in engine.sink_bias.keys if present(config, k)), None)
    return key is not None and bool(dotted(config, key))


def mask_refusal(engine: DFlashEngine, config: Mapping[str, Any], on_v1: bool) -> tuple[Event, dict[str, Any]] | None:
    """The runtime's mask-token lookup at start-up: the event it refuses with and its params (None: it resolves)."""
    lookup = engine.mask_lookup
    if lookup is None:
        return None
    for key, null_is_unset in lookup.keys:
        if not present(config, key) or (null_is_unset and dotted(config, key) is None):
            continue
        if dotted(config, key) is None and not on_v1:
            return lookup.null, {"key": key}
        return None
    return lookup.missing, {"keys": [key for key, _ in lookup.keys]}
