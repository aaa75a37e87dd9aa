"""The oracle's engine results cache (engines.py, default suite, no engine needed): results of distinct keys for one
case name live side by side, so checkouts whose worker files differ keep theirs; the folder stays bounded."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from engines import KEEP_PER_CASE, KEEP_UNUSED_DAYS, cached_result, store_result  # noqa: E402


def _produce(tmp_path: Path, value: int) -> Path:
    produced = tmp_path / f"produced-{value}.json"
    produced.write_text(json.dumps({"value": value}))
    return produced


def _key(i: int) -> str:
    return f"{i:024x}"


def test_two_keys_of_one_case_name_both_stay(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    store_result(cache, "basic", _key(1), _produce(tmp_path, 1))
    store_result(cache, "basic", _key(2), _produce(tmp_path, 2))
    assert cached_result(cache, "basic", _key(1)) == {"value": 1}
    assert cached_result(cache, "basic", _key(2)) == {"value": 2}
    assert cached_result(cache, "basic", _key(3)) is None


def test_a_case_keeps_its_most_recently_used_results_only(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    now = time.time()
    for i in range(KEEP_PER_CASE):
        store_result(cache, "basic", _key(i), _produce(tmp_path, i))
        os.utime(cache / f"basic-{_key(i)}.json", (now - 1000 + i, now - 1000 + i))
    store_result(cache, "basic_other", _key(0), _produce(tmp_path, 99))  # another case: not counted with basic
    assert cached_result(cache, "basic", _key(0)) == {"value": 0}  # read: now the most recently used
    store_result(cache, "basic", _key(KEEP_PER_CASE), _produce(tmp_path, KEEP_PER_CASE))
    kept = sorted(p.name for p in cache.glob("basic-*.json"))
    assert len(kept) == KEEP_PER_CASE
    assert f"basic-{_key(1)}.json" not in kept  # the least recently used went
    assert f"basic-{_key(0)}.json" in kept and cached_result(cache, "basic_other", _key(0)) == {"value": 99}


def test_results_unused_for_long_are_dropped_when_the_folder_is_written(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    store_result(cache, "old_case", _key(1), _produce(tmp_path, 1))
    long_ago = time.time() - (KEEP_UNUSED_DAYS + 1) * 86400
    os.utime(cache / f"old_case-{_key(1)}.json", (long_ago, long_ago))
    store_result(cache, "new_case", _key(2), _produce(tmp_path, 2))
    assert cached_result(cache, "old_case", _key(1)) is None
    assert [p.name for p in cache.iterdir()] == [f"new_case-{_key(2)}.json"]


def test_a_renamed_case_finds_its_result_by_key(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    store_result(cache, "basic", _key(7), _produce(tmp_path, 7))
    assert cached_result(cache, "dflash_basic", _key(7)) == {"value": 7}
    assert cached_result(cache, "dflash_basic", _key(8)) is None
