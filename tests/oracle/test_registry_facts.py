"""``pytest -m oracle``: ckptdiff's per-engine class choices against the engines' own registries and config rewrites
(registry_check.py): vLLM's MTP class per target config, the MTP classes it registers, the Transformers backend's
targets, and the families a pinned engine has no loader for (Medusa)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import registry_check  # noqa: E402

pytestmark = pytest.mark.oracle


def test_vllms_mtp_class_for_each_target_config_is_the_one_ckptdiff_names() -> None:
    rows, compared = registry_check.vllm_mtp_choice()
    assert not rows, "\n".join(rows)
    assert compared >= 80


def test_every_mtp_class_vllm_registers_is_one_ckptdiff_names() -> None:
    rows = registry_check.vllm_mtp_registry()
    assert not rows, "\n".join(rows)


def test_every_mtp_class_sglang_registers_is_one_ckptdiff_names() -> None:
    rows = registry_check.sglang_mtp_registry()
    assert not rows, "\n".join(rows)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_family_has_no_loader_exactly_where_no_registry_or_method_names_it(engine: str) -> None:
    rows = registry_check.no_loader(engine)
    assert not rows, "\n".join(rows)
