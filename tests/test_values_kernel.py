"""The fused --values kernel (C) against numpy in float64 on the widened data: every dtype, every awkward kind of
data; its own reads (pread) against chunks read by the caller; the numpy pass against it end to end."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from ckptdiff.sources import resolve  # noqa: E402
from ckptdiff.values import scheduling  # noqa: E402
from ckptdiff.values.compare import compare_values  # noqa: E402
from ckptdiff.values.dtypes import VALUE_TYPES  # noqa: E402
from ckptdiff.values.fused import FusedChunks, c_kernel  # noqa: E402
from ckptdiff.values.statistics import SameChunk  # noqa: E402
from fixtures.generate import header_bytes  # noqa: E402

#: The fused kernel, tested where it was built (CI builds it).
KERNELS = [pytest.param("c", marks=pytest.mark.skipif(c_kernel() is None, reason="the C extension is not built"))]

#: The issue's bar: every statistic within this of the float64 reference, relative to its scale.
TOLERANCE = 1e-6

FLOATS = ["BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2"]
INTEGERS = ["I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL"]
#: Elements in a block of the kernel (_fused.c's BLOCK).
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


def scaled_reference(x: np.ndarray, y: np.ndarray, scales: tuple[int, int, int]) -> dict[str, float]:
    """:func:`reference` at the kernel's scales (F64 at its extremes, subnormal values here): the sums of b − a
    of both sides times 2^-d, Σa², Σb², Σab of each side times its own (:class:`Sums`)."""
    scale_d, scale_a, scale_b = scales
    of_d = reference(np.ldexp(x, -scale_d), np.ldexp(y, -scale_d))
    of_sides = reference(np.ldexp(x, -scale_a), np.ldexp(y, -scale_b))
    return {**of_sides, **{key: of_d[key] for key in ("dd", "abs", "max")}}


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
    result = FusedChunks().sums(kind, raw_a, kind, raw_b, same=False)
    want = scaled_reference(widened(dtype, raw_a), widened(dtype, raw_b), result.scales)
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
    result = FusedChunks().sums(kind, raw_a, kind, raw_b, same=False)
    assert_close(result.sums, result.nonfinite, reference(widened(dtype, raw_a), widened(dtype, raw_b)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_whole_chunk_of_bf16_matches_float64(kernel: str) -> None:
    """A full 1 Mi-element chunk: 2048 blocks folded in float64."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(scheduling.CHUNK_ELEMENTS)
    raw_a, raw_b = stored("BF16", a), stored("BF16", a * 1.01 + 1e-3)
    kind = VALUE_TYPES["BF16"]
    result = FusedChunks().sums(kind, raw_a, kind, raw_b, same=False)
    assert_close(result.sums, result.nonfinite, reference(widened("BF16", raw_a), widened("BF16", raw_b)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_dtype_change_with_the_same_numbers_is_equal(kernel: str) -> None:
    values = np.random.default_rng(4).standard_normal(COUNT)
    raw_a = stored("BF16", values)
    raw_b = bytearray(widened("BF16", raw_a).astype(np.float32).tobytes())
    result = FusedChunks().sums(VALUE_TYPES["BF16"], raw_a, VALUE_TYPES["F32"], raw_b, same=False)
    assert result.equal and result.sums[0] == 0.0


@pytest.mark.skipif(c_kernel() is None, reason="the C extension is not built")
def test_the_kernel_codes_are_the_dtypes_codes() -> None:
    """dtypes.py numbers the decodings as _fused.c's enum does."""
    compiled = c_kernel()
    by_name = {"F32": "F32", "BF16": "BF16", "F16": "TABLE16", "F64": "F64", "I8": "I8", "U8": "U8", "I64": "I64"}
    by_name |= {"U64": "U64", "F8_E4M3": "TABLE8", "I16": "I16", "U16": "U16", "I32": "I32", "U32": "U32"}
    for name, code in by_name.items():
        assert VALUE_TYPES[name].code == getattr(compiled, code), name
    assert compiled.BLOCK == BLOCK


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
    """End to end through compare_values: the fused (C) and numpy kernels agree (to 1e-5: the numpy path
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
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, kernel)
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
    assert scheduling.choose_kernel() == "c"
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "numpy")
    assert scheduling.choose_kernel() == "numpy"


def test_without_the_c_kernel_the_pass_says_so_once_and_uses_numpy(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ckptdiff.values._fused", None)  # as where the extension was not built
    assert c_kernel() is None
    monkeypatch.setenv(scheduling.KERNEL_VARIABLE, "c")  # asked for, not there: as if unset
    notes: list[str] = []
    assert scheduling.choose_kernel(notes.append) == "numpy"
    assert notes == ["--values: the C kernel was not built at install; using the slower numpy statistics"]


def read_by_the_kernel(tmp_path: Path, kinds: tuple[str, str], raws: tuple[bytearray, bytearray], count: int):
    """FusedChunks.read on the two chunks written at unaligned offsets into two files, into oversized buffers."""
    offsets = (13, 4096 + 8)
    for path, raw, offset in ((tmp_path / "a", raws[0], offsets[0]), (tmp_path / "b", raws[1], offsets[1])):
        path.write_bytes(bytes(offset) + bytes(raw) + b"tail")
    kind_a, kind_b = VALUE_TYPES[kinds[0]], VALUE_TYPES[kinds[1]]
    buffers = bytearray(len(raws[0]) + 7), bytearray(len(raws[1]) + 7)
    with open(tmp_path / "a", "rb") as file_a, open(tmp_path / "b", "rb") as file_b:
        place_a = file_a.fileno(), offsets[0], buffers[0]
        return FusedChunks().read(kind_a, place_a, kind_b, (file_b.fileno(), offsets[1], buffers[1]), count)


@pytest.mark.skipif(not hasattr(c_kernel(), "read_chunk"), reason="the C kernel's own reads (POSIX)")
@pytest.mark.parametrize(
    "case", ["random", "nan-inf", "subnormal", "equal", "equal-with-nan", "late-change", "f32-vs-bf16", "long"]
)
def test_the_c_kernel_reading_the_files_itself_gives_the_same_bits(tmp_path: Path, case: str) -> None:
    """read(): a chunk read with pread at an offset, compared piece by piece as it arrives. The same sums, bit for
    bit, as from the bytes in memory; equal finite chunks stop at the comparison."""
    dtype_a, dtype_b = ("BF16", "F32") if case == "f32-vs-bf16" else ("BF16", "BF16")
    count = 3 * PIECE_ELEMENTS + 77 if case in ("late-change", "long") else COUNT
    rng = np.random.default_rng(12)
    generated = case if case in ("random", "nan-inf", "subnormal") else "random"
    a, b = data(generated, "BF16", seed=12)
    if case in ("late-change", "long"):
        a = rng.standard_normal(count)
        b = a.copy()
        if case == "late-change":
            b[2 * PIECE_ELEMENTS + 5] += 1.0  # the third piece
    if case.startswith("equal"):
        b = a.copy()
        if case == "equal-with-nan":
            a[100] = b[100] = np.nan
    raw_a, raw_b = stored(dtype_a, a), stored(dtype_b, b)
    if case == "f32-vs-bf16":
        raw_b = bytearray(widened("BF16", raw_a).astype(np.float32).tobytes())
    got = read_by_the_kernel(tmp_path, (dtype_a, dtype_b), (raw_a, raw_b), count)
    fused = FusedChunks()
    kind_a, kind_b = VALUE_TYPES[dtype_a], VALUE_TYPES[dtype_b]
    assert fused.compared(kind_a, raw_a, kind_b, raw_b) == got
    if case in ("equal", "long"):
        assert got == SameChunk(count, True)
    else:
        assert got == fused.sums(kind_a, raw_a, kind_b, raw_b, raw_a == raw_b)
        assert got.equal is (case in ("equal-with-nan", "f32-vs-bf16"))


#: Bytes the C kernel compares at a time while reading (_fused.c's PIECE_BYTES), as bf16 elements.
PIECE_ELEMENTS = 64 * 1024 // 2


@pytest.mark.skipif(not hasattr(c_kernel(), "read_chunk"), reason="the C kernel's own reads (POSIX)")
def test_a_file_shorter_than_its_chunk_is_a_short_read_named_by_side(tmp_path: Path) -> None:
    """A file cut after its header was read: the kernel's pread comes back short, and says which side and where
    the file ended (no memory map: nothing can fault)."""
    from ckptdiff.values.fused import FileEnded

    kind = VALUE_TYPES["BF16"]
    (tmp_path / "a").write_bytes(bytes(2 * COUNT))
    (tmp_path / "b").write_bytes(bytes(2 * COUNT - 1))
    with open(tmp_path / "a", "rb") as file_a, open(tmp_path / "b", "rb") as file_b:
        with pytest.raises(FileEnded) as ended:
            place_a, place_b = (file_a.fileno(), 0, bytearray(2 * COUNT)), (file_b.fileno(), 0, bytearray(2 * COUNT))
            FusedChunks().read(kind, place_a, kind, place_b, COUNT)
    assert (ended.value.side, ended.value.reached) == (1, 2 * COUNT - 1)


@pytest.mark.parametrize("kernel", ["c", "numpy"])
def test_a_file_cut_during_the_pass_is_one_line_naming_it(tmp_path: Path, kernel: str) -> None:
    """Cut after the pass looked at its size: the next chunk's read is short, and the error names the file."""
    from ckptdiff.errors import SourceError
    from ckptdiff.values.readers import Side

    if kernel == "c" and c_kernel() is None:
        pytest.skip("the C extension is not built")
    raw = stored("BF16", np.random.default_rng(9).standard_normal(2 * scheduling.CHUNK_ELEMENTS))
    first = resolve(str(write_pair(tmp_path / "a", {"w": ("BF16", raw)})))
    second = resolve(str(write_pair(tmp_path / "b", {"w": ("BF16", raw)})))
    sides = [Side("A", first, {"model.safetensors": tmp_path / "a" / "model.safetensors"})]
    sides.append(Side("B", second, {"model.safetensors": tmp_path / "b" / "model.safetensors"}))
    pair = scheduling.Pair(0, first.tensors["w"], 1, second.tensors["w"])
    worker = scheduling.Worker(sides, kernel)
    worker.chunk(pair, 0, scheduling.CHUNK_ELEMENTS)  # the files' sizes are known now
    os.truncate(tmp_path / "b" / "model.safetensors", len(raw) // 2)
    with pytest.raises(SourceError) as cut:
        worker.chunk(pair, scheduling.CHUNK_ELEMENTS, scheduling.CHUNK_ELEMENTS)
    assert str(tmp_path / "b" / "model.safetensors") in cut.value.where
    assert "file ends at byte" in cut.value.defect
    for side in sides:
        side.close()


@pytest.mark.parametrize("kernel", KERNELS)
def test_chunks_equal_in_some_pieces_only_report_what_the_numpy_pass_does(tmp_path: Path, monkeypatch, kernel) -> None:
    """The C kernel compares a chunk in pieces as it reads them: a change in a later piece, equal pieces holding
    NaN, an equal tensor and an all-zero one give the same statistics as the numpy pass (whole chunks)."""
    rng = np.random.default_rng(8)
    per_piece = PIECE_ELEMENTS
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
