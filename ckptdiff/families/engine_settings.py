"""Settings of a serving engine that change what it does with a drafter, for one run (``--vllm-runner``).

Held in a context variable so that every family's replay can read them without each call passing them on: the
pipeline sets them around a run (:func:`using`), the rules read :func:`current`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import msgspec

#: vLLM's model runners: V2 (the default for EAGLE-3 in 0.33.0) and V1 (``VLLM_USE_V2_MODEL_RUNNER=0``, or a
#: feature V2 lacks).
VLLM_RUNNERS = ("v2", "v1")


class EngineSettings(msgspec.Struct, frozen=True):
    vllm_runner: str = "v2"

    def __post_init__(self) -> None:
        if self.vllm_runner not in VLLM_RUNNERS:
            raise ValueError(f"unknown vLLM runner {self.vllm_runner!r}; choose from {', '.join(VLLM_RUNNERS)}")


_CURRENT: ContextVar[EngineSettings | None] = ContextVar("ckptdiff_engine_settings", default=None)
_DEFAULT = EngineSettings()


def current() -> EngineSettings:
    return _CURRENT.get() or _DEFAULT


@contextmanager
def using(settings: EngineSettings) -> Iterator[None]:
    token = _CURRENT.set(settings)
    try:
        yield
    finally:
        _CURRENT.reset(token)
