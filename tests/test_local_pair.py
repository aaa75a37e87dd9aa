"""Two large local sides are read on two cores (B in a forked child) with exactly the sequential results and errors."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import ckptdiff.sources.local_pair as local_pair
from ckptdiff.checkpoint import Checkpoint
from ckptdiff.errors import CkptdiffError
from ckptdiff.sources import resolve, resolve_both
from fixtures.generate import write_kimi_k2_base

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pair")
    a = write_kimi_k2_base(root / "a", layers=3, experts=4)
    b = write_kimi_k2_base(root / "b", layers=3, experts=4, embed_shape=[163842, 7168])
    return a, b


@pytest.fixture
def ran_elsewhere(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Make ckptdiff fork whatever the index size. ckptdiff never forks a process with other threads, which a
    long pytest run has (servers of earlier tests): then the test runs, and must pass, in a fresh pytest, and
    this returns True for the test to stop."""
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("ckptdiff reads the sides in turn on this machine")
    if threading.active_count() > 1 and not os.environ.get("CKPTDIFF_FRESH_PYTEST"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
            cwd=REPO, env={**os.environ, "CKPTDIFF_FRESH_PYTEST": "1"}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-4000:]
        return True
    if threading.active_count() > 1:
        pytest.fail("other threads are running even in a fresh pytest")
    monkeypatch.setattr(local_pair, "MIN_INDEX_BYTES", 0)
    return False


def children() -> set[int]:
    """This process's live child processes."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        found |= {int(pid) for pid in (task / "children").read_text().split()}
    return found


def test_columns_carry_a_checkpoint_through_marshal_unchanged(pair: tuple[Path, Path]) -> None:
    for spec in (str(pair[0]), str(REPO / "fixtures" / "kimi-k25-eagle3-ours")):
        checkpoint = resolve(spec)
        again = local_pair.from_columns(marshal.loads(marshal.dumps(local_pair.to_columns(checkpoint))))
        assert again == checkpoint
        assert list(again.tensors) == list(checkpoint.tensors)
        assert [t.numel for t in again.tensors.values()] == [t.numel for t in checkpoint.tensors.values()]


def test_side_b_is_read_in_another_process_with_the_same_result(
    pair: tuple[Path, Path], ran_elsewhere: bool, tmp_path: Path
) -> None:
    if ran_elsewhere:
        return

    def read(spec: str) -> Checkpoint:  # records which process read each side, through a file the child can write
        (tmp_path / Path(spec).name).write_text(str(os.getpid()))
        return resolve(spec)

    a, b = local_pair.read_pair(str(pair[0]), str(pair[1]), read)
    readers = {side: int((tmp_path / side).read_text()) for side in ("a", "b")}

    assert readers["a"] == os.getpid() and readers["b"] != os.getpid()
    assert (a, b) == (resolve(str(pair[0])), resolve(str(pair[1])))
    assert b.tensors["model.embed_tokens.weight"].shape == (163842, 7168)


def test_the_cli_report_is_byte_identical_either_way(pair: tuple[Path, Path], ran_elsewhere: bool) -> None:
    if ran_elsewhere:
        return
    from ckptdiff.formats import render

    forked = render(_compare(*resolve_both(str(pair[0]), str(pair[1]))), "json")
    in_turn = render(_compare(resolve(str(pair[0])), resolve(str(pair[1]))), "json")
    assert forked == in_turn
    assert json.loads(forked)["counts"]["shape_mismatch"] == 1


def test_a_broken_side_b_raises_its_own_error(pair: tuple[Path, Path], ran_elsewhere: bool, tmp_path: Path) -> None:
    if ran_elsewhere:
        return
    broken = tmp_path / "broken"
    write_kimi_k2_base(broken, layers=2, experts=2)
    index = json.loads((broken / "model.safetensors.index.json").read_text())
    index["weight_map"]["ghost.weight"] = "model-00001-of-000002.safetensors"
    (broken / "model.safetensors.index.json").write_text(json.dumps(index))

    with pytest.raises(CkptdiffError) as in_turn:
        resolve(str(broken))
    with pytest.raises(CkptdiffError) as forked:
        resolve_both(str(pair[0]), str(broken))
    assert forked.value.line() == in_turn.value.line()
    assert "ghost.weight" in forked.value.line()


def test_a_broken_side_a_raises_first_and_leaves_no_child(
    pair: tuple[Path, Path], ran_elsewhere: bool, tmp_path: Path
) -> None:
    if ran_elsewhere:
        return
    before = children()
    with pytest.raises(CkptdiffError, match="no such file or folder"):
        resolve_both(str(tmp_path / "missing"), str(pair[1]))
    assert children() == before  # the child reading B was stopped and reaped


def _compare(a, b):
    from ckptdiff.compare import compare_checkpoints

    return compare_checkpoints(a, b)
