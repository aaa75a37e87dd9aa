"""--values: did training change a tensor, and by how much? Statistics, ranking, byte identity, embed checks."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch_files import write_torch_file

from ckptdiff import values
from ckptdiff.errors import CkptdiffError
from ckptdiff.formats import render
from ckptdiff.formats.messages import finding_message
from ckptdiff.formats.values_messages import VALUES, value_note_text
from ckptdiff.pipeline import compare_specs
from ckptdiff.report import ValueNote
from ckptdiff.sources import resolve
from ckptdiff.values import scheduling
from ckptdiff.values.dtypes import VALUE_TYPES, equal_chunk_facts, widen
from fixtures.generate import header_bytes, small_drafter_config, write_config

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

REPO = Path(__file__).resolve().parent.parent
BF16 = np.dtype(ml_dtypes.bfloat16)
#: numpy's type of each safetensors dtype's elements (ml_dtypes for bfloat16 and fp8) → the dtype's name.
DTYPE_NAMES = {kind.numpy: name for name, kind in VALUE_TYPES.items()}


def randn(rng: np.random.Generator, *shape: int, dtype: object = np.float32) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def random_tensors(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "bf16.weight": randn(rng, 96, 64, dtype=BF16),
        "f32.weight": randn(rng, 40, 30),
        "f16.weight": randn(rng, 33, dtype=np.float16),
        "ids": np.arange(50, dtype=np.int64),
        "mask": np.arange(20) % 3 == 0,
        "fp8.weight": (randn(rng, 32, 16) * 4).astype(ml_dtypes.float8_e4m3fn),
    }


def is_float(array: np.ndarray) -> bool:
    return DTYPE_NAMES[array.dtype].startswith(("F", "BF"))


def perturbed(tensors: dict[str, np.ndarray], scale: float, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, tensor in tensors.items():
        if is_float(tensor):
            out[name] = (tensor.astype(np.float32) + randn(rng, *tensor.shape) * scale).astype(tensor.dtype)
        else:
            out[name] = tensor.copy()
    return out


def save(folder: Path, tensors: dict[str, np.ndarray]) -> Path:
    """A model.safetensors of these arrays, bfloat16 and fp8 included (safetensors.numpy knows neither)."""
    folder.mkdir(parents=True, exist_ok=True)
    specs = [(name, DTYPE_NAMES[array.dtype], list(array.shape)) for name, array in tensors.items()]
    prefix, _ = header_bytes(specs, metadata={"format": "pt"})
    data = b"".join(np.ascontiguousarray(array).tobytes() for array in tensors.values())
    (folder / "model.safetensors").write_bytes(prefix + data)
    return folder


def direct_stats(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """The same statistics, straight from numpy on whole arrays in float64."""
    x, y = a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1)
    d = y - x
    return {
        "max_abs": float(np.abs(d).max()),
        "mean_abs": float(np.abs(d).mean()),
        "cosine": float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))),
        "rel_l2": float(np.linalg.norm(d) / np.linalg.norm(x)),
    }


@pytest.mark.parametrize("chunk", [scheduling.CHUNK_ELEMENTS, 100], ids=["one-chunk", "many-chunks"])
def test_stats_match_a_float64_computation(tmp_path: Path, monkeypatch, chunk: int) -> None:
    monkeypatch.setattr(scheduling, "CHUNK_ELEMENTS", chunk)
    a_tensors = random_tensors()
    b_tensors = perturbed(a_tensors, scale=0.05)
    a, b = resolve(str(save(tmp_path / "a", a_tensors))), resolve(str(save(tmp_path / "b", b_tensors)))

    result = values.compare_values(a, b, sorted(a_tensors))

    for name in ("bf16.weight", "f32.weight", "f16.weight", "fp8.weight"):
        got, expected = result.stats[name], direct_stats(a_tensors[name], b_tensors[name])
        assert not got.equal, name
        for key, value in expected.items():
            assert getattr(got, key) == pytest.approx(value, rel=1e-4, abs=1e-6), (name, key)
    for name in ("ids", "mask"):
        assert result.stats[name].equal and result.stats[name].max_abs == 0.0


TORCH_TYPES = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", sorted(TORCH_TYPES))
def test_every_bit_pattern_widens_to_the_float32_torch_gives(dtype: str) -> None:
    """bf16 by a shift, f16 and fp8 by a table: all 2^8 or 2^16 values, NaNs included, as torch converts them."""
    torch = pytest.importorskip("torch")
    torch_type = getattr(torch, TORCH_TYPES[dtype], None)
    if torch_type is None:
        pytest.skip(f"this torch has no {TORCH_TYPES[dtype]}")
    kind = VALUE_TYPES[dtype]
    every = bytearray(np.arange(2 ** (8 * kind.itemsize), dtype=kind.bits).tobytes())

    widened = widen(kind, every, np.empty(len(every) // kind.itemsize, np.float32))

    expected = torch.frombuffer(bytearray(every), dtype=torch_type).float().numpy()
    assert np.array_equal(widened, expected, equal_nan=True)


@pytest.mark.parametrize("dtype", sorted(name for name, kind in VALUE_TYPES.items() if kind.magnitude_mask))
def test_what_equal_bytes_tell_matches_the_widened_values(dtype: str) -> None:
    """A byte-for-byte equal chunk is a SameChunk when every element is finite; its cosine needs a nonzero one.
    Read from the bits alone: checked against the widened values, on every 1- and 2-byte pattern by itself
    and on random chunks mixing signs, zeros, infinities and NaNs."""
    kind = VALUE_TYPES[dtype]
    rng = np.random.default_rng(5)
    wide = kind.itemsize > 2
    patterns = (
        rng.integers(0, 2 ** (8 * kind.itemsize), 4096, dtype=kind.bits, endpoint=False)
        if wide
        else np.arange(2 ** (8 * kind.itemsize), dtype=kind.bits)
    )
    special = np.array([0, 1, kind.magnitude_mask], kind.bits)
    if kind.finite_below is not None:  # ±0, ±tiny, ±largest finite, ±infinity or NaN, ±largest NaN
        special = np.array([0, 1, kind.finite_below - 1, kind.finite_below, kind.magnitude_mask], kind.bits)
        special = np.concatenate([special, special | np.array(kind.magnitude_mask + 1, kind.bits)])
    pool = np.concatenate([patterns, special])
    chunks = [pool[i : i + 1] for i in range(pool.size)] if not wide else []
    chunks += [rng.choice(special, 3) for _ in range(200)] + [rng.choice(pool, 7) for _ in range(500)]
    for chunk in chunks:
        raw = bytearray(chunk.tobytes())
        with np.errstate(invalid="ignore"):  # NaN patterns of bf16 and fp8
            values = np.frombuffer(raw, kind.numpy).astype(np.float64)
        expected = (bool(np.isfinite(values).all()), bool((values != 0).any()))
        assert equal_chunk_facts(kind, raw) == expected, (dtype, chunk)


@pytest.mark.parametrize("noise", [1e-3, 10.0], ids=["fine-tuned", "unrelated"])
def test_cosine_is_accurate_near_one_and_near_zero(tmp_path: Path, noise: float) -> None:
    """1 − cos of a fine-tuned tensor and the cosine of unrelated ones, both where float32 loses digits."""
    rng = np.random.default_rng(11)
    a = randn(rng, 1200, 1000, dtype=BF16)  # 1.2 M elements: several chunks
    b = (a.astype(np.float32) + noise * randn(rng, *a.shape)).astype(BF16)
    left, right = resolve(str(save(tmp_path / "a", {"w": a}))), resolve(str(save(tmp_path / "b", {"w": b})))

    stats = values.compare_values(left, right, ["w"]).stats["w"]

    expected = direct_stats(a, b)["cosine"]
    assert 1 - stats.cosine == pytest.approx(1 - expected, rel=1e-3)
    assert stats.cosine == pytest.approx(expected, abs=1e-6)


def test_partly_trained_tensors_on_threads_match_torch_and_one_thread(tmp_path: Path, monkeypatch) -> None:
    """Only some rows trained (new tokens' embeddings): equal chunks skip the float math, and their Σa² is
    added afterwards. Threads give the same bits as one thread; a NaN in an equal chunk is counted either way."""
    rng = np.random.default_rng(7)
    embed = randn(rng, 64, 50, dtype=BF16)
    tuned = embed.copy()
    tuned[40:44] = (embed[40:44].astype(np.float32) + 0.25).astype(BF16)  # elements 2000–2199: two 100-element chunks
    half = randn(rng, 1000, dtype=np.float16)
    half[5] = np.nan  # in an equal chunk, on both sides
    a_tensors = {"embed": embed, "half": half, "same": embed.copy()}
    b_tensors = {"embed": tuned, "half": half.copy(), "same": embed.copy()}
    a, b = resolve(str(save(tmp_path / "a", a_tensors))), resolve(str(save(tmp_path / "b", b_tensors)))
    monkeypatch.setattr(scheduling, "CHUNK_ELEMENTS", 100)

    monkeypatch.setattr(scheduling, "THREADS_MIN_BYTES", 0)
    threaded = values.compare_values(a, b, sorted(a_tensors)).stats
    monkeypatch.setattr(scheduling, "THREADS_MIN_BYTES", 2**62)
    one_thread = values.compare_values(a, b, sorted(a_tensors)).stats

    assert threaded == one_thread
    for key, value in direct_stats(embed, tuned).items():
        assert getattr(threaded["embed"], key) == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert threaded["same"].equal and threaded["same"].cosine == 1.0
    assert threaded["half"].equal and threaded["half"].note == ValueNote(nonfinite=1)


def test_a_file_cut_short_during_a_threaded_pass_fails_with_one_line(tmp_path: Path, monkeypatch) -> None:
    a_tensors = random_tensors()
    a, b = resolve(str(save(tmp_path / "a", a_tensors))), resolve(str(save(tmp_path / "b", perturbed(a_tensors, 0.1))))
    with open(tmp_path / "b" / "model.safetensors", "r+b") as handle:  # shrinks after its header was read
        handle.truncate(handle.seek(0, 2) - 100)
    monkeypatch.setattr(scheduling, "CHUNK_ELEMENTS", 100)
    monkeypatch.setattr(scheduling, "THREADS_MIN_BYTES", 0)

    with pytest.raises(CkptdiffError, match=r"model\.safetensors: file ends at byte \d+, a tensor needs \d+"):
        values.compare_values(a, b, sorted(a_tensors))


def test_equal_tensors_and_all_zero_ones(tmp_path: Path) -> None:
    tensors = {"w": randn(np.random.default_rng(0), 5, 5), "zeros": np.zeros(7, dtype=BF16)}
    a, b = resolve(str(save(tmp_path / "a", tensors))), resolve(str(save(tmp_path / "b", dict(tensors))))

    stats = values.compare_values(a, b, ["w", "zeros"]).stats

    equal = {"equal": True, "max_abs": 0.0, "mean_abs": 0.0, "cosine": 1.0, "rel_l2": 0.0, "method": "read"}
    assert stats["w"].to_dict() == equal
    assert stats["zeros"].equal and stats["zeros"].cosine is None  # undefined for a zero vector


def test_a_dtype_change_is_compared_in_float32(tmp_path: Path) -> None:
    """bf16 weights saved again as f32 hold the same numbers: equal by value, though not by bytes."""
    weights = randn(np.random.default_rng(5), 16, 8, dtype=BF16)
    a = resolve(str(save(tmp_path / "a", {"w": weights})))
    b = resolve(str(save(tmp_path / "b", {"w": weights.astype(np.float32)})))

    stats = values.compare_values(a, b, ["w"]).stats["w"]

    assert stats.equal and stats.cosine == pytest.approx(1.0)
    assert stats.note == ValueNote(widened=("BF16", "F32"))
    assert value_note_text(stats.note) == "BF16 vs F32, compared as float32"


@pytest.mark.parametrize("dtype", sorted(VALUE_TYPES))
def test_every_widened_dtype_tells_a_copy_from_a_change(tmp_path: Path, dtype: str) -> None:
    """Random bytes (NaN and infinity patterns included) in every dtype: a copy is equal, one changed byte is not."""
    prefix, length = header_bytes([("w", dtype, [3000])])
    data = bytes(np.random.default_rng(3).integers(0, 256, length, dtype=np.uint8))
    if dtype == "BOOL":
        data = bytes(byte & 1 for byte in data)
    changed = bytearray(data)
    changed[length // 2] ^= 1
    for name, payload in (("a", data), ("copy", data), ("b", bytes(changed))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(prefix + payload)
    a, copy, b = (resolve(str(tmp_path / name)) for name in ("a", "copy", "b"))

    assert values.compare_values(a, copy, ["w"]).stats["w"].equal
    assert not values.compare_values(a, b, ["w"]).stats["w"].equal


def test_packed_fp4_is_compared_byte_for_byte(tmp_path: Path) -> None:
    """F4 (two values a byte) is not widened: equal or not, from the bytes, and the note says so."""
    prefix, length = header_bytes([("w", "F4", [4096])])
    data = bytes(range(256)) * (length // 256)
    for name, payload in (("a", data), ("same", data), ("b", data[:-1] + b"\x00")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(prefix + payload)
    a, same, b = (resolve(str(tmp_path / name)) for name in ("a", "same", "b"))

    equal, changed = values.compare_values(a, same, ["w"]).stats["w"], values.compare_values(a, b, ["w"]).stats["w"]

    assert equal.equal and not changed.equal
    assert equal.note == changed.note == ValueNote(not_widened="F4", bytes_compared=True)
    assert value_note_text(changed.note) == "dtype F4 is not widened to float32; bytes compared"
    assert changed.max_abs is None and changed.cosine is None


def test_nan_and_overflow_are_left_out_and_said(tmp_path: Path) -> None:
    a = np.array([1.0, np.nan, 3.0, 3e38], dtype=np.float32)
    b = np.array([1.5, np.nan, 3.0, -3e38], dtype=np.float32)
    left, right = resolve(str(save(tmp_path / "a", {"w": a}))), resolve(str(save(tmp_path / "b", {"w": b})))

    stats = values.compare_values(left, right, ["w"]).stats["w"]

    assert not stats.equal
    assert stats.max_abs == pytest.approx(6e38)
    assert stats.note == ValueNote(nonfinite=1)
    json.dumps(stats.to_dict(), allow_nan=False)  # valid JSON whatever the data


UP_PROJ = "midlayer.mlp.up_proj.weight"


def fine_tuned_tensors() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A drafter's tensors and a copy where training changed up_proj a lot and fc.weight a little."""
    base = {
        "fc.weight": np.ones((256, 768), dtype=BF16),  # 384 KiB: more than a header read
        UP_PROJ: randn(np.random.default_rng(3), 160, 64, dtype=BF16),
        "norm.weight": np.ones(64, dtype=BF16),
        "d2t": np.arange(256, dtype=np.int64),
    }
    tuned = dict(base)
    tuned[UP_PROJ] = (base[UP_PROJ].astype(np.float32) * 1.5).astype(BF16)
    tuned["fc.weight"] = base["fc.weight"].copy()
    tuned["fc.weight"][7, 7] = 1.0078125  # one bf16 step
    return base, tuned


def fine_tuned_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The two as checkpoints: published and tuned."""
    base, tuned = fine_tuned_tensors()
    return save(tmp_path / "published", base), save(tmp_path / "tuned", tuned)


def test_a_fine_tuned_copy_names_the_changed_tensors_largest_first(tmp_path: Path, run_cli) -> None:
    published, tuned = fine_tuned_pair(tmp_path)

    done = run_cli(str(published), str(tuned), "--values", "--format", "json")

    assert done.returncode == 0, done.stderr  # values never make a compatible pair incompatible by themselves
    report = json.loads(done.stdout)
    by_name = {row["name"]: row["values"] for row in report["tensors"]}
    assert sorted(name for name, v in by_name.items() if not v["equal"]) == ["fc.weight", UP_PROJ]
    assert by_name[UP_PROJ]["rel_l2"] == pytest.approx(0.5, rel=0.01)
    assert by_name[UP_PROJ]["cosine"] == pytest.approx(1.0, abs=1e-4)
    assert by_name["fc.weight"]["max_abs"] == pytest.approx(0.0078125)
    summary = next(f for f in report["findings"] if f["code"] == "values_changed")["message"]
    assert summary.index(UP_PROJ) < summary.index("fc.weight")
    assert "4 tensors compared by value: 2 equal, 2 changed" in summary


def test_the_table_ranks_value_changes(tmp_path: Path) -> None:
    published, tuned = fine_tuned_pair(tmp_path)

    report = compare_specs(str(published), str(tuned), values=True)
    table, markdown = render(report, "table"), render(report, "markdown")

    for text in (table, markdown):
        assert "rel L2" in text and "cos" in text
        lines = [line for line in text.splitlines() if "fc.weight" in line or UP_PROJ in line]
        assert UP_PROJ in lines[0], text  # the largest change comes first, whatever the names' order


def test_changes_rank_by_size_and_a_change_seen_only_in_the_bytes_comes_after(tmp_path: Path, run_cli) -> None:
    """F4 (packed 4-bit) is compared by its bytes only: its change has no size to rank, so the summary names it
    apart, after the largest measured changes, and the table lists it after them. A tensor that was all zeros
    (a zero-initialised adapter) changed without bound: its rel L2 is undefined, and it comes first."""
    base, tuned = fine_tuned_tensors()
    base["adapter.weight"] = np.zeros(64, dtype=BF16)
    tuned["adapter.weight"] = np.full(64, 0.001, dtype=BF16)
    packed = bytes(range(256)) * 8
    for folder, tensors, fp4 in (("published", base, packed), ("tuned", tuned, packed[:-1] + b"\x00")):
        specs = [(name, DTYPE_NAMES[array.dtype], list(array.shape)) for name, array in tensors.items()]
        prefix, _ = header_bytes([*specs, ("experts.w_packed", "F4", [4096])])
        (tmp_path / folder).mkdir()
        data = b"".join(np.ascontiguousarray(array).tobytes() for array in tensors.values()) + fp4
        (tmp_path / folder / "model.safetensors").write_bytes(prefix + data)
    published, tuned_side = str(tmp_path / "published"), str(tmp_path / "tuned")

    report = json.loads(run_cli(published, tuned_side, "--values", "--format", "json").stdout)
    summary = next(f for f in report["findings"] if f["code"] == "values_changed")
    assert [one["tensor"] for one in summary["params"]["largest"]] == ["adapter.weight", UP_PROJ, "fc.weight"]
    assert [one["tensor"] for one in summary["params"]["unmeasured"]] == ["experts.w_packed"]
    assert summary["params"]["unmeasured_count"] == 1 and summary["params"]["changed"] == 4
    assert summary["message"].endswith(
        "; changed, not measured: experts.w_packed (dtype F4 is not widened to float32; bytes compared)"
    )
    table = run_cli(published, tuned_side, "--values").stdout
    changed = ["adapter.weight", UP_PROJ, "fc.weight", "experts.w_packed"]
    assert [line.split()[0] for line in table.splitlines() if line.split()[:1] in ([n] for n in changed)] == changed
    assert next(line for line in table.splitlines() if line.startswith("experts.w_packed")).endswith(" ≠ (bytes)")


def test_a_dtype_change_with_no_numbers_says_why_in_the_note(tmp_path: Path, run_cli) -> None:
    """BF16 against F4: the statistics do not widen F4, and the bytes of two dtypes say nothing, so the value cells
    are dashes; the note says why (as the summary's "changed, not measured" does)."""
    for folder, dtype, size in (("a", "BF16", 128), ("b", "F4", 32)):  # 64 elements each
        prefix, _ = header_bytes([("experts.w", dtype, [64])])
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.safetensors").write_bytes(prefix + bytes(range(size)))
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    for fmt, start in (("table", "experts.w "), ("markdown", "| `experts.w` ")):
        lines = run_cli(a, b, "--values", "--format", fmt).stdout.splitlines()
        row = next(line for line in lines if line.startswith(start))
        assert row.count("—") == 4, row
        assert "dtype BF16 vs F4; values not measured: dtype F4 is not widened to float32" in row, row


def test_values_follow_renamed_tensors(tmp_path: Path) -> None:
    """B names its tensors the vLLM way (model. prefix); --rename matches them, --values reads each side's own."""
    published, _ = fine_tuned_pair(tmp_path)
    _, tensors = fine_tuned_tensors()
    renamed = save(tmp_path / "renamed", {"model." + name: tensor for name, tensor in tensors.items()})

    report = compare_specs(str(published), str(renamed), values=True, renames=[r"^model\.="])

    changed = sorted(row.name for row in report.tensors if row.values is not None and not row.values.equal)
    assert changed == ["fc.weight", UP_PROJ]


HIDE_TORCH = "import sys; sys.modules['torch'] = None; from ckptdiff.cli import main; main(sys.argv[1:])"


def run_without_torch(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter where ``import torch`` fails, as in an install without the torch extra."""
    return subprocess.run([sys.executable, "-c", HIDE_TORCH, *args], capture_output=True, text=True, cwd=REPO)


def test_values_of_safetensors_need_no_torch(tmp_path: Path) -> None:
    published, tuned = fine_tuned_pair(tmp_path)

    done = run_without_torch(str(published), str(tuned), "--values", "--format", "json")

    assert done.returncode == 0, done.stderr
    changed = sorted(row["name"] for row in json.loads(done.stdout)["tensors"] if not row["values"]["equal"])
    assert changed == ["fc.weight", UP_PROJ]


def test_values_of_a_bin_file_without_torch_fail_with_the_install_line(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    write_torch_file(folder / "pytorch_model.bin", {"w": ("F32", [4, 4], None)})

    with_values = run_without_torch(str(folder), str(folder), "--values")
    without = run_without_torch(str(folder), str(folder))  # reading a .bin's metadata needs no torch

    assert with_values.returncode == 2
    assert with_values.stdout == ""
    assert with_values.stderr == (
        "ckptdiff: --values on pytorch_model.bin: needs torch, which is not installed (pip install 'ckptdiff[torch]')\n"
    )
    assert without.returncode == 0, without.stderr


def test_values_on_safetensors_do_not_import_torch(tmp_path: Path) -> None:
    """Nor numpy, under the C kernel (which reads bf16 and f32 itself); the numpy statistics need numpy."""
    from ckptdiff.values.fused import c_kernel

    published, tuned = fine_tuned_pair(tmp_path)
    script = (
        "import sys; from ckptdiff.cli import main\n"
        "try: main(sys.argv[1:])\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules), file=sys.__stderr__)"
    )

    command = [sys.executable, "-c", script, str(published), str(tuned), "--values", "-q"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)

    assert done.stderr.strip().splitlines()[-1] == ("[]" if c_kernel() is not None else "['numpy']")


def test_require_torch_is_the_library_check_too(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(CkptdiffError, match=r"pip install 'ckptdiff\[torch\]'"):
        values.require_torch()


@pytest.mark.torch
def test_a_bin_checkpoint_against_its_safetensors_copy_is_equal_value_for_value(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    tensors = random_tensors(seed=4)
    torch_types = {"F32": "float32", "I64": "int64", "BOOL": "bool", **TORCH_TYPES}
    in_torch = {
        name: torch.frombuffer(
            bytearray(array.tobytes()), dtype=getattr(torch, torch_types[DTYPE_NAMES[array.dtype]])
        ).reshape(array.shape)
        for name, array in tensors.items()
    }
    stored = randn(np.random.default_rng(6), 9, 6)
    tensors["transposed"] = stored.T
    in_torch["transposed"] = torch.from_numpy(stored).t()  # stored strided in the .bin: read through torch.load(mmap)
    folder = tmp_path / "bin"
    folder.mkdir()
    torch.save(in_torch, folder / "pytorch_model.bin")
    copy = save(tmp_path / "st", tensors)

    result = values.compare_values(resolve(str(folder)), resolve(str(copy)), sorted(tensors))

    assert all(s.equal for s in result.stats.values()), {n: s for n, s in result.stats.items() if not s.equal}
    assert set(result.stats) == set(tensors)


# --- byte identity and the Hub -----------------------------------------------------------------------------


def hf_cache_copy(root: Path, repo_id: str, folder: Path) -> Path:
    """Lay a folder out like the Hugging Face cache: blobs named by sha256, a snapshot of symlinks."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for file in folder.iterdir():
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copy(file, repo / "blobs" / digest)
        (snapshot / file.name).symlink_to(Path("../../blobs") / digest)
    return snapshot


def lying_cache_copy(root: Path, repo_id: str, folder: Path, named_as: Path) -> Path:
    """:func:`hf_cache_copy` of ``folder`` whose blobs carry the sha256 names of ``named_as``'s files (same file
    names): a snapshot edited in place, or a folder made to look like another's."""
    snapshot = hf_cache_copy(root, repo_id, folder)
    for link in snapshot.iterdir():
        claimed = hashlib.sha256((named_as / link.name).read_bytes()).hexdigest()
        blob = link.resolve()
        blob.rename(blob.parent / claimed)
        link.unlink()
        link.symlink_to(Path("../../blobs") / claimed)
    return snapshot


def test_files_with_the_same_hub_lfs_sha256_are_identical_without_reading(tmp_path: Path, hub_client) -> None:
    """Two Hub repos: the Hub's LFS metadata of each revision gives the same sha256, so nothing is read, and the
    finding says where the hash came from (data in its params, words from the formats)."""
    published, _ = fine_tuned_pair(tmp_path)
    hub_client.add_repo("org/drafter", published)
    hub_client.add_repo("org/drafter-copy", published)
    first, second = resolve("org/drafter"), resolve("org/drafter-copy")
    hub_client.reset_counters()

    result = values.compare_values(first, second, sorted(first.tensors))

    assert hub_client.total_requests == 0  # nothing downloaded, nothing read
    assert all(s.equal and s.method == "sha256" for s in result.stats.values())
    assert list(result.identical) == [("model.safetensors", "model.safetensors")]
    (identical,) = [f for f in values.value_findings(result) if f.code == "identical_file"]
    assert identical.params == {
        "file_a": "model.safetensors",
        "file_b": "model.safetensors",
        "sha256": hashlib.sha256((published / "model.safetensors").read_bytes()).hexdigest(),
        "hash_source": "hub_lfs",
        "revision_a": first.revision,
        "revision_b": second.revision,
    }
    text = VALUES["identical_file"](identical.params)
    assert text.startswith("model.safetensors: same sha256 ") and "the Hub's LFS metadata at " in text

    report = json.loads(render(compare_specs("org/drafter", "org/drafter-copy", values=True), "json"))
    (finding,) = [f for f in report["findings"] if f["code"] == "identical_file"]
    assert finding["params"]["hash_source"] == "hub_lfs" and finding["params"]["revision_a"] == first.revision
    assert "the Hub's LFS metadata at " in finding["message"]


@pytest.mark.parametrize("against", ["hub", "local"])
def test_a_file_named_like_a_blob_is_never_taken_as_that_hash(tmp_path: Path, hub_client, against: str) -> None:
    """#30 finding 4: a shard reached through a symlink named blobs/<sha256 of the published file> but holding
    the tuned bytes (a snapshot edited in place) was reported identical unread; now it is read, and it differs.
    Against the Hub repo itself and against a local folder laid out like the HF cache."""
    published, tuned = fine_tuned_pair(tmp_path)
    hub_client.add_repo("org/drafter", published)
    edited = lying_cache_copy(tmp_path / "edited", "org/drafter", tuned, named_as=published)
    if against == "hub":
        side = resolve("org/drafter")
    else:
        side = resolve(str(hf_cache_copy(tmp_path / "honest", "org/drafter", published)))

    result = values.compare_values(side, resolve(str(edited)), sorted(side.tensors))

    assert result.identical == {}
    assert all(s.method == "read" for s in result.stats.values())
    changed = sorted(name for name, s in result.stats.items() if not s.equal)
    assert changed == ["fc.weight", UP_PROJ]


def test_two_local_folders_with_the_same_bytes_are_read_and_equal(tmp_path: Path, hub_client) -> None:
    """No hash from a file name even when it is right: two cache-like folders of the same files are read."""
    published, _ = fine_tuned_pair(tmp_path)
    first = resolve(str(hf_cache_copy(tmp_path / "one", "org/drafter", published)))
    second = resolve(str(hf_cache_copy(tmp_path / "two", "org/drafter", published)))

    result = values.compare_values(first, second, sorted(first.tensors))

    assert result.identical == {}
    assert all(s.equal and s.method == "read" for s in result.stats.values())


def test_a_hub_file_edited_in_the_hf_cache_is_refused_not_taken_as_the_hubs(tmp_path: Path, hub_client) -> None:
    """The HF cache's copy of a Hub file is checked against the Hub's LFS sha256 before it stands for the Hub's
    bytes: edited in place after the download, it is refused in one line naming it, and left as it is."""
    published, tuned = fine_tuned_pair(tmp_path)
    hub_client.add_repo("org/drafter", published)
    hub_side = resolve("org/drafter")
    values.compare_values(hub_side, resolve(str(tuned)), sorted(hub_side.tensors))  # downloads into the HF cache
    from ckptdiff.sources import source_of

    cached = source_of(hub_side).local_path("model.safetensors")
    assert cached is not None
    data = bytearray(cached.read_bytes())
    data[-1] ^= 0xFF  # the last byte of the last tensor's data
    cached.write_bytes(bytes(data))

    with pytest.raises(CkptdiffError) as refused:
        values.compare_values(hub_side, resolve(str(tuned)), sorted(hub_side.tensors))

    assert refused.value.where == str(cached)
    assert "does not hold what the Hub lists for it" in refused.value.defect
    assert cached.read_bytes() == bytes(data)  # not replaced
    # Nor is it handed to Dask workers as the Hub's file: refused before the scheduler is reached.
    on_dask = values.ValuesOptions(scheduler="tcp://127.0.0.1:9")
    with pytest.raises(CkptdiffError) as refused:
        values.compare_values(hub_side, resolve(str(tuned)), sorted(hub_side.tensors), options=on_dask)
    assert refused.value.where == str(cached)


def test_a_hub_side_is_downloaded_only_under_values_and_announced(tmp_path: Path, hub_client) -> None:
    published, tuned = fine_tuned_pair(tmp_path)
    hub_client.add_repo("org/tuned", tuned)
    size = (tuned / "model.safetensors").stat().st_size
    notes: list[str] = []

    without = compare_specs(str(published), "org/tuned")
    downloaded_before = hub_client.bytes_sent["resolve"] + hub_client.bytes_sent["cdn"]
    report = compare_specs(str(published), "org/tuned", values=True, notify=notes.append)
    downloaded = hub_client.bytes_sent["resolve"] + hub_client.bytes_sent["cdn"] - downloaded_before

    assert all(row.values is None for row in without.tensors)
    assert downloaded_before < size  # headers only
    assert downloaded >= size
    assert len(notes) == 1 and "downloading 1 file(s) of B (org/tuned@" in notes[0]
    changed = [row.name for row in report.tensors if row.values is not None and not row.values.equal]
    assert changed == ["fc.weight", UP_PROJ]


# --- the embedding against the base -------------------------------------------------------------------


def drafter_with_embed(folder: Path, embed: np.ndarray, config: dict[str, object]) -> Path:
    hidden = config["hidden_size"]
    fc = randn(np.random.default_rng(9), hidden, 3 * hidden, dtype=BF16)
    norm = np.ones(hidden, dtype=BF16)
    save(folder, {"embed_tokens.weight": embed, "fc.weight": fc, "norm.weight": norm})
    write_config(folder, config)
    return folder


def test_values_with_a_base_check_each_sides_embedding(tmp_path: Path) -> None:
    config = small_drafter_config()
    vocab, hidden = config["vocab_size"], config["hidden_size"]
    embed = randn(np.random.default_rng(1), vocab, hidden, dtype=BF16)
    base = save(tmp_path / "base", {"model.embed_tokens.weight": embed, "lm_head.weight": embed.copy()})
    copied = drafter_with_embed(tmp_path / "copied", embed, config)
    random_embed = randn(np.random.default_rng(2), vocab, hidden, dtype=BF16)
    fresh = drafter_with_embed(tmp_path / "fresh", random_embed, config)

    report = compare_specs(str(copied), str(fresh), base=str(base), values=True)

    codes = {(f.code, f.severity): finding_message(report, f) for f in report.findings}
    assert (
        "A's embed_tokens.weight equals the base's model.embed_tokens.weight" in codes[("embed_matches_base", "info")]
    )
    assert "B's embed_tokens.weight differs" in codes[("embed_differs_from_base", "error")]
    assert report.verdict == "incompatible" and report.exit_code == 1


# --- memory -------------------------------------------------------------------------------------------


def write_big(path: Path, rows: int, cols: int, seed: int | None) -> None:
    """A bf16 safetensors file of rows × cols: a 16 MiB random block repeated, or all zeros (sparse) for None."""
    prefix, length = header_bytes([("w", "BF16", [rows, cols])])
    with open(path, "wb") as handle:
        handle.write(prefix)
        if seed is None:
            handle.truncate(len(prefix) + length)
            return
        block = randn(np.random.default_rng(seed), 8 * 2**20, dtype=BF16).tobytes()
        left = length
        while left:
            handle.write(block[: min(left, len(block))])
            left -= min(left, len(block))


#: Runs the CLI in a fresh interpreter and prints its own peak RSS (VmHWM, KiB) once the modules --values uses
#: are imported and its kernel loaded, then again at the end: the growth is
#: what the --values pass itself held at its peak.
PEAK_RSS = """
import sys
import numpy, ckptdiff.cli, ckptdiff.values, ckptdiff.comparison, ckptdiff.sources.local
from ckptdiff.values.dtypes import VALUE_TYPES
from ckptdiff.values.fused import FusedChunks
bf16, chunk = VALUE_TYPES["BF16"], bytearray(4)
FusedChunks().sums(bf16, chunk, bf16, chunk, False)
def peak():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
before = peak()
try:
    ckptdiff.cli.main(sys.argv[1:])
finally:
    print(before, peak(), file=sys.stderr)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_peak_memory_stays_near_a_chunk_not_the_files(tmp_path: Path) -> None:
    """Two 256 MiB files: the --values pass adds far less than one file to the process's peak RSS."""
    write_big(tmp_path / "a.safetensors", 8192, 16384, seed=1)
    write_big(tmp_path / "b.safetensors", 8192, 16384, seed=None)  # differs everywhere: the full statistics path
    files = [str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")]

    command = [sys.executable, "-c", PEAK_RSS, *files, "--values", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)

    assert done.returncode == 0, done.stderr
    before, after = (int(kib) // 1024 for kib in done.stderr.split()[-2:])
    row = json.loads(done.stdout)["tensors"][0]
    assert row["values"]["rel_l2"] == pytest.approx(1.0)  # b is all zeros: ‖b−a‖ = ‖a‖
    assert (tmp_path / "a.safetensors").stat().st_size // 2**20 == 256
    assert after - before < 48, (before, after)  # measured ≈ 10 MiB: raw and float32 chunks per thread and side
