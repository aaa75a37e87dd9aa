"""The fused --values kernels (C and numba) against numpy in float64 on the widened data: every dtype, every awkward
kind of data; and against each other."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from importlib.util import find_spec  # noqa: E402

from ckptdiff.sources import resolve  # noqa: E402
from ckptdiff.values import scheduling  # noqa: E402
from ckptdiff.values.compare import compare_values  # noqa: E402
from ckptdiff.values.dtypes import VALUE_TYPES  # noqa: E402
from ckptdiff.values.fused import FusedChunks, c_kernel  # noqa: E402
from ckptdiff.values.statistics import SameChunk  # noqa: E402
from fixtures.generate import header_bytes  # noqa: E402

#: The kernels of the fused pass, each tested where it is there (CI builds the C one and installs numba).
KERNELS = [
    pytest.param("c", marks=pytest.mark.skipif(c_kernel() is None, reason="the C extension is not built")),
    pytest.param("numba", marks=pytest.mark.skipif(find_spec("numba") is None, reason="numba is not installed")),
]

#: The issue's bar: every statistic within this of the float64 reference, relative to its scale.
TOLERANCE = 1e-6

FLOATS = ["BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2"]
INTEGERS = ["I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL"]
#: Elements in a block of either kernel (kernels.BLOCK, _fused.c's BLOCK).
BLOCK = 512
#: More elements than a block, not a multiple of it: the last block is padded.
COUNT = 5 * BLOCK + 77


def numpy_type(dtype: str) -> np.dtype:
    return VALUE_TYPES[dtype].numpy


def stored(dtype: str, values: np.ndarray) -> bytearray:
    """``values`` (float64) rounded to ``dtype`` and stored as its bytes, as a safetensors file holds them."""
    if dtype == "BOOL":
        return bytearray((values != 0).astype("?").tobytes())
    kind = numpy_type(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        values = np.clip(np.nan_to_num(values), info.min, info.max)
    return bytearray(values.astype(kind).tobytes())


def widened(dtype: str, raw: bytearray) -> np.ndarray:
    """The reference's input: the stored values as float64 (ml_dtypes and numpy casts)."""
    return np.frombuffer(raw, numpy_type(dtype)).astype(np.float64)


def reference(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = x[finite], y[finite]
    d = y - x
    return {
        "dd": float(d @ d),
        "abs": float(np.abs(d).sum()),
        "max": float(np.abs(d).max()) if d.size else 0.0,
        "ab": float(x @ y),
        "aa": float(x @ x),
        "bb": float(y @ y),
        "skipped": int((~finite).sum()),
    }


def data(case: str, dtype: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two float64 arrays of COUNT values for ``case`` (before rounding to ``dtype``)."""
    rng = np.random.default_rng(seed)
    if case == "random":
        a = rng.standard_normal(COUNT) * 3
        b = a + rng.standard_normal(COUNT) * 0.05
    elif case == "unrelated":
        a, b = rng.standard_normal(COUNT), rng.standard_normal(COUNT)
    elif case == "constant":
        a, b = np.full(COUNT, 0.3), np.full(COUNT, 0.7)
    elif case == "nan-inf":
        a, b = rng.standard_normal(COUNT), rng.standard_normal(COUNT)
        a[[3, 600, 2000]] = [np.nan, np.inf, -np.inf]
        b[[5, 600, 2500]] = [np.inf, np.nan, np.nan]
    elif case == "subnormal":
        tiny = float(ml_dtypes.finfo(numpy_type(dtype)).smallest_subnormal)
        a = rng.integers(-3, 4, COUNT) * tiny
        b = rng.integers(-3, 4, COUNT) * tiny
    elif case == "signed-zero":
        a = np.where(rng.random(COUNT) < 0.5, 0.0, -0.0)
        b = np.where(rng.random(COUNT) < 0.5, -0.0, 0.0)
        b[::7] = rng.standard_normal(b[::7].size)
    else:
        raise AssertionError(case)
    return a, b


def assert_close(got: tuple[float, ...], skipped: int, want: dict[str, float]) -> None:
    dd, abs_sum, largest, ab, aa, bb = got
    assert skipped == want["skipped"]
    for name, value in (("dd", dd), ("abs", abs_sum), ("max", largest), ("aa", aa), ("bb", bb)):
        assert value == pytest.approx(want[name], rel=TOLERANCE, abs=0.0), name
    # Σab may cancel to ~0: its error is measured against ‖a‖‖b‖, the scale the cosine divides by.
    assert abs(ab - want["ab"]) <= TOLERANCE * math.sqrt(want["aa"] * want["bb"]), "ab"


CASES = ["random", "unrelated", "constant", "nan-inf", "subnormal", "signed-zero"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_sums_match_float64_numpy(dtype: str, case: str, kernel: str) -> None:
    if case == "nan-inf" and dtype == "F8_E4M3":
        pytest.skip("F8_E4M3 (fn) has no infinities: ml_dtypes rounds them to NaN, covered by F8_E5M2")
    a, b = data(case, dtype)
    raw_a, raw_b = stored(dtype, a), stored(dtype, b)
    kind = VALUE_TYPES[dtype]
    result = FusedChunks(kernel).sums(kind, raw_a, kind, raw_b, same=False)
    want = reference(widened(dtype, raw_a), widened(dtype, raw_b))
    assert result.count == COUNT - want["skipped"]
    assert_close(result.sums, result.nonfinite, want)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", ["random", "constant", "signed-zero"])
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_sums_match_float64_numpy(dtype: str, case: str, kernel: str) -> None:
    a, b = data(case, dtype)
    a, b = np.round(a * 40), np.round(b * 40)
    raw_a, raw_b = stored(dtype, a), stored(dtype, b)
    kind = VALUE_TYPES[dtype]
    result = FusedChunks(kernel).sums(kind, raw_a, kind, raw_b, same=False)
    assert_close(result.sums, result.nonfinite, reference(widened(dtype, raw_a), widened(dtype, raw_b)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_whole_chunk_of_bf16_matches_float64(kernel: str) -> None:
    """A full 1 Mi-element chunk: 2048 blocks folded in float64."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(scheduling.CHUNK_ELEMENTS)
    raw_a, raw_b = stored("BF16", a), stored("BF16", a * 1.01 + 1e-3)
    kind = VALUE_TYPES["BF16"]
    result = FusedChunks(kernel).sums(kind, raw_a, kind, raw_b, same=False)
    assert_close(result.sums, result.nonfinite, reference(widened("BF16", raw_a), widened("BF16", raw_b)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_dtype_change_with_the_same_numbers_is_equal(kernel: str) -> None:
    values = np.random.default_rng(4).standard_normal(COUNT)
    raw_a = stored("BF16", values)
    raw_b = bytearray(widened("BF16", raw_a).astype(np.float32).tobytes())
    result = FusedChunks(kernel).sums(VALUE_TYPES["BF16"], raw_a, VALUE_TYPES["F32"], raw_b, same=False)
    assert result.equal and result.sums[0] == 0.0


def test_the_kernel_codes_are_the_dtypes_codes() -> None:
    """dtypes.py (no numba) numbers the decodings as kernels.py (numba) does; _fused.c has the same enum."""
    kernels = pytest.importorskip("ckptdiff.values.kernels")
    by_name = {"F32": kernels.F32, "BF16": kernels.BF16, "F16": kernels.TABLE16, "F64": kernels.F64}
    by_name |= {"I8": kernels.I8, "U8": kernels.U8, "BOOL": kernels.U8, "I64": kernels.I64, "U64": kernels.U64}
    by_name |= {"F8_E4M3": kernels.TABLE8, "I16": kernels.I16, "U16": kernels.U16, "I32": kernels.I32}
    by_name |= {"U32": kernels.U32}
    for name, code in by_name.items():
        assert VALUE_TYPES[name].code == code, name
    compiled = c_kernel()
    if compiled is not None:
        for code_name in ("F32", "BF16", "TABLE16", "TABLE8", "F64", "I8", "U8", "I16", "U16", "I32", "U32", "I64"):
            assert getattr(compiled, code_name) == getattr(kernels, code_name), code_name
        assert compiled.U64 == kernels.U64 and compiled.BLOCK == kernels.BLOCK == BLOCK


def write_pair(folder: Path, tensors: dict[str, tuple[str, bytearray]]) -> Path:
    """A safetensors file of raw tensors (name → dtype, bytes), 1-D."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = [(name, dtype, [len(raw) // VALUE_TYPES[dtype].itemsize]) for name, (dtype, raw) in tensors.items()]
    prefix, _ = header_bytes(spec, {"format": "pt"})
    with open(folder / "model.safetensors", "wb") as handle:
        handle.write(prefix)
        for _, raw in tensors.values():
            handle.write(raw)
    return folder


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_fused_pass_and_the_numpy_pass_report_the_same_statistics(tmp_path: Path, monkeypatch, kernel) -> None:
    """End to end through compare_values: the fused (C or numba) and numpy kernels agree (to 1e-5: the numpy path
    sums in float32, rounding F64 values first; the fused kernel is the accurate one, checked above)."""
    rng = np.random.default_rng(5)
    a_side, b_side = {}, {}
    for dtype in ("BF16", "F16", "F32", "F64", "I64"):
        a = rng.standard_normal(3 * scheduling.NUMPY_CHUNK_ELEMENTS // 2) * 2
        b = a + rng.standard_normal(a.size) * 0.01
        if dtype == "I64":
            a, b = np.round(a * 100), np.round(b * 100)
        a_side[dtype.lower()] = (dtype, stored(dtype, a))
        b_side[dtype.lower()] = (dtype, stored(dtype, b))
    a = resolve(str(write_pair(tmp_path / "a", a_side)))
    b = resolve(str(write_pair(tmp_path / "b", b_side)))
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, kernel)  # without the C kernel a small pass would take numpy
    fused = compare_values(a, b, list(a_side)).stats
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numpy")
    numpy_stats = compare_values(a, b, list(a_side)).stats
    for name in a_side:
        for field in ("max_abs", "mean_abs", "rel_l2", "cosine"):
            got, want = getattr(fused[name], field), getattr(numpy_stats[name], field)
            assert got == pytest.approx(want, rel=1e-5), (name, field)


@pytest.mark.skipif(c_kernel() is None, reason="the C extension is not built")
def test_the_c_kernel_is_chosen_wherever_it_was_built(monkeypatch) -> None:
    monkeypatch.delenv(scheduling.KERNEL_VARIABLE, raising=False)
    assert scheduling.choose_kernel(10) == scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES) == "c"
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numba")
    assert scheduling.choose_kernel(10) == "numba"
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numpy")
    assert scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES) == "numpy"


def without_the_c_kernel(monkeypatch) -> None:
    """As where the extension was not built (no C compiler at install)."""
    import sys

    monkeypatch.setitem(sys.modules, "ckptdiff.values._fused", None)
    assert c_kernel() is None


def test_without_the_c_kernel_small_passes_take_numpy_and_large_ones_numba(monkeypatch) -> None:
    without_the_c_kernel(monkeypatch)
    monkeypatch.delenv(scheduling.KERNEL_VARIABLE, raising=False)
    assert scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES - 1) == "numpy"
    assert scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES) == "numba"
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "c")  # asked for, not there: as if unset
    assert scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES) == "numba"
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numba")
    assert scheduling.choose_kernel(10) == "numba"
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numpy")
    assert scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES) == "numpy"


def test_without_the_c_kernel_nor_numba_the_pass_says_so_once_and_uses_numpy(monkeypatch) -> None:
    import sys

    without_the_c_kernel(monkeypatch)
    monkeypatch.delenv(scheduling.KERNEL_VARIABLE, raising=False)
    monkeypatch.setitem(sys.modules, "numba", None)  # as if numba were not installed
    notes: list[str] = []
    assert scheduling.choose_kernel(scheduling.NUMBA_MIN_BYTES, notes.append) == "numpy"
    assert notes == ["--values: numba is not installed; using the slower numpy statistics"]


@pytest.mark.skipif(c_kernel() is None or find_spec("numba") is None, reason="needs both kernels")
@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32", "F64", "F8_E5M2", "I32"])
@pytest.mark.parametrize("case", CASES)
def test_the_c_and_numba_kernels_agree(dtype: str, case: str) -> None:
    """Exactly on what is not a sum (counts, max |b−a|, equality), and within the bar on the sums, which they add
    in a different order (lanes in C, pairwise halving in numba)."""
    if case in ("nan-inf", "subnormal") and dtype == "I32":
        pytest.skip("no infinities nor subnormal values in an integer type")
    a, b = data(case, dtype, seed=11)
    if dtype == "I32":
        a, b = np.round(a * 40), np.round(b * 40)
    raw_a, raw_b = stored(dtype, a), stored(dtype, b)
    kind = VALUE_TYPES[dtype]
    c, numba = (
        FusedChunks("c").sums(kind, raw_a, kind, raw_b, False),
        FusedChunks("numba").sums(kind, raw_a, kind, raw_b, False),
    )
    assert (c.equal, c.count, c.nonfinite, c.sums[2]) == (numba.equal, numba.count, numba.nonfinite, numba.sums[2])
    dd, abs_sum, _, ab, aa, bb = numba.sums
    for got, want in zip(c.sums[:2] + c.sums[4:], (dd, abs_sum, aa, bb), strict=True):
        assert got == pytest.approx(want, rel=TOLERANCE, abs=0.0)
    assert abs(c.sums[3] - ab) <= TOLERANCE * math.sqrt(aa * bb)  # Σab may cancel: measured against ‖a‖‖b‖


@pytest.mark.skipif(not hasattr(c_kernel(), "mapped_chunk"), reason="the C kernel's memory-mapped reads (POSIX)")
@pytest.mark.parametrize("case", ["random", "nan-inf", "subnormal", "equal", "equal-with-nan", "f32-vs-bf16"])
def test_the_c_kernel_reading_the_files_itself_gives_the_same_bits(tmp_path: Path, case: str) -> None:
    """mapped(): a chunk read from the files at an offset (not page-aligned) through a memory map, compared first.
    The same sums, bit for bit, as from the bytes in memory; equal finite chunks stop at the comparison."""
    dtype_a, dtype_b = ("BF16", "F32") if case == "f32-vs-bf16" else ("BF16", "BF16")
    a, b = data("random" if case.startswith(("equal", "f32")) else case, "BF16", seed=12)
    if case.startswith("equal"):
        b = a.copy()
        if case == "equal-with-nan":
            a[100] = b[100] = np.nan
    raw_a, raw_b = stored(dtype_a, a), stored(dtype_b, b)
    if case == "f32-vs-bf16":
        raw_b = bytearray(widened("BF16", raw_a).astype(np.float32).tobytes())
    kind_a, kind_b = VALUE_TYPES[dtype_a], VALUE_TYPES[dtype_b]
    offsets = (13, 4096 + 8)
    for path, raw, offset in ((tmp_path / "a", raw_a, offsets[0]), (tmp_path / "b", raw_b, offsets[1])):
        path.write_bytes(bytes(offset) + bytes(raw))
    fused = FusedChunks("c")
    with open(tmp_path / "a", "rb") as file_a, open(tmp_path / "b", "rb") as file_b:
        got = fused.mapped(kind_a, file_a.fileno(), offsets[0], kind_b, file_b.fileno(), offsets[1], COUNT)
    assert fused.compared(kind_a, raw_a, kind_b, raw_b) == got  # small chunks are read, then compared alike
    same = raw_a == raw_b
    want = fused.sums(kind_a, raw_a, kind_b, raw_b, same)
    if case == "equal":
        assert got == SameChunk(COUNT, True)
    else:
        assert got == want
        assert got.equal is (case != "random" and case != "nan-inf" and case != "subnormal")


@pytest.mark.skipif(not hasattr(c_kernel(), "mapped_chunk"), reason="the C kernel's memory-mapped reads (POSIX)")
def test_a_file_cut_shorter_than_the_range_is_refused_not_mapped(tmp_path: Path) -> None:
    """A mapped page past a file's end would kill the process (SIGBUS): a range the file no longer holds (cut
    after its header was read) raises OSError, after which the pass reads the file and names its defect."""
    kind = VALUE_TYPES["BF16"]
    (tmp_path / "a").write_bytes(bytes(2 * COUNT))
    (tmp_path / "b").write_bytes(bytes(2 * COUNT - 1))
    fused = FusedChunks("c")
    with open(tmp_path / "a", "rb") as file_a, open(tmp_path / "b", "rb") as file_b:
        with pytest.raises(OSError):
            fused.mapped(kind, file_a.fileno(), 0, kind, file_b.fileno(), 0, COUNT)


#: Cuts file B to nothing while a thread reads it through mapped chunks, ``rounds`` times at staggered moments;
#: prints how each round ended. A page of a mapping past the file's end raises SIGBUS, which would end it.
CUT_WHILE_MAPPED = """
import collections, errno, os, sys, threading, time
from ckptdiff.values.dtypes import VALUE_TYPES
from ckptdiff.values.fused import FusedChunks

folder, rounds = sys.argv[1], int(sys.argv[2])
kind, count, chunks = VALUE_TYPES["BF16"], 1 << 20, 64
fused, ends = FusedChunks("c"), collections.Counter()
paths = [os.path.join(folder, side) for side in "ab"]
for round in range(rounds):
    for path in paths:
        os.truncate(os.open(path, os.O_CREAT | os.O_WRONLY), 2 * count * chunks)  # sparse: zeros, no disk
    with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
        reading = threading.Event()
        def read_every_chunk():
            try:
                for offset in range(0, 2 * count * chunks, 2 * count):
                    fused.mapped(kind, a.fileno(), offset, kind, b.fileno(), offset, count)
                    reading.set()
                ends["read"] += 1
            except OSError as err:
                ends[errno.errorcode[err.errno]] += 1
            reading.set()
        reader = threading.Thread(target=read_every_chunk)
        reader.start()
        reading.wait()  # a chunk was read: the reader is in its loop, almost all of it spent in mapped reads
        time.sleep(round % 4 * 0.0002)
        os.truncate(paths[1], 0)
        reader.join()
print(dict(ends))
"""


@pytest.mark.skipif(not hasattr(c_kernel(), "mapped_chunk"), reason="the C kernel's memory-mapped reads (POSIX)")
def test_a_file_cut_while_its_chunk_is_mapped_fails_the_read_not_the_process(tmp_path: Path) -> None:
    """A file cut after its range was checked but while the kernel reads the mapping: the read fails with EIO
    (the pass then reads the file and names its defect), and no bus error ends the process."""
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", CUT_WHILE_MAPPED, str(tmp_path), "40"],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert ran.returncode == 0, ran.stderr  # -7 (SIGBUS) without the kernel's guard
    ends = json.loads(ran.stdout.replace("'", '"'))
    assert sum(ends.values()) == 40 and set(ends) <= {"read", "EIO", "EINVAL"}
    assert ends.get("EIO", 0) > 0  # the cut landed inside a mapped read at least once


def test_byte_copies_never_load_numba(tmp_path: Path) -> None:
    """A pass where every chunk is a byte copy stops at memcmp and numpy: numba's ~0.5 s import is not paid."""
    import subprocess
    import sys

    raw = stored("BF16", np.random.default_rng(6).standard_normal(COUNT))
    a = write_pair(tmp_path / "a", {"w": ("BF16", raw)})
    b = write_pair(tmp_path / "b", {"w": ("BF16", raw)})
    script = (
        "import sys; from ckptdiff.cli import main\n"
        "try: main(sys.argv[1:])\n"
        "finally: print('numba' in sys.modules, file=sys.stderr)"
    )
    env = {**os.environ, scheduling.KERNEL_VARIABLE: "numba"}
    command = [sys.executable, "-c", script, str(a), str(b), "--values", "-q", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=Path(__file__).parent.parent)
    assert done.stderr.split()[-1] == "False", done.stderr
    assert json.loads(done.stdout)["tensors"][0]["values"]["equal"] is True


@pytest.mark.parametrize("kernel", KERNELS)
def test_chunks_equal_in_some_pieces_only_report_what_the_numpy_pass_does(tmp_path: Path, monkeypatch, kernel) -> None:
    """The fused path compares a chunk in pieces: a change in a later piece, equal pieces holding NaN, an equal
    tensor and an all-zero one give the same statistics as the numpy pass (which compares whole chunks)."""
    rng = np.random.default_rng(8)
    per_piece = scheduling.EQUAL_PIECE_BYTES // 2  # bf16 elements
    a = rng.standard_normal(3 * scheduling.CHUNK_ELEMENTS // 2).astype(np.float32)
    b = a.copy()
    b[2 * per_piece + 5] += 1.0  # the third piece of the first chunk
    a[scheduling.CHUNK_ELEMENTS + per_piece + 1] = b[scheduling.CHUNK_ELEMENTS + per_piece + 1] = np.nan
    zeros = np.zeros(per_piece + 3, np.float32)
    a_side = {
        "changed": ("BF16", stored("BF16", a)),
        "same": ("BF16", stored("BF16", a[:-7])),
        "zeros": ("BF16", stored("BF16", zeros)),
    }
    b_side = {
        "changed": ("BF16", stored("BF16", b)),
        "same": ("BF16", stored("BF16", a[:-7])),
        "zeros": ("BF16", stored("BF16", zeros)),
    }
    first = resolve(str(write_pair(tmp_path / "a", a_side)))
    second = resolve(str(write_pair(tmp_path / "b", b_side)))
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, kernel)
    fused = compare_values(first, second, list(a_side)).stats
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numpy")
    numpy_stats = compare_values(first, second, list(a_side)).stats
    assert not fused["changed"].equal and fused["same"].equal and fused["zeros"].equal
    assert fused["zeros"].cosine is None and fused["same"].cosine == pytest.approx(1.0)
    for name in a_side:
        assert fused[name].equal == numpy_stats[name].equal, name
        assert fused[name].note == numpy_stats[name].note, name
        for field in ("max_abs", "mean_abs", "rel_l2", "cosine"):
            got, want = getattr(fused[name], field), getattr(numpy_stats[name], field)
            assert got == (None if want is None else pytest.approx(want, rel=1e-5)), (name, field)


def test_the_cores_free_count_the_tasks_running_now_besides_this_one() -> None:
    """/proc/loadavg's fourth field, "running/total", counts the process reading it."""
    assert scheduling.tasks_running_now("0.50 0.40 0.30 3/250 12345\n") == 2
    assert scheduling.tasks_running_now("0.50 0.40 0.30 1/250 12345\n") == 0
    assert scheduling.tasks_running_now("garbage") is None
    assert 1 <= scheduling.free_cores() <= scheduling.cores()


def test_a_pass_takes_the_cores_no_other_task_holds() -> None:
    """The busy cores are the smaller of the minute's load average and the tasks running now, averaged over a
    few readings: a machine whose last minute was busy but that runs nothing else now gives every core."""
    cores = scheduling.cores()
    assert scheduling.cores_free_of(load=3.0, running=0.0) == cores
    assert scheduling.cores_free_of(load=3.0, running=0.25) == cores  # another task in one reading of four
    assert scheduling.cores_free_of(load=3.0, running=float(cores)) == 1  # every core held: one thread, not more
    assert scheduling.cores_free_of(load=0.0, running=5.0) == cores  # a quiet minute: a burst now is not counted
    assert scheduling.cores_free_of(load=1.0, running=None) == max(1, cores - 1)  # no /proc/loadavg: the load alone
    average = scheduling.tasks_running_on_average(samples=3, pause=0.0)
    assert average is None or average >= 0
