"""--values in worker processes (--jobs) and on a Dask cluster (--scheduler): the same report as in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from ckptdiff.sources import resolve  # noqa: E402
from ckptdiff.values import ValuesOptions, compare_values  # noqa: E402
from ckptdiff.values.executors import ShardTask, SideSpec, run_task, shard_tasks  # noqa: E402
from ckptdiff.values.scheduling import Pair  # noqa: E402
from fixtures.generate import header_bytes  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def write_shards(folder: Path, seed: int, changed: bool) -> Path:
    """A two-shard checkpoint (index + shards) of bf16 and f32 tensors; ``changed`` perturbs some of them."""
    rng = np.random.default_rng(0)
    noise = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for shard in range(2):
        name = f"model-{shard + 1:05d}-of-00002.safetensors"
        tensors = []
        data = []
        for layer in range(3):
            values = rng.standard_normal(70_000)
            if changed and layer != 1:
                values = values + noise.standard_normal(values.size) * 0.01
            bf16 = (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2")
            tensors.append((f"layers.{shard}.{layer}.weight", "BF16", [values.size]))
            data.append(bf16.tobytes())
            tensors.append((f"layers.{shard}.{layer}.bias", "F32", [100]))
            data.append(values[:100].astype("<f4").tobytes())
        prefix, _ = header_bytes(tensors, {"format": "pt"})
        (folder / name).write_bytes(prefix + b"".join(data))
        weight_map.update({tensor[0]: name for tensor in tensors})
    index = {"metadata": {}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pair")
    return write_shards(root / "a", seed=1, changed=False), write_shards(root / "b", seed=2, changed=True)


def report_of(run_cli, *args: str) -> dict:
    done = run_cli(*args, "--values", "--format", "json", "-q")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    report.pop("command", None)
    return report


def test_a_progress_hook_hears_every_byte(pair: tuple[Path, Path]) -> None:
    a, b = resolve(str(pair[0])), resolve(str(pair[1]))
    heard: list[tuple[int, int]] = []
    names = [name for name in a.tensors if name in b.tensors]
    compare_values(a, b, names, options=ValuesOptions(on_progress=lambda done, total: heard.append((done, total))))
    total = sum(a.tensors[name].nbytes + b.tensors[name].nbytes for name in names)
    assert heard[0] == (0, total) and heard[-1] == (total, total)
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)


def test_the_pass_is_cut_into_shard_pair_tasks(pair: tuple[Path, Path]) -> None:
    a, b = resolve(str(pair[0])), resolve(str(pair[1]))
    pairs = [Pair(0, a.tensors[name], 1, b.tensors[name]) for name in sorted(a.tensors)]
    sides = [SideSpec("A", a.spec, a.revision), SideSpec("B", b.spec, b.revision)]
    tasks = shard_tasks(sides, pairs)
    assert len(tasks) == 2
    assert sorted(p for task in tasks for p in task.positions) == list(range(len(pairs)))
    assert all(len({(pair.a.file, pair.b.file) for pair in task.pairs}) == 1 for task in tasks)


def test_a_worker_that_cannot_see_a_local_file_says_so(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """A task carries specs and paths, not handles: a worker without the path answers with one line."""
    a = resolve(str(pair[0]))
    info = next(iter(a.tensors.values()))
    elsewhere = SideSpec("A", str(tmp_path / "not-here"), None, paths={info.file: str(tmp_path / "not-here" / "x")})
    stats, error = run_task(ShardTask((elsewhere, elsewhere), (Pair(0, info, 1, info),), (0,)))
    assert stats is None and error is not None
    assert "missing on this worker" in error[1]


def test_a_worker_reads_a_store_side_itself_and_keeps_no_copy(
    pair: tuple[Path, Path], s3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task on an s3:// pair, as a Dask worker runs it: the worker copies the two shards from the store (its
    own AWS chain), computes what the local files give, and removes the copies when the task ends."""
    import tempfile

    scratch = tmp_path / "worker-tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    s3.upload(pair[0], "runs/a")
    s3.upload(pair[1], "runs/b")
    a, b = resolve("s3://runs/a"), resolve("s3://runs/b")
    pairs = [Pair(0, a.tensors[name], 1, b.tensors[name]) for name in sorted(a.tensors)]
    sides = [SideSpec("A", a.spec, a.revision), SideSpec("B", b.spec, b.revision)]
    task = next(task for task in shard_tasks(sides, pairs) if len(task.pairs) == 6)
    stats, error = run_task(task)
    read = s3.bytes_sent
    assert error is None and stats is not None
    shard = task.pairs[0].a.file
    assert read[f"runs/a/{shard}"] >= (pair[0] / shard).stat().st_size  # the worker fetched it, not the driver
    assert list(scratch.iterdir()) == []  # nothing left on the worker's disk
    on_disk = (SideSpec("A", str(pair[0]), None), SideSpec("B", str(pair[1]), None))
    assert stats == run_task(ShardTask(on_disk, task.pairs, task.positions, task.kernel))[0]


def test_a_worker_reads_a_hub_side_itself(pair: tuple[Path, Path], hub_client, tmp_path: Path) -> None:
    """A task on a Hub pair, as a Dask worker runs it: the worker downloads the two shards at the revision the
    driver read (into its HF cache) and computes what the local files give."""
    hub_client.add_repo("org/run-a", pair[0])
    hub_client.add_repo("org/run-b", pair[1])
    a, b = resolve("org/run-a"), resolve("org/run-b")
    pairs = [Pair(0, a.tensors[name], 1, b.tensors[name]) for name in sorted(a.tensors)]
    sides = [SideSpec("A", a.spec, a.revision), SideSpec("B", b.spec, b.revision)]
    task = next(task for task in shard_tasks(sides, pairs) if len(task.pairs) == 6)
    hub_client.reset_counters()
    stats, error = run_task(task)
    assert error is None and stats is not None
    shard = task.pairs[0].a.file
    assert hub_client.bytes_sent["resolve"] >= 2 * (pair[0] / shard).stat().st_size  # both sides, by the worker
    assert len(list((tmp_path / "hf-home" / "hub").rglob(shard))) == 2  # in the HF cache, as any Hub download
    on_disk = (SideSpec("A", str(pair[0]), None), SideSpec("B", str(pair[1]), None))
    assert stats == run_task(ShardTask(on_disk, task.pairs, task.positions, task.kernel))[0]


def test_local_processes_give_the_same_report(pair: tuple[Path, Path], run_cli) -> None:
    here = report_of(run_cli, str(pair[0]), str(pair[1]))
    processes = report_of(run_cli, str(pair[0]), str(pair[1]), "--jobs", "2")
    assert processes == here
    changed = [row["name"] for row in here["tensors"] if row.get("values") and not row["values"]["equal"]]
    assert changed and all(name.split(".")[2] != "1" for name in changed)  # layer 1 is the same on both sides


@pytest.mark.dask
def test_a_dask_cluster_gives_the_same_report_and_both_workers_take_tasks(
    pair: tuple[Path, Path], cluster, run_cli
) -> None:
    """`ckptdiff A B --values --scheduler tcp://...`: JSON equal to the in-process run's, bit for bit; the library's
    pass on the cluster too, and each of its two workers ran tasks. One test, so that a run starts one cluster
    (each xdist worker starts its own for the tests it runs)."""
    from distributed import Client

    here = report_of(run_cli, str(pair[0]), str(pair[1]))
    on_dask = report_of(run_cli, str(pair[0]), str(pair[1]), "--scheduler", cluster.scheduler_address)
    assert on_dask == here
    assert any(row.get("values") and not row["values"]["equal"] for row in here["tensors"])

    a, b = resolve(str(pair[0])), resolve(str(pair[1]))
    compare_values(a, b, list(a.tensors), options=ValuesOptions(scheduler=cluster.scheduler_address))
    with Client(cluster.scheduler_address) as client:
        ran = client.run(lambda dask_worker: len(dask_worker.data) + dask_worker.state.executed_count)
    assert len(ran) == 2 and all(count > 0 for count in ran.values()), ran


def test_scheduler_needs_values(run_cli) -> None:
    done = run_cli("a", "b", "--scheduler", "tcp://127.0.0.1:1")
    assert done.returncode == 2
    assert "--scheduler runs the --values pass" in done.stderr
