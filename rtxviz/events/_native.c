/* One-pass tensor summaries for the event stream: sum of squares, sum, min and max in a single read.

   Why C: watching a training run summarises every gradient of every step. numpy needs one pass per number
   (a dot product for the norm, a min, a max, a sum), so the summaries cost four reads of each gradient plus
   a few microseconds of Python per call; this reads it once (memory-bound on large tensors, ~0.2 us on small
   ones). `rtxviz.events.stats` uses it when it was built and falls back to numpy otherwise, with the same
   results (tests/events/test_native.py compares the two).

   Semantics, shared by both paths:
   - min and max skip NaN (a comparison with NaN is false); Inf takes part.
   - the sum of squares and the sum are accumulated in the array's type in blocks of BLOCK elements, each
     block's partial sums added into double totals, so float32 summaries are accurate to ~1e-7 relative.
   - a non-finite sum of squares is the caller's cue that NaN/Inf may be present (or that squares overflowed):
     it then counts them with numpy.

   Only C-contiguous float32 ('f') and float64 ('d') buffers in native byte order are taken; anything else
   raises TypeError, and the caller takes the numpy path. The GIL is released while reading. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define BLOCK 4096  /* elements per block before the float lanes are added into the double totals */

/* AVX2+FMA where the CPU has it (picked at load time), baseline SSE2 elsewhere. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MULTIVERSION
#endif

/* summary_<T>(x, n, out): out = {sum of squares, sum, min, max}; min/max are +inf/-inf for no finite value.
   LANES independent running values of each kind, updated lane by lane: the compiler turns each lane loop into
   a few vector instructions (minps/maxps are exactly `v < m ? v : m`), and independent lanes hide the adds'
   latency. Each block's sums are added into double totals. */
#define DEFINE_SUMMARY(NAME, T, LANES)                                                              \
    MULTIVERSION static void NAME(const T *x, Py_ssize_t n, double out[4]) {                       \
        T lo[LANES], hi[LANES];                                                                     \
        double squares = 0.0, total = 0.0;                                                          \
        for (int j = 0; j < LANES; j++) {                                                           \
            lo[j] = (T)INFINITY;                                                                    \
            hi[j] = (T)-INFINITY;                                                                   \
        }                                                                                           \
        Py_ssize_t i = 0;                                                                           \
        while (i + LANES <= n) {                                                                    \
            Py_ssize_t end = i + BLOCK < n ? i + BLOCK : n;                                         \
            T sq[LANES], s[LANES];                                                                  \
            for (int j = 0; j < LANES; j++) sq[j] = s[j] = 0;                                       \
            for (; i + LANES <= end; i += LANES) {                                                  \
                for (int j = 0; j < LANES; j++) {                                                   \
                    T v = x[i + j];                                                                 \
                    sq[j] += v * v;                                                                 \
                    s[j] += v;                                                                      \
                    lo[j] = v < lo[j] ? v : lo[j];                                                  \
                    hi[j] = v > hi[j] ? v : hi[j];                                                  \
                }                                                                                   \
            }                                                                                       \
            for (int j = 0; j < LANES; j++) {                                                       \
                squares += sq[j];                                                                   \
                total += s[j];                                                                      \
            }                                                                                       \
        }                                                                                           \
        T l = (T)INFINITY, h = (T)-INFINITY;                                                        \
        for (int j = 0; j < LANES; j++) {                                                           \
            l = lo[j] < l ? lo[j] : l;                                                              \
            h = hi[j] > h ? hi[j] : h;                                                              \
        }                                                                                           \
        for (; i < n; i++) { /* the tail: fewer than LANES elements */                             \
            T v = x[i];                                                                             \
            squares += (double)v * v;                                                               \
            total += v;                                                                             \
            l = v < l ? v : l;                                                                      \
            h = v > h ? v : h;                                                                      \
        }                                                                                           \
        out[0] = squares;                                                                           \
        out[1] = total;                                                                             \
        out[2] = l;                                                                                 \
        out[3] = h;                                                                                 \
    }

DEFINE_SUMMARY(summary_f32, float, 16)  /* lane counts measured best on AVX2 */
DEFINE_SUMMARY(summary_f64, double, 32)

static PyObject *summary(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    const char *fmt = view.format;
    if (fmt[0] == '@' || fmt[0] == '=') fmt++; /* native order, spelled out */
    int is_f32 = strcmp(fmt, "f") == 0, is_f64 = strcmp(fmt, "d") == 0;
    if (!is_f32 && !is_f64) {
        PyErr_Format(PyExc_TypeError, "summary: float32 or float64 buffers only, got format '%s'", view.format);
        PyBuffer_Release(&view);
        return NULL;
    }
    double out[4];
    Py_ssize_t n = view.len / view.itemsize;
    Py_BEGIN_ALLOW_THREADS
    if (is_f32)
        summary_f32((const float *)view.buf, n, out);
    else
        summary_f64((const double *)view.buf, n, out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(dddd)", out[0], out[1], out[2], out[3]);
}

static PyMethodDef methods[] = {
    {"summary", summary, METH_O,
     "summary(buffer) -> (sum of squares, sum, min, max) of a C-contiguous float32/float64 buffer, in one pass.\n"
     "min and max skip NaN; a non-finite sum of squares means NaN/Inf may be present."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rtxviz.events._native",
                                    "One-pass tensor summaries (see _native.c).", -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
