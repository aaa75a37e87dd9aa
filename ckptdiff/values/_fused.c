/* The fused --values kernel in C: one pass over two chunks' stored bits gives every sum, with no widened copy.
 *
 * Blocks of BLOCK elements, each element decoded where it is loaded (bf16 by a shift, f16 and fp8 by a table,
 * integers by a cast; other dtype pairs through two small buffers that stay in L1), summed in LANES independent
 * lane accumulators (each lane adds its elements in index order: the compiler vectorises across lanes without
 * reassociating anything, so no -ffast-math), the lanes added into float64 totals after every block and folded in
 * lane order at the end: the same bits on any number of threads. A chunk is summed unchecked first; when a total
 * is not finite or is tiny it is summed again with every block checked, and a block whose sums are not all
 * finite, or so small that squares of subnormal values may have been rounded away, is summed element by element
 * in float64 over the elements finite on both sides, the others counted. F64 and integer tensors take float64
 * blocks. numpy (ckptdiff/values/statistics.py) computes the same statistics where this was not built.
 *
 * compared_chunk() compares the two chunks' bytes first and only sums when they differ (or hold non-finite
 * values); read_chunk() does the same reading the chunks itself with pread into the caller's reused buffers,
 * comparing piece by piece while a piece is in the CPU's cache. No memory map and no signal handler: a file cut
 * while it is read is a short read, reported as such. Every entry point releases the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if !defined(_WIN32)
#include <sys/types.h>
#include <unistd.h>
#define CKPTDIFF_PREAD 1
#endif

/* AVX2 where the CPU has it, chosen at load time (an ifunc: GCC on glibc); the portable build elsewhere. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

#define BLOCK 512
#define LANES 16
/* A sum below this may have lost squares of subnormal values: a product under the type's smallest normal number
 * (2^-126 in float32) loses bits, at most 2^-150 each, 2^-130 over a 1 Mi-element chunk. */
#define TINY32 0x1p-100f
#define TINY64 0x1p-960
/* How a side's stored bits become a number: ckptdiff.values.dtypes' codes. */
enum { F32, BF16, TABLE16, TABLE8, F64, I8, U8, I16, U16, I32, U32, I64, U64, BOOL, CODES };
/* The rows of the totals: Σ(b−a)², Σab, Σa², Σb², Σ|b−a| and max |b−a|. */
enum { DD, AB, AA, BB, ABS, MAX, ROWS };

static const int ITEMSIZE[CODES] = {4, 2, 2, 1, 8, 1, 1, 2, 2, 4, 4, 8, 8, 1};

typedef struct {
    double lanes[ROWS][LANES];
    long long skipped;
    /* 0 but at float64's extremes (exact_totals): Σ(b−a)², Σ|b−a| and max|b−a| are of the values times
     * 2^-scale_d, Σa² of a's times 2^-scale_a, Σb² of b's times 2^-scale_b, Σab of both so scaled */
    int scale_d, scale_a, scale_b;
} Totals;

typedef struct {
    const uint8_t *raw;
    int code;
    const float *table;
} Input;

static inline void decode32(const Input *in, size_t start, size_t count, float *out) {
    const uint8_t *raw = in->raw;
    switch (in->code) {
    case BF16:
        for (size_t i = 0; i < count; i++) {
            uint16_t half;
            memcpy(&half, raw + 2 * (start + i), 2);
            uint32_t bits = (uint32_t)half << 16;
            memcpy(out + i, &bits, 4);
        }
        break;
    case F32:
        memcpy(out, raw + 4 * start, 4 * count);
        break;
    case TABLE16:
        for (size_t i = 0; i < count; i++) {
            uint16_t half;
            memcpy(&half, raw + 2 * (start + i), 2);
            out[i] = in->table[half];
        }
        break;
    default: /* TABLE8 */
        for (size_t i = 0; i < count; i++) out[i] = in->table[raw[start + i]];
    }
}

#define DECODE_CAST(TYPE, SIZE)                                                                                 \
    for (size_t i = 0; i < count; i++) {                                                                        \
        TYPE value;                                                                                             \
        memcpy(&value, raw + (SIZE) * (start + i), (SIZE));                                                     \
        out[i] = (double)value;                                                                                 \
    }                                                                                                           \
    break;

static inline void decode64(const Input *in, size_t start, size_t count, double *out) {
    const uint8_t *raw = in->raw;
    switch (in->code) {
    case F64: DECODE_CAST(double, 8)
    case F32: DECODE_CAST(float, 4)
    case BF16:
        for (size_t i = 0; i < count; i++) {
            uint16_t half;
            memcpy(&half, raw + 2 * (start + i), 2);
            uint32_t bits = (uint32_t)half << 16;
            float value;
            memcpy(&value, &bits, 4);
            out[i] = value;
        }
        break;
    case TABLE16:
        for (size_t i = 0; i < count; i++) {
            uint16_t half;
            memcpy(&half, raw + 2 * (start + i), 2);
            out[i] = in->table[half];
        }
        break;
    case TABLE8:
        for (size_t i = 0; i < count; i++) out[i] = in->table[raw[start + i]];
        break;
    case I8: DECODE_CAST(int8_t, 1)
    case U8: DECODE_CAST(uint8_t, 1)
    case I16: DECODE_CAST(int16_t, 2)
    case U16: DECODE_CAST(uint16_t, 2)
    case I32: DECODE_CAST(int32_t, 4)
    case U32: DECODE_CAST(uint32_t, 4)
    case I64: DECODE_CAST(int64_t, 8)
    case U64: DECODE_CAST(uint64_t, 8)
    default: /* BOOL: any nonzero byte is true, 1 */
        for (size_t i = 0; i < count; i++) out[i] = raw[start + i] != 0;
    }
}

/* 64-bit integers do not all fit a double: such a side is decoded as hi + lo, hi the nearest double and lo the
 * exact rest (|lo| <= 2^10), so that b − a is computed as (b_hi − a_hi) + (b_lo − a_lo): never 0 for different
 * values, exact while the difference fits in 53 bits. Other codes: hi as decode64 gives it, lo 0. */
static void decode_split(const Input *in, size_t start, size_t count, double *hi, double *lo) {
    const uint8_t *raw = in->raw;
    if (in->code == I64) {
        for (size_t i = 0; i < count; i++) {
            int64_t value;
            memcpy(&value, raw + 8 * (start + i), 8);
            double near = (double)value;
            hi[i] = near;
            /* near = 2^63 (value rounded up past INT64_MAX): value − 2^63 in two's complement */
            lo[i] = near >= 0x1p63 ? (double)(int64_t)((uint64_t)value - (UINT64_C(1) << 63))
                                   : (double)(value - (int64_t)near);
        }
    } else if (in->code == U64) {
        for (size_t i = 0; i < count; i++) {
            uint64_t value;
            memcpy(&value, raw + 8 * (start + i), 8);
            double near = (double)value;
            hi[i] = near;
            /* near = 2^64: value − 2^64 is value read as signed; else the rest, small, read as signed */
            lo[i] = near >= 0x1p64 ? (double)(int64_t)value : (double)(int64_t)(value - (uint64_t)near);
        }
    } else {
        decode64(in, start, count, hi);
        for (size_t i = 0; i < count; i++) lo[i] = 0;
    }
}

/* One decoded block (zero-padded to BLOCK) added into the totals; 0, adding nothing, when its sums are not all
 * finite or so small (below tiny) that squares of subnormal values may have been rounded to 0. */
#define BLOCK_FUNCTION(NAME, T, S, ABS_FN, LOAD)                                                                         \
    static inline int NAME(const S *a, const S *b, Totals *totals, T tiny, int careful) {                                    \
        T dd[LANES] = {0}, ab[LANES] = {0}, aa[LANES] = {0}, bb[LANES] = {0}, ad[LANES] = {0}, mx[LANES] = {0}; \
        for (int i = 0; i < BLOCK; i += LANES) {                                                                \
            for (int j = 0; j < LANES; j++) {                                                                   \
                T x = LOAD(a, i + j), y = LOAD(b, i + j);                                                       \
                T d = y - x;                                                                                    \
                T e = ABS_FN(d);                                                                                \
                dd[j] += d * d;                                                                                 \
                ab[j] += x * y;                                                                                 \
                aa[j] += x * x;                                                                                 \
                bb[j] += y * y;                                                                                 \
                ad[j] += e;                                                                                     \
                mx[j] = e > mx[j] ? e : mx[j];                                                                  \
            }                                                                                                   \
        }                                                                                                       \
        if (careful) {                                                                                          \
        T sum_dd = 0, sum_aa = 0, sum_bb = 0, sum_ad = 0, check = 0;                                            \
        for (int j = 0; j < LANES; j++) {                                                                       \
            sum_dd += dd[j];                                                                                    \
            sum_aa += aa[j];                                                                                    \
            sum_bb += bb[j];                                                                                    \
            sum_ad += ad[j];                                                                                    \
            check += ab[j] + mx[j];                                                                             \
        }                                                                                                       \
        check += sum_dd + sum_aa + sum_bb + sum_ad;                                                             \
        if (!(check - check == 0)) return 0; /* NaN or ±inf in a sum */                                         \
        if (sum_dd < tiny && sum_ad > 0) return 0; /* values differ and Σ(b−a)² is tiny: squares lost? */       \
        if (sum_aa < tiny || sum_bb < tiny) { /* fine only if the block is all zeros */                         \
            for (int i = 0; i < BLOCK; i++)                                                                     \
                if (LOAD(a, i) != 0 || LOAD(b, i) != 0) return 0;                                               \
        }                                                                                                       \
        }                                                                                                       \
        for (int j = 0; j < LANES; j++) {                                                                       \
            totals->lanes[DD][j] += dd[j];                                                                      \
            totals->lanes[AB][j] += ab[j];                                                                      \
            totals->lanes[AA][j] += aa[j];                                                                      \
            totals->lanes[BB][j] += bb[j];                                                                      \
            totals->lanes[ABS][j] += ad[j];                                                                     \
            double top = mx[j];                                                                                 \
            totals->lanes[MAX][j] = top > totals->lanes[MAX][j] ? top : totals->lanes[MAX][j];                  \
        }                                                                                                       \
        return 1;                                                                                               \
    }

static inline float bf16_at(const uint8_t *raw, int i) {
    uint16_t half;
    memcpy(&half, raw + 2 * i, 2);
    uint32_t bits = (uint32_t)half << 16;
    float value;
    memcpy(&value, &bits, 4);
    return value;
}

static inline float f32_at(const uint8_t *raw, int i) {
    float value;
    memcpy(&value, raw + 4 * i, 4);
    return value;
}

#define LOAD_DECODED(p, i) ((p)[i])
BLOCK_FUNCTION(block32, float, float, fabsf, LOAD_DECODED)
BLOCK_FUNCTION(block64, double, double, fabs, LOAD_DECODED)
/* Both sides bf16, or both f32 (nearly every pass): decoded where they are loaded, no buffer in between. */
BLOCK_FUNCTION(block_bf16, float, uint8_t, fabsf, bf16_at)
BLOCK_FUNCTION(block_f32, float, uint8_t, fabsf, f32_at)

/* A block with NaN, infinity or an overflowing square: float64, element by element, over the elements finite on
 * both sides (into lane 0); the others counted. */
#define FLOAT64_FUNCTION(NAME, T)                                                                               \
    static void NAME(const T *a, const T *b, size_t count, Totals *totals) {                                    \
        for (size_t i = 0; i < count; i++) {                                                                    \
            double x = a[i], y = b[i];                                                                          \
            if (!(x - x == 0 && y - y == 0)) {                                                                  \
                totals->skipped++;                                                                              \
                continue;                                                                                       \
            }                                                                                                   \
            double d = y - x, e = fabs(d);                                                                      \
            totals->lanes[DD][0] += d * d;                                                                      \
            totals->lanes[AB][0] += x * y;                                                                      \
            totals->lanes[AA][0] += x * x;                                                                      \
            totals->lanes[BB][0] += y * y;                                                                      \
            totals->lanes[ABS][0] += e;                                                                         \
            if (e > totals->lanes[MAX][0]) totals->lanes[MAX][0] = e;                                           \
        }                                                                                                       \
    }

FLOAT64_FUNCTION(float64_block32, float)
FLOAT64_FUNCTION(float64_block64, double)

/* A chunk summed block by block. Fast (careful 0): every block's lanes go into the totals unchecked; the caller
 * checks the chunk's totals and, when a value was not finite or a sum is tiny, sums it again carefully (careful 1:
 * every block checked, as described at the top). The two give the same bits on a chunk that needs no care. */
CLONES static void chunk_totals32(const Input *in_a, const Input *in_b, size_t count, Totals *totals, int careful) {
    float a[BLOCK], b[BLOCK];
    const float tiny = TINY32;
    int direct = in_a->code == in_b->code && (in_a->code == BF16 || in_a->code == F32);
    int itemsize = ITEMSIZE[in_a->code];
    for (size_t start = 0; start < count; start += BLOCK) {
        size_t size = count - start < BLOCK ? count - start : BLOCK;
        if (direct && size == BLOCK) {
            const uint8_t *at_a = in_a->raw + start * itemsize, *at_b = in_b->raw + start * itemsize;
            int added;
            if (in_a->code == BF16)
                added = careful ? block_bf16(at_a, at_b, totals, tiny, 1) : block_bf16(at_a, at_b, totals, tiny, 0);
            else
                added = careful ? block_f32(at_a, at_b, totals, tiny, 1) : block_f32(at_a, at_b, totals, tiny, 0);
            if (added) continue;
            decode32(in_a, start, size, a);
            decode32(in_b, start, size, b);
            float64_block32(a, b, size, totals);
            continue;
        }
        decode32(in_a, start, size, a);
        decode32(in_b, start, size, b);
        for (size_t i = size; i < BLOCK; i++) a[i] = b[i] = 0;
        if (!(careful ? block32(a, b, totals, tiny, 1) : block32(a, b, totals, tiny, 0)))
            float64_block32(a, b, size, totals);
    }
}

CLONES static void chunk_totals64(const Input *in_a, const Input *in_b, size_t count, Totals *totals, int careful) {
    double a[BLOCK], b[BLOCK];
    const double tiny = TINY64;
    for (size_t start = 0; start < count; start += BLOCK) {
        size_t size = count - start < BLOCK ? count - start : BLOCK;
        decode64(in_a, start, size, a);
        decode64(in_b, start, size, b);
        for (size_t i = size; i < BLOCK; i++) a[i] = b[i] = 0;
        if (!(careful ? block64(a, b, totals, tiny, 1) : block64(a, b, totals, tiny, 0)))
            float64_block64(a, b, size, totals);
    }
}

/* b − a in float64: exact but where it overflows (then, as the only case that can, it is taken halved and the
 * caller's scale, at least 1, makes up for it) or rounds (64-bit integers beyond 2^53 apart). *halved tells. */
static inline double difference(double x, double x_lo, double y, double y_lo, int *halved) {
    double d = (y - x) + (y_lo - x_lo);
    *halved = !(d - d == 0);
    return *halved ? y * 0.5 - x * 0.5 : d;
}

/* A chunk where float64 itself is not enough: 64-bit integers (decode_split), or values so large that their
 * squares overflow or so small that they underflow. Element by element in float64, over the elements finite on
 * both sides (the others counted), each side's values times a power of two (exact) that brings its largest near
 * 1 for Σa², Σb² and Σab, and b − a times the one that brings the largest |b − a| near 1 (chunk_scales); Python
 * folds the sums at common scales. */
static void exact_totals(const Input *in_a, const Input *in_b, size_t count, const int scales[3], Totals *totals) {
    double a[BLOCK], b[BLOCK], a_lo[BLOCK], b_lo[BLOCK];
    double *lanes[ROWS];
    for (int row = 0; row < ROWS; row++) lanes[row] = &totals->lanes[row][0];
    int scale_d = scales[0], scale_a = scales[1], scale_b = scales[2];
    totals->scale_d = scale_d, totals->scale_a = scale_a, totals->scale_b = scale_b;
    for (size_t start = 0; start < count; start += BLOCK) {
        size_t size = count - start < BLOCK ? count - start : BLOCK;
        decode_split(in_a, start, size, a, a_lo);
        decode_split(in_b, start, size, b, b_lo);
        for (size_t i = 0; i < size; i++) {
            double x = a[i], y = b[i];
            if (!(x - x == 0 && y - y == 0)) {
                totals->skipped++;
                continue;
            }
            int halved;
            double d = difference(x, a_lo[i], y, b_lo[i], &halved);
            d = scalbn(d, halved - scale_d);
            double e = fabs(d);
            x = scalbn(x, -scale_a);
            y = scalbn(y, -scale_b);
            *lanes[DD] += d * d;
            *lanes[AB] += x * y;
            *lanes[AA] += x * x;
            *lanes[BB] += y * y;
            *lanes[ABS] += e;
            if (e > *lanes[MAX]) *lanes[MAX] = e;
        }
    }
}

/* Beyond these magnitudes a float64 chunk is summed scaled (exact_totals): a square of a value over 2^480 summed
 * over 2^40 elements could overflow, one under 2^-480 loses bits to underflow. */
#define HUGE64 0x1p480
#define SMALL64 0x1p-480

static int exponent_of(double magnitude) {
    int exponent = 0;
    if (magnitude > 0) frexp(magnitude, &exponent);
    return exponent;
}

static int extreme(double magnitude) { return magnitude > HUGE64 || (magnitude > 0 && magnitude < SMALL64); }

/* The largest finite magnitude of each chunk and of b − a, and from them the scales exact_totals takes (b − a,
 * a, b); 1 when one of them is at float64's extremes (beyond HUGE64 or under SMALL64), else 0. */
static int chunk_scales(const Input *in_a, const Input *in_b, size_t count, int scales[3]) {
    double a[BLOCK], b[BLOCK], a_lo[BLOCK], b_lo[BLOCK];
    double top_a = 0, top_b = 0, top_d = 0;
    int halved_any = 0;
    for (size_t start = 0; start < count; start += BLOCK) {
        size_t size = count - start < BLOCK ? count - start : BLOCK;
        decode_split(in_a, start, size, a, a_lo);
        decode_split(in_b, start, size, b, b_lo);
        for (size_t i = 0; i < size; i++) {
            double x = fabs(a[i]), y = fabs(b[i]);
            if (!(x - x == 0 && y - y == 0)) continue;
            top_a = x > top_a ? x : top_a;
            top_b = y > top_b ? y : top_b;
            int halved;
            double d = fabs(difference(a[i], a_lo[i], b[i], b_lo[i], &halved));
            if (halved && !halved_any) { /* from now on every difference is compared halved */
                halved_any = 1;
                top_d *= 0.5;
            }
            if (halved_any && !halved) d *= 0.5;
            top_d = d > top_d ? d : top_d;
        }
    }
    scales[0] = exponent_of(top_d) + halved_any;
    scales[1] = exponent_of(top_a);
    scales[2] = exponent_of(top_b);
    return extreme(top_a) || extreme(top_b) || extreme(top_d) || halved_any;
}

static int is_split(int code) { return code == I64 || code == U64; }

/* Whether a chunk summed fast needs the careful pass: a sum not finite (NaN or infinity in the data, or a square
 * overflowing), or Σ(b−a)² (values differing), Σa² or Σb² below tiny, where squares of subnormal values may have
 * been rounded away (the careful pass keeps a block of zeros as it is and sums any other such block in float64). */
static int needs_care(const Totals *totals, double tiny) {
    double sums[MAX] = {0};
    for (int row = 0; row < MAX; row++)
        for (int j = 0; j < LANES; j++) sums[row] += totals->lanes[row][j];
    for (int row = 0; row < MAX; row++)
        if (!(sums[row] - sums[row] == 0)) return 1;
    if (sums[DD] < tiny && sums[ABS] > 0) return 1;
    return sums[AA] < tiny || sums[BB] < tiny;
}

static void chunk_totals(const Input *a, const Input *b, size_t count, int wide, Totals *totals) {
    memset(totals, 0, sizeof *totals);
    int scales[3];
    if (wide && (is_split(a->code) || is_split(b->code))) {
        if (!chunk_scales(a, b, count, scales)) scales[0] = scales[1] = scales[2] = 0; /* not at the extremes */
        exact_totals(a, b, count, scales, totals);
        return;
    }
    if (wide)
        chunk_totals64(a, b, count, totals, 0);
    else
        chunk_totals32(a, b, count, totals, 0);
    if (!needs_care(totals, wide ? TINY64 : TINY32)) return;
    memset(totals, 0, sizeof *totals);
    if (wide && chunk_scales(a, b, count, scales)) { /* float64's extremes: squares overflow or underflow */
        exact_totals(a, b, count, scales, totals);
        return;
    }
    if (wide)
        chunk_totals64(a, b, count, totals, 1);
    else
        chunk_totals32(a, b, count, totals, 1);
}

/* (skipped, Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb², scale_d, scale_a, scale_b): the lanes folded in lane
 * order; the scales as in Totals. */
static PyObject *totals_tuple(const Totals *totals) {
    double sums[ROWS] = {0};
    for (int row = 0; row < MAX; row++)
        for (int j = 0; j < LANES; j++) sums[row] += totals->lanes[row][j];
    for (int j = 0; j < LANES; j++) sums[MAX] = totals->lanes[MAX][j] > sums[MAX] ? totals->lanes[MAX][j] : sums[MAX];
    return Py_BuildValue("(Lddddddiii)", totals->skipped, sums[DD], sums[ABS], sums[MAX], sums[AB], sums[AA],
                         sums[BB], totals->scale_d, totals->scale_a, totals->scale_b);
}

static int valid_code(int code) {
    if (code < 0 || code >= CODES) {
        PyErr_Format(PyExc_ValueError, "unknown dtype code %d", code);
        return 0;
    }
    return 1;
}

/* A table for TABLE16/TABLE8 codes: a float32 buffer of 65536 or 256 entries. */
static int get_table(PyObject *object, int code, Py_buffer *view, const float **table) {
    *table = NULL;
    view->obj = NULL;
    if (code != TABLE16 && code != TABLE8) return 1;
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS) < 0) return 0;
    Py_ssize_t wanted = (code == TABLE16 ? 65536 : 256) * (Py_ssize_t)sizeof(float);
    if (view->len < wanted) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "the dtype's table is too short");
        return 0;
    }
    *table = (const float *)view->buf;
    return 1;
}

/* Two chunks in memory and their dtypes' tables, checked and held for a call; release_pair lets them go. */
typedef struct {
    Py_buffer raw_a, raw_b, table_a, table_b;
    Input a, b;
} Pair;

/* Fills pair->a and pair->b from its buffers: 1, or 0 with a Python error set. The buffers are the caller's. */
static int take_pair(Pair *pair, int code_a, PyObject *table_a, int code_b, PyObject *table_b, Py_ssize_t count) {
    pair->table_a.obj = pair->table_b.obj = NULL;
    if (!valid_code(code_a) || !valid_code(code_b)) return 0;
    /* divided, not multiplied: count × itemsize could wrap around for a huge count */
    if (count < 0 || pair->raw_a.len / ITEMSIZE[code_a] < count || pair->raw_b.len / ITEMSIZE[code_b] < count) {
        PyErr_SetString(PyExc_ValueError, "a chunk is shorter than count elements");
        return 0;
    }
    const float *ta = NULL, *tb = NULL;
    if (!get_table(table_a, code_a, &pair->table_a, &ta) || !get_table(table_b, code_b, &pair->table_b, &tb))
        return 0;
    pair->a = (Input){pair->raw_a.buf, code_a, ta};
    pair->b = (Input){pair->raw_b.buf, code_b, tb};
    return 1;
}

static void release_pair(Pair *pair) {
    if (pair->table_a.obj) PyBuffer_Release(&pair->table_a);
    if (pair->table_b.obj) PyBuffer_Release(&pair->table_b);
    PyBuffer_Release(&pair->raw_a);
    PyBuffer_Release(&pair->raw_b);
}

static PyObject *py_chunk_totals(PyObject *self, PyObject *args) {
    Pair pair;
    int code_a, code_b, wide;
    Py_ssize_t count;
    PyObject *table_a, *table_b;
    if (!PyArg_ParseTuple(args, "y*iOy*iOnp", &pair.raw_a, &code_a, &table_a, &pair.raw_b, &code_b, &table_b, &count,
                          &wide))
        return NULL;
    PyObject *result = NULL;
    if (take_pair(&pair, code_a, table_a, code_b, table_b, count)) {
        Totals totals;
        Py_BEGIN_ALLOW_THREADS
        chunk_totals(&pair.a, &pair.b, (size_t)count, wide, &totals);
        Py_END_ALLOW_THREADS
        result = totals_tuple(&totals);
    }
    release_pair(&pair);
    return result;
}

/* Equal bytes and every element finite under the dtype's rule: the largest magnitude (bits & mask) below limit
 * (limit 0: integers, always finite); *nonzero set when a magnitude is not 0. */
#define FACTS_FUNCTION(NAME, T)                                                                                 \
    static int NAME(const uint8_t *raw, size_t count, uint64_t mask, uint64_t limit, int *nonzero) {            \
        T top = 0, any = 0, m = (T)mask;                                                                        \
        for (size_t i = 0; i < count; i++) {                                                                    \
            T value;                                                                                            \
            memcpy(&value, raw + sizeof(T) * i, sizeof(T));                                                     \
            T magnitude = value & m;                                                                            \
            top = magnitude > top ? magnitude : top;                                                            \
            any |= magnitude;                                                                                   \
        }                                                                                                       \
        if (any) *nonzero = 1;                                                                                  \
        return limit == 0 || top < (T)limit;                                                                    \
    }

FACTS_FUNCTION(facts8, uint8_t)
FACTS_FUNCTION(facts16, uint16_t)
FACTS_FUNCTION(facts32, uint32_t)
FACTS_FUNCTION(facts64, uint64_t)

/* Bytes compared (and checked) in pieces of this size, which stay in the CPU's cache between the two passes. */
#define PIECE_BYTES (64 * 1024)

CLONES static int equal_and_finite(const uint8_t *a, const uint8_t *b, size_t nbytes, int itemsize, uint64_t mask,
                                   uint64_t limit, int *nonzero) {
    for (size_t low = 0; low < nbytes; low += PIECE_BYTES) {
        size_t size = nbytes - low < PIECE_BYTES ? nbytes - low : PIECE_BYTES;
        if (memcmp(a + low, b + low, size) != 0) return 0;
        size_t count = size / (size_t)itemsize;
        int finite;
        switch (itemsize) {
        case 1: finite = facts8(a + low, count, mask, limit, nonzero); break;
        case 2: finite = facts16(a + low, count, mask, limit, nonzero); break;
        case 4: finite = facts32(a + low, count, mask, limit, nonzero); break;
        default: finite = facts64(a + low, count, mask, limit, nonzero);
        }
        if (!finite) return 0;
    }
    return 1;
}

/* The state of a chunk pair whose bytes were compared first: 0 equal and every element finite (no sums;
 * nonzero says whether one is not 0), 1 equal but summed (a non-finite element, or no rule for the dtype), 2
 * summed. compare 0: the dtypes differ, only sum. */
static int compared_chunk(const Input *a, const Input *b, size_t count, int wide, int compare, uint64_t mask,
                          uint64_t limit, Totals *totals, int *nonzero) {
    memset(totals, 0, sizeof *totals);
    size_t nbytes = count * (size_t)ITEMSIZE[a->code];
    int same = compare && a->code == b->code;
    if (same && mask != 0 && equal_and_finite(a->raw, b->raw, nbytes, ITEMSIZE[a->code], mask, limit, nonzero))
        return 0;
    int state = same && memcmp(a->raw, b->raw, nbytes) == 0 ? 1 : 2;
    chunk_totals(a, b, count, wide, totals);
    return state;
}

/* (state, nonzero, skipped, Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb², scale_d, scale_a, scale_b) */
static PyObject *compared_result(int state, int nonzero, const Totals *totals) {
    PyObject *sums = totals_tuple(totals);
    if (sums == NULL) return NULL;
    PyObject *head = Py_BuildValue("(ii)", state, nonzero);
    if (head == NULL) {
        Py_DECREF(sums);
        return NULL;
    }
    PyObject *joined = PySequence_Concat(head, sums);
    Py_DECREF(head);
    Py_DECREF(sums);
    return joined;
}

/* compared_chunk(raw_a, code_a, table_a, raw_b, code_b, table_b, count, wide, compare, mask, limit): as
 * read_chunk, on two chunks' bytes in memory. */
static PyObject *py_compared_chunk(PyObject *self, PyObject *args) {
    Pair pair;
    int code_a, code_b, wide, compare;
    unsigned long long mask, limit;
    Py_ssize_t count;
    PyObject *table_a, *table_b;
    if (!PyArg_ParseTuple(args, "y*iOy*iOnppKK", &pair.raw_a, &code_a, &table_a, &pair.raw_b, &code_b, &table_b,
                          &count, &wide, &compare, &mask, &limit))
        return NULL;
    PyObject *result = NULL;
    if (take_pair(&pair, code_a, table_a, code_b, table_b, count)) {
        Totals totals;
        int state, nonzero = 0;
        Py_BEGIN_ALLOW_THREADS
        state = compared_chunk(&pair.a, &pair.b, (size_t)count, wide, compare, mask, limit, &totals, &nonzero);
        Py_END_ALLOW_THREADS
        result = compared_result(state, nonzero, &totals);
    }
    release_pair(&pair);
    return result;
}

#ifdef CKPTDIFF_PREAD
/* n bytes of fd from offset into out, with pread (any number of calls): 1, or 0 with errno set (0 at the file's
 * end, which the caller words). Positioned reads, not a memory map: a file cut while it is read gives a short read
 * here, where a page of a memory map past the end would fault and end the process. */
static int read_fully(int fd, uint8_t *out, size_t n, long long offset, long long *reached) {
    size_t got = 0;
    while (got < n) {
        ssize_t step = pread(fd, out + got, n - got, (off_t)(offset + (long long)got));
        if (step < 0 && errno == EINTR) continue;
        if (step <= 0) {
            if (step == 0) errno = 0;
            *reached = offset + (long long)got;
            return 0;
        }
        got += (size_t)step;
    }
    return 1;
}

/* How a read_chunk call failed: which side (0 a, 1 b), errno (0: the file ended), where the file ended. */
typedef struct {
    int side, error;
    long long reached;
} ReadFailure;

/* Both chunks read and compared: the equal-bytes rule is checked piece by piece as the pieces are read into the
 * first PIECE_BYTES of each buffer (so they stay in the CPU's cache, as cat's buffer does); at the first piece
 * that differs (or holds a non-finite value) the whole chunks are read into the buffers and go to
 * compared_chunk, which gives the same bits as on chunks read by the caller. */
static int read_compared(int fd_a, long long offset_a, uint8_t *buf_a, const Input *in_a, int fd_b, long long offset_b,
                         uint8_t *buf_b, const Input *in_b, size_t count, int wide, int compare, uint64_t mask,
                         uint64_t limit, Totals *totals, int *nonzero, ReadFailure *failure) {
    int itemsize_a = ITEMSIZE[in_a->code];
    size_t nbytes_a = count * (size_t)itemsize_a, nbytes_b = count * (size_t)ITEMSIZE[in_b->code];
    size_t in_place = 0; /* bytes at the start of both buffers that already hold their chunk's bytes */
    if (compare && in_a->code == in_b->code && mask != 0) {
        size_t low = 0;
        for (; low < nbytes_a; low += PIECE_BYTES) {
            size_t size = nbytes_a - low < PIECE_BYTES ? nbytes_a - low : PIECE_BYTES;
            if (!read_fully(fd_a, buf_a, size, offset_a + (long long)low, &failure->reached)) {
                failure->side = 0;
                failure->error = errno;
                return -1;
            }
            if (!read_fully(fd_b, buf_b, size, offset_b + (long long)low, &failure->reached)) {
                failure->side = 1;
                failure->error = errno;
                return -1;
            }
            if (!equal_and_finite(buf_a, buf_b, size, itemsize_a, mask, limit, nonzero)) break;
        }
        if (low >= nbytes_a) {
            memset(totals, 0, sizeof *totals);
            return 0;
        }
        in_place = low == 0 ? (nbytes_a < PIECE_BYTES ? nbytes_a : PIECE_BYTES) : 0;
    }
    if (!read_fully(fd_a, buf_a + in_place, nbytes_a - in_place, offset_a + (long long)in_place, &failure->reached)) {
        failure->side = 0;
        failure->error = errno;
        return -1;
    }
    if (!read_fully(fd_b, buf_b + in_place, nbytes_b - in_place, offset_b + (long long)in_place, &failure->reached)) {
        failure->side = 1;
        failure->error = errno;
        return -1;
    }
    Input a = {buf_a, in_a->code, in_a->table}, b = {buf_b, in_b->code, in_b->table};
    *nonzero = 0;
    return compared_chunk(&a, &b, count, wide, compare, mask, limit, totals, nonzero);
}

/* read_chunk(fd_a, offset_a, buffer_a, code_a, table_a, fd_b, offset_b, buffer_b, code_b, table_b, count, wide,
 * compare, mask, limit) → compared_chunk's tuple, on the chunks read from the two files into the two (reused,
 * writable) buffers; the buffers then hold the chunks' bytes unless the state is 0. A file that ends before the
 * chunk raises EOFError(side, byte it ended at) (side 0: a, 1: b); a failed read OSError with the side as filename. */
static PyObject *py_read_chunk(PyObject *self, PyObject *args) {
    int fd_a, fd_b, code_a, code_b, wide, compare;
    long long offset_a, offset_b;
    unsigned long long mask, limit;
    Py_ssize_t count;
    PyObject *table_a, *table_b;
    Py_buffer out_a, out_b;
    if (!PyArg_ParseTuple(args, "iLw*iOiLw*iOnppKK", &fd_a, &offset_a, &out_a, &code_a, &table_a, &fd_b, &offset_b,
                          &out_b, &code_b, &table_b, &count, &wide, &compare, &mask, &limit))
        return NULL;
    PyObject *result = NULL;
    Pair pair;
    pair.raw_a = out_a;
    pair.raw_b = out_b;
    if (offset_a < 0 || offset_b < 0) {
        PyErr_SetString(PyExc_ValueError, "negative offset");
        pair.table_a.obj = pair.table_b.obj = NULL;
    } else if (take_pair(&pair, code_a, table_a, code_b, table_b, count)) {
        Totals totals;
        ReadFailure failure = {0, 0, 0};
        int state, nonzero = 0;
        Py_BEGIN_ALLOW_THREADS
        state = read_compared(fd_a, offset_a, (uint8_t *)out_a.buf, &pair.a, fd_b, offset_b, (uint8_t *)out_b.buf,
                              &pair.b, (size_t)count, wide, compare, mask, limit, &totals, &nonzero, &failure);
        Py_END_ALLOW_THREADS
        if (state >= 0) {
            result = compared_result(state, nonzero, &totals);
        } else if (failure.error == 0) {
            PyErr_Format(PyExc_EOFError, "%d %lld", failure.side, failure.reached);
        } else {
            errno = failure.error;
            PyErr_SetFromErrnoWithFilename(PyExc_OSError, failure.side ? "b" : "a");
        }
    }
    release_pair(&pair);
    return result;
}
#endif

static PyMethodDef methods[] = {
    {"chunk_totals", py_chunk_totals, METH_VARARGS,
     "chunk_totals(raw_a, code_a, table_a, raw_b, code_b, table_b, count, wide) -> (skipped, dd, abs, max, ab, aa, "
     "bb, scale_d, scale_a, scale_b)"},
    {"compared_chunk", py_compared_chunk, METH_VARARGS,
     "compared_chunk(raw_a, code_a, table_a, raw_b, code_b, table_b, count, wide, compare, mask, limit) -> (state, "
     "nonzero, skipped, dd, abs, max, ab, aa, bb, scale_d, scale_a, scale_b)"},
#ifdef CKPTDIFF_PREAD
    {"read_chunk", py_read_chunk, METH_VARARGS,
     "read_chunk(fd_a, offset_a, buffer_a, code_a, table_a, fd_b, offset_b, buffer_b, code_b, table_b, count, wide, "
     "compare, mask, limit) -> (state, nonzero, skipped, dd, abs, max, ab, aa, bb, scale_d, scale_a, scale_b)"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fused", "The fused --values kernel (C).", -1, methods};

PyMODINIT_FUNC PyInit__fused(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    static const char *names[CODES] = {"F32", "BF16", "TABLE16", "TABLE8", "F64", "I8",  "U8",
                                       "I16", "U16",  "I32",     "U32",    "I64", "U64", "BOOL"};
    int failed = PyModule_AddIntConstant(m, "BLOCK", BLOCK) < 0 || PyModule_AddIntConstant(m, "LANES", LANES) < 0;
    for (int code = 0; code < CODES && !failed; code++) failed = PyModule_AddIntConstant(m, names[code], code) < 0;
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
