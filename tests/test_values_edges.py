"""--values' numbers at the edges, for every kernel (the C one and numpy): float64's extremes (squares that overflow
or underflow), subnormal values, 64-bit integers beyond 2^53, BOOL, and a byte count that would wrap size_t.
Property tests (hypothesis) against exact rational arithmetic (fractions), and the CLI's JSON end to end."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

np = pytest.importorskip("numpy")
pytest.importorskip("ml_dtypes")

from ckptdiff.values.dtypes import VALUE_TYPES  # noqa: E402
from ckptdiff.values.fused import FusedChunks, c_kernel  # noqa: E402
from ckptdiff.values.numpy_chunks import NumpyChunks  # noqa: E402
from ckptdiff.values.statistics import Accumulator, SameChunk, ValueStats  # noqa: E402
from fixtures.generate import header_bytes  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
KERNELS = [
    pytest.param("c", marks=pytest.mark.skipif(c_kernel() is None, reason="the C extension is not built")),
    "numpy",
]
EDGES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Magnitudes up to 8e307, so that the largest |b − a| (1.6e308) is still a float64.
BIG = 8e307
#: Values where float64 is at its edge: squares overflow, squares underflow, subnormal values, ±0.
EXTREMES = [1e300, -1e300, 3e200, 1e155, BIG, -BIG, 1e-300, 1e-200, 1e-160, 1e-320, -1e-320, 5e-324, 2.2e-308, 0.0]


def stats_of(kernel: str, dtype_a: str, raw_a: bytes, dtype_b: str, raw_b: bytes) -> ValueStats:
    """One chunk pair through ``kernel``'s comparison, folded as the pass folds a tensor."""
    chunks = FusedChunks() if kernel == "c" else NumpyChunks()
    kind_a, kind_b = VALUE_TYPES[dtype_a], VALUE_TYPES[dtype_b]
    result = chunks.compared(kind_a, bytearray(raw_a), kind_b, bytearray(raw_b))
    total = Accumulator()
    total.fold(0, result)
    if not total.equal and isinstance(result, SameChunk):  # pragma: no cover - one chunk: never both
        total.add_square_sum(chunks.square_sum(kind_a, bytearray(raw_a)))
    note = None if dtype_a == dtype_b else total.stats().note
    return total.stats(note)


def root(value: Fraction) -> float:
    """√value rounded to float64, for a rational of any size (√(m·4^k) = √m·2^k)."""
    if value == 0:
        return 0.0
    half = (value.numerator.bit_length() - value.denominator.bit_length()) // 2
    try:
        return math.ldexp(math.sqrt(float(value / Fraction(4) ** half)), half)
    except OverflowError:  # beyond float64 (a relative L2 of 1e600): infinity, as the kernels give
        return math.inf


def exact(xs: list[Fraction], ys: list[Fraction]) -> dict[str, float | None]:
    """The statistics in exact rational arithmetic, rounded to float64 only at the end."""
    aa, bb = sum(x * x for x in xs), sum(y * y for y in ys)
    ab, dd = sum(x * y for x, y in zip(xs, ys)), sum((y - x) ** 2 for x, y in zip(xs, ys))
    diffs = [abs(y - x) for x, y in zip(xs, ys)]
    cosine = (1 if ab >= 0 else -1) * root(ab * ab / (aa * bb)) if aa and bb else None
    return {
        "max_abs": float(max(diffs)),
        "mean_abs": float(sum(diffs) / len(diffs)),
        "cosine": cosine,
        "rel_l2": root(dd / aa) if aa else None,
        "equal": all(x == y for x, y in zip(xs, ys)),
    }


def assert_matches(got: ValueStats, want: dict[str, float | None], rel: float = 1e-9) -> None:
    assert got.max_abs == pytest.approx(want["max_abs"], rel=1e-15, abs=0.0)
    assert got.mean_abs == pytest.approx(want["mean_abs"], rel=rel, abs=0.0)
    if want["cosine"] is None:
        assert got.cosine is None
    else:
        assert got.cosine is not None and abs(got.cosine - want["cosine"]) <= rel
    if want["rel_l2"] is None:
        assert got.rel_l2 is None
    else:
        assert got.rel_l2 == pytest.approx(want["rel_l2"], rel=rel, abs=0.0)


floats64 = st.one_of(
    st.sampled_from(EXTREMES),
    st.floats(min_value=-BIG, max_value=BIG, allow_nan=False, allow_subnormal=True),
    st.floats(min_value=-1e-300, max_value=1e-300, allow_nan=False, allow_subnormal=True),
)


@pytest.mark.parametrize("kernel", KERNELS)
def test_opposite_values_at_1e300_have_cosine_minus_one(kernel: str) -> None:
    """Finding 16: squares of 1e300 overflow float64; the sums are scaled, not infinite."""
    got = stats_of(kernel, "F64", np.full(4, 1e300).tobytes(), "F64", np.full(4, -1e300).tobytes())
    assert (got.cosine, got.rel_l2, got.max_abs, got.mean_abs) == (-1.0, 2.0, 2e300, 2e300)


@pytest.mark.parametrize("kernel", KERNELS)
def test_subnormal_values_give_statistics_not_nulls(kernel: str) -> None:
    """Finding 23: values near 1e-320 square to 0 in float64; scaled, they give a cosine and a relative L2."""
    a, b = np.array([1e-320, 2e-320, -3e-320, 0.0]), np.array([1e-320, 2e-320, 3e-320, 5e-324])
    got = stats_of(kernel, "F64", a.tobytes(), "F64", b.tobytes())
    assert_matches(got, exact([Fraction(float(x)) for x in a], [Fraction(float(y)) for y in b]))
    assert got.cosine is not None and got.rel_l2 is not None


@pytest.mark.parametrize("kernel", KERNELS)
@EDGES
@given(data=st.data(), size=st.integers(1, 24))
def test_float64_statistics_hold_at_every_magnitude(kernel: str, data: st.DataObject, size: int) -> None:
    """Findings 16 and 23, generalised: any float64 values, extremes and subnormals mixed in, give the exact
    statistics (within 1e-9) and never a null where a side is not all zeros."""
    xs = data.draw(st.lists(floats64, min_size=size, max_size=size))
    ys = data.draw(st.lists(floats64, min_size=size, max_size=size))
    got = stats_of(kernel, "F64", np.array(xs).tobytes(), "F64", np.array(ys).tobytes())
    want = exact([Fraction(x) for x in xs], [Fraction(y) for y in ys])
    if np.array(xs).tobytes() == np.array(ys).tobytes():
        assert got.equal and got.max_abs == 0.0
        return
    assert not got.equal
    assert_matches(got, want)


int64s = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([2**53, 2**53 + 1, 2**62, 2**62 + 1, 2**63 - 1, -(2**63), -(2**63) + 1, 0, 1, -1]),
)
uint64s = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([2**53 + 1, 2**63, 2**64 - 1, 2**64 - 2, 0]))


@pytest.mark.parametrize("kernel", KERNELS)
def test_int64_beyond_2_to_53_is_compared_exactly(kernel: str) -> None:
    """Finding 22: 2^62 + 1 against 2^62 differs by 1, and max |b − a| says so (it was 0: equal false, max 0)."""
    a, b = np.array([2**62 + 1] * 3, "<i8"), np.array([2**62] * 3, "<i8")
    got = stats_of(kernel, "I64", a.tobytes(), "I64", b.tobytes())
    assert not got.equal and got.max_abs == 1.0 and got.mean_abs == 1.0
    assert got.rel_l2 is not None and got.rel_l2 > 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_int64_against_float64_across_a_dtype_change_is_compared_exactly(kernel: str) -> None:
    """Finding 21: I64 2^53 + 1 against F64 2^53 (--allow-dtype-change) differ by 1: not "equal"."""
    got = stats_of(kernel, "I64", np.array([2**53 + 1], "<i8").tobytes(), "F64", np.array([2.0**53]).tobytes())
    assert not got.equal and got.max_abs == 1.0
    same = stats_of(kernel, "I64", np.array([2**53, -7], "<i8").tobytes(), "F64", np.array([2.0**53, -7.0]).tobytes())
    assert same.equal and same.max_abs == 0.0


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["I64", "U64"])
@EDGES
@given(data=st.data(), size=st.integers(1, 16))
def test_64_bit_integers_equal_is_consistent_with_max_abs(kernel: str, dtype: str, data: st.DataObject, size) -> None:
    """Findings 21 and 22, generalised: equal exactly when every value is, and then only; max |b − a| is the exact
    difference rounded once (exact below 2^53), never 0 for different values."""
    values = int64s if dtype == "I64" else uint64s
    xs = data.draw(st.lists(values, min_size=size, max_size=size))
    ys = data.draw(st.lists(values, min_size=size, max_size=size))
    stored = "<i8" if dtype == "I64" else "<u8"
    got = stats_of(kernel, dtype, np.array(xs, stored).tobytes(), dtype, np.array(ys, stored).tobytes())
    largest = max(abs(y - x) for x, y in zip(xs, ys))
    assert got.equal is (xs == ys)
    assert (got.max_abs == 0.0) is (xs == ys)
    if largest < 2**53:
        assert got.max_abs == float(largest)
    else:
        assert got.max_abs == pytest.approx(float(largest), rel=2**-52)
    if xs != ys and any(xs):
        assert got.rel_l2 is not None and got.rel_l2 > 0


@pytest.mark.parametrize("kernel", KERNELS)
@EDGES
@given(data=st.data(), size=st.integers(1, 16))
def test_int64_against_float64_is_equal_only_for_equal_values(kernel: str, data: st.DataObject, size: int) -> None:
    xs = data.draw(st.lists(int64s, min_size=size, max_size=size))
    ys = [float(x) for x in xs]
    got = stats_of(kernel, "I64", np.array(xs, "<i8").tobytes(), "F64", np.array(ys).tobytes())
    exactly = all(Fraction(x) == Fraction(y) for x, y in zip(xs, ys))
    assert got.equal is exactly
    assert got.max_abs == pytest.approx(float(max(abs(Fraction(y) - x) for x, y in zip(xs, ys))), rel=1e-15)


@pytest.mark.parametrize("kernel", KERNELS)
@EDGES
@given(a=st.binary(min_size=1, max_size=40), data=st.data())
def test_bool_is_true_or_false_whatever_the_byte(kernel: str, a: bytes, data: st.DataObject) -> None:
    """Finding 24: a BOOL byte that is not 0 is true, 1 (the C kernel said max |b − a| 255); the kernels agree,
    and equal means every value is."""
    b = data.draw(st.binary(min_size=len(a), max_size=len(a)))
    got = stats_of(kernel, "BOOL", a, "BOOL", b)
    truths_a, truths_b = [x != 0 for x in a], [y != 0 for y in b]
    assert got.max_abs == (1.0 if truths_a != truths_b else 0.0)
    assert got.equal is (truths_a == truths_b)
    want = exact([Fraction(int(x)) for x in truths_a], [Fraction(int(y)) for y in truths_b])
    if not got.equal:
        assert_matches(got, want)


@pytest.mark.skipif(c_kernel() is None, reason="the C extension is not built")
@pytest.mark.parametrize("entry", ["chunk_totals", "compared_chunk", "read_chunk"])
def test_a_count_whose_byte_count_wraps_size_t_is_refused(entry: str, tmp_path: Path) -> None:
    """Finding 20: count × itemsize wrapped around (2^62 × 4 = 0 mod 2^64) and passed the length check, and the
    kernel read far past the buffers. Run in a child: before the fix it crashed the interpreter."""
    if entry == "read_chunk" and not hasattr(c_kernel(), "read_chunk"):
        pytest.skip("the C kernel's own reads (POSIX)")
    (tmp_path / "f").write_bytes(bytes(64))
    call = {
        "chunk_totals": "k.chunk_totals(b, k.F32, None, b, k.F32, None, 2**62, False)",
        "compared_chunk": "k.compared_chunk(b, k.F32, None, b, k.F32, None, 2**62, False, True, 2**31 - 1, 0)",
        "read_chunk": "k.read_chunk(fd, 0, w, k.F32, None, fd, 0, bytearray(16), k.F32, None, 2**62, False, True, "
        "2**31 - 1, 0)",
    }[entry]
    script = (
        "import os, sys; from ckptdiff.values import _fused as k\n"
        "b, w, fd = bytearray(16), bytearray(16), os.open(sys.argv[1], os.O_RDONLY)\n"
        f"try: {call}\n"
        "except ValueError as err: print('refused:', err)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "f")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "refused: a chunk is shorter than count elements\n"


def write_f64(path: Path, values: list[float]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    prefix, _ = header_bytes([("w", "F64", [len(values)])], {"format": "pt"})
    (path / "model.safetensors").write_bytes(prefix + np.array(values, "<f8").tobytes())
    return path


@pytest.mark.parametrize("kernel", ["c", "numpy"])
def test_the_report_at_float64_extremes_end_to_end(tmp_path: Path, run_cli, kernel: str) -> None:
    """From the CLI, both kernels: [1e300]*4 against [-1e300]*4 is cosine −1, rel_l2 2 (was cosine 1, rel_l2 NaN),
    and subnormal tensors get numbers, not nulls."""
    if kernel == "c" and c_kernel() is None:
        pytest.skip("the C extension is not built")
    env = {"CKPTDIFF_VALUES_KERNEL": kernel}
    for a, b, want in (
        ([1e300] * 4, [-1e300] * 4, {"cosine": -1.0, "rel_l2": 2.0, "max_abs": 2e300}),
        ([1e-320] * 4, [3e-320] * 4, {"cosine": 1.0, "max_abs": float(np.float64(3e-320) - np.float64(1e-320))}),
    ):
        left, right = write_f64(tmp_path / f"a{a[0]}", a), write_f64(tmp_path / f"b{b[0]}", b)
        done = run_cli(str(left), str(right), "--values", "--format", "json", "-q", env=env)
        assert done.returncode in (0, 1), done.stderr
        values = json.loads(done.stdout)["tensors"][0]["values"]
        assert values["equal"] is False
        for key, number in want.items():
            assert values[key] == pytest.approx(number, rel=1e-12), key
        assert values["rel_l2"] is not None and values["cosine"] is not None


@pytest.mark.parametrize("kernel", ["c", "numpy"])
def test_a_tensor_gone_nan_says_so_beside_its_numbers(tmp_path: Path, run_cli, kernel: str) -> None:
    """B's tensor holds NaN and ±inf where A's holds ones: the statistics over the finite elements are max |Δ| 0,
    cos 1, which alone read as "unchanged" (the table and the finding said only that; JSON had the note). Every
    place the numbers are shown now says how many elements they leave out."""
    if kernel == "c" and c_kernel() is None:
        pytest.skip("the C extension is not built")
    env = {"CKPTDIFF_VALUES_KERNEL": kernel}
    ones = write_f64(tmp_path / "ones", [1.0] * 4)
    blown = write_f64(tmp_path / "blown", [1.0, math.nan, math.inf, -math.inf])
    left_out = "3 non-finite element(s) left out of the statistics"
    for report_format in ("table", "markdown"):
        done = run_cli(str(ones), str(blown), "--values", "--all", "-v", "--format", report_format, env=env)
        assert done.returncode == 0, done.stderr
        row = next(line for line in done.stdout.splitlines() if line.lstrip("| `").startswith("w"))
        assert left_out in row, done.stdout
        summary = next(line for line in done.stdout.splitlines() if "values_changed" in line)
        assert "largest: w (rel L2 0, cos 1.000000, max " in summary and f"0, {left_out})" in summary, summary
    page = run_cli(str(ones), str(blown), "--values", "--format", "html", env=env).stdout
    row = re.search(r'<tr class="row" [^>]*data-name="w">.*?</tr>', page)
    assert row is not None and f"<td>{left_out}</td>" in row.group(), page
    same = run_cli(str(ones), str(ones), "--values", "--all", "--format", "table", env=env)
    assert "non-finite" not in same.stdout
