/* The fused --values kernel in C: one pass over two chunks' stored bits gives every sum, with no widened copy.
 *
 * The same rules as the numba kernel (kernels.py): blocks of BLOCK elements, each element decoded where it is
 * loaded (bf16 by a shift, f16 and fp8 by a table, integers by a cast; other dtype pairs through two small
 * buffers that stay in L1), summed in LANES independent lane accumulators (each lane adds its elements in index
 * order: the compiler vectorises across lanes without reassociating anything, so no -ffast-math), the lanes
 * added into float64 totals after every block and folded in lane order at the end: the same bits on any number
 * of threads. A chunk is summed unchecked first; when a total is not finite or is tiny it is summed again with
 * every block checked, and a block whose sums are not all finite, or so small that squares of subnormal values
 * may have been rounded away, is summed element by element in float64 over the elements finite on both sides,
 * the others counted. F64 and integer tensors take float64 blocks.
 *
 * compared_chunk() compares the two chunks' bytes first and only sums when they differ (or hold non-finite
 * values); mapped_chunk() does the same reading the chunks itself, through a memory map of just that range (no
 * copy out of the page cache; unmapped before it returns, so the resident set stays small). Every entry point
 * releases the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if !defined(_WIN32)
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define CKPTDIFF_MMAP 1
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
enum { F32, BF16, TABLE16, TABLE8, F64, I8, U8, I16, U16, I32, U32, I64, U64, CODES };
/* The rows of the totals: Σ(b−a)², Σab, Σa², Σb², Σ|b−a| and max |b−a|. */
enum { DD, AB, AA, BB, ABS, MAX, ROWS };

static const int ITEMSIZE[CODES] = {4, 2, 2, 1, 8, 1, 1, 2, 2, 4, 4, 8, 8};

typedef struct {
    double lanes[ROWS][LANES];
    long long skipped;
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
    default: DECODE_CAST(uint64_t, 8) /* U64 */
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
    if (wide)
        chunk_totals64(a, b, count, totals, 0);
    else
        chunk_totals32(a, b, count, totals, 0);
    if (!needs_care(totals, wide ? TINY64 : TINY32)) return;
    memset(totals, 0, sizeof *totals);
    if (wide)
        chunk_totals64(a, b, count, totals, 1);
    else
        chunk_totals32(a, b, count, totals, 1);
}

/* (skipped, Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb²): the lanes folded in lane order. */
static PyObject *totals_tuple(const Totals *totals) {
    double sums[ROWS] = {0};
    for (int row = 0; row < MAX; row++)
        for (int j = 0; j < LANES; j++) sums[row] += totals->lanes[row][j];
    for (int j = 0; j < LANES; j++) sums[MAX] = totals->lanes[MAX][j] > sums[MAX] ? totals->lanes[MAX][j] : sums[MAX];
    return Py_BuildValue("(Ldddddd)", totals->skipped, sums[DD], sums[ABS], sums[MAX], sums[AB], sums[AA], sums[BB]);
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
    if (count < 0 || pair->raw_a.len < count * ITEMSIZE[code_a] || pair->raw_b.len < count * ITEMSIZE[code_b]) {
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

/* (state, nonzero, skipped, Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb²) */
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
 * mapped_chunk, on two chunks' bytes in memory. */
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

#ifdef CKPTDIFF_MMAP
typedef struct {
    void *base;
    size_t length;
    const uint8_t *data;
} Mapping;

/* A page of a mapping past the file's end raises SIGBUS, which would end the process with no report. A file cut
 * before a chunk is mapped is caught by map_range's length check; one cut while the chunk is read faults, and
 * the fault is caught here: while a thread reads a mapping, SIGBUS on that thread jumps back out of the read
 * (sigsetjmp in py_mapped_chunk), which then fails with EIO. The handler is installed only while some thread
 * reads a mapping, and the disposition it replaced comes back after; a SIGBUS on a thread that is not reading a
 * mapping puts that disposition back at once, and the faulting access, run again, meets it. */
static __thread sigjmp_buf *volatile fault_exit;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int guard_readers;
static struct sigaction replaced_bus;

static void on_bus_error(int signal_number, siginfo_t *info, void *context) {
    (void)signal_number, (void)info, (void)context;
    sigjmp_buf *jump_back = fault_exit;
    if (jump_back != NULL) {
        fault_exit = NULL;
        siglongjmp(*jump_back, 1);
    }
    sigaction(SIGBUS, &replaced_bus, NULL);
}

static void guard_enter(void) {
    pthread_mutex_lock(&guard_lock);
    if (guard_readers++ == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_bus_error;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        sigaction(SIGBUS, &action, &replaced_bus);
    }
    pthread_mutex_unlock(&guard_lock);
}

static void guard_leave(void) {
    pthread_mutex_lock(&guard_lock);
    if (--guard_readers == 0) sigaction(SIGBUS, &replaced_bus, NULL);
    pthread_mutex_unlock(&guard_lock);
}

/* A file shorter now than the range (cut since its header was read) is refused with EINVAL, and the caller reads
 * it instead, which names the file and its defect. */
static int map_range(int fd, long long offset, size_t nbytes, Mapping *mapping) {
    struct stat status;
    if (fstat(fd, &status) != 0) return 0;
    if ((long long)status.st_size < offset + (long long)nbytes) {
        errno = EINVAL;
        return 0;
    }
    long page = sysconf(_SC_PAGESIZE);
    long long aligned = offset - offset % page;
    mapping->length = nbytes + (size_t)(offset - aligned);
    if (mapping->length == 0) mapping->length = 1;
    mapping->base = mmap(NULL, mapping->length, PROT_READ, MAP_SHARED, fd, (off_t)aligned);
    if (mapping->base == MAP_FAILED) return 0;
#ifdef MADV_SEQUENTIAL
    madvise(mapping->base, mapping->length, MADV_SEQUENTIAL);
#endif
    mapping->data = (const uint8_t *)mapping->base + (offset - aligned);
    return 1;
}

/* mapped_chunk(fd_a, offset_a, code_a, table_a, fd_b, offset_b, code_b, table_b, count, wide, compare, mask, limit)
 * → (state, nonzero, skipped, Σ(b−a)², Σ|b−a|, max|b−a|, Σab, Σa², Σb²): state 0 when the bytes are equal and every
 * element finite (no sums: nonzero says whether one is not 0), 1 when they are equal but the sums were needed, 2
 * when they differ. compare 0: the dtypes differ, only sum. The caller checked that both files are long enough. */
static PyObject *py_mapped_chunk(PyObject *self, PyObject *args) {
    int fd_a, fd_b, code_a, code_b, wide, compare;
    long long offset_a, offset_b;
    unsigned long long mask, limit;
    Py_ssize_t count;
    PyObject *table_a, *table_b;
    if (!PyArg_ParseTuple(args, "iLiOiLiOnppKK", &fd_a, &offset_a, &code_a, &table_a, &fd_b, &offset_b, &code_b,
                          &table_b, &count, &wide, &compare, &mask, &limit))
        return NULL;
    if (!valid_code(code_a) || !valid_code(code_b)) return NULL;
    if (count < 0 || offset_a < 0 || offset_b < 0) {
        PyErr_SetString(PyExc_ValueError, "negative count or offset");
        return NULL;
    }
    Py_buffer table_view_a, table_view_b;
    const float *ta, *tb;
    if (!get_table(table_a, code_a, &table_view_a, &ta)) return NULL;
    if (!get_table(table_b, code_b, &table_view_b, &tb)) {
        if (table_view_a.obj) PyBuffer_Release(&table_view_a);
        return NULL;
    }
    size_t nbytes_a = (size_t)count * ITEMSIZE[code_a], nbytes_b = (size_t)count * ITEMSIZE[code_b];
    Mapping map_a = {0}, map_b = {0};
    int state = 2, nonzero = 0, failed = 0;
    Totals totals;
    memset(&totals, 0, sizeof totals);
    int error = 0;
    PyThreadState *thread = PyEval_SaveThread();
    if (!map_range(fd_a, offset_a, nbytes_a, &map_a) || !map_range(fd_b, offset_b, nbytes_b, &map_b)) {
        failed = 1;
        error = errno;
    } else {
        Input a = {map_a.data, code_a, ta}, b = {map_b.data, code_b, tb};
        sigjmp_buf jump;
        guard_enter();
        if (sigsetjmp(jump, 1) == 0) {
            fault_exit = &jump;
            atomic_signal_fence(memory_order_seq_cst);  /* no read of the mapping moves outside the guard */
            state = compared_chunk(&a, &b, (size_t)count, wide, compare, mask, limit, &totals, &nonzero);
            atomic_signal_fence(memory_order_seq_cst);
            fault_exit = NULL;
        } else {  /* a file was cut while this chunk was read */
            failed = 1;
            error = EIO;
        }
        guard_leave();
    }
    if (map_a.base && map_a.base != MAP_FAILED) munmap(map_a.base, map_a.length);
    if (map_b.base && map_b.base != MAP_FAILED) munmap(map_b.base, map_b.length);
    PyEval_RestoreThread(thread);
    if (table_view_a.obj) PyBuffer_Release(&table_view_a);
    if (table_view_b.obj) PyBuffer_Release(&table_view_b);
    if (failed) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return compared_result(state, nonzero, &totals);
}
#endif

static PyMethodDef methods[] = {
    {"chunk_totals", py_chunk_totals, METH_VARARGS,
     "chunk_totals(raw_a, code_a, table_a, raw_b, code_b, table_b, count, wide) -> (skipped, dd, abs, max, ab, aa, "
     "bb)"},
    {"compared_chunk", py_compared_chunk, METH_VARARGS,
     "compared_chunk(raw_a, code_a, table_a, raw_b, code_b, table_b, count, wide, compare, mask, limit) -> (state, "
     "nonzero, skipped, dd, abs, max, ab, aa, bb)"},
#ifdef CKPTDIFF_MMAP
    {"mapped_chunk", py_mapped_chunk, METH_VARARGS,
     "mapped_chunk(fd_a, offset_a, code_a, table_a, fd_b, offset_b, code_b, table_b, count, wide, compare, mask, "
     "limit) -> (state, nonzero, skipped, dd, abs, max, ab, aa, bb)"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fused", "The fused --values kernel (C).", -1, methods};

PyMODINIT_FUNC PyInit__fused(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    static const char *names[CODES] = {"F32", "BF16", "TABLE16", "TABLE8", "F64", "I8", "U8",
                                       "I16", "U16",  "I32",     "U32",    "I64", "U64"};
    int failed = PyModule_AddIntConstant(m, "BLOCK", BLOCK) < 0 || PyModule_AddIntConstant(m, "LANES", LANES) < 0;
    for (int code = 0; code < CODES && !failed; code++) failed = PyModule_AddIntConstant(m, names[code], code) < 0;
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
