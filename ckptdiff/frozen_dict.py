"""A dict that refuses changes: the mappings a report holds (a finding's ``params``, the ``counts``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class FrozenDict(dict[_K, _V]):
    """A dict that refuses changes, for the mappings a report holds (a finding's ``params``, the ``counts``): a
    ``dict`` still (JSON, ``==``, pickling, ``{**params}``), read-only, and hashable as the records holding it are
    (lists and dicts among its values count by their contents)."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a report's mappings are read-only; dict(mapping) is a copy to change")

    __setitem__ = __delitem__ = __ior__ = setdefault = update = pop = popitem = clear = _refuse

    def __reduce__(self) -> tuple[type[FrozenDict[_K, _V]], tuple[dict[_K, _V]]]:
        return type(self), (dict(self),)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(hashable(self))


def hashable(value: Any) -> Any:
    """``value`` as a hashable key, equal wherever ``value`` is: dicts by their items, lists and tuples by theirs."""
    if isinstance(value, dict):
        return frozenset((key, hashable(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(map(hashable, value))
    return value


def frozen(items: Mapping[_K, _V] | Iterable[tuple[_K, _V]]) -> FrozenDict[_K, _V]:
    """``items`` as a :class:`FrozenDict` (itself when it already is one)."""
    return items if isinstance(items, FrozenDict) else FrozenDict(items)
