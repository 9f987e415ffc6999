/* rtxviz._native: the two memory passes that watching a training run adds, fused into the passes it needs.

   Why C: a watched run summarises every gradient and reports every parameter update, every step. With numpy
   that is one pass over memory per number (a dot product for a norm, a min, a max, a sum) plus a few
   microseconds of Python per call; on a small MLP those passes were a third of the recording overhead.

   summary(x)            sum of squares, sum, min and max of x in one read (rtxviz.events.stats).
   add_measured(p, u)    p += u, returning the sums of squares of the new p and of u from the same pass
                         (rtxviz.optim: the optimizer report's ‖p‖ and ‖u‖ for free).

   Both are optional: without a C compiler the package installs without this module, and numpy does the same
   work in more passes (tests/events/test_stats.py and tests/nn/test_native_update.py run both paths).

   Semantics of summary, shared with the numpy path:
   - min and max skip NaN (a comparison with NaN is false); Inf takes part.
   - the sum of squares and the sum are accumulated in the array's type in blocks of BLOCK elements, each
     block's partial sums added into double totals, so float32 summaries are accurate to ~1e-7 relative.
   - a non-finite sum of squares is the caller's cue that NaN/Inf may be present (or that squares overflowed):
     it then counts them with numpy.

   Only C-contiguous float32 ('f') and float64 ('d') buffers in native byte order are taken; anything else
   raises TypeError (ValueError when not contiguous or not aligned), and the caller takes the numpy path. The GIL
   is released while the loops run over large buffers. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER) && !defined(__clang__)
#define restrict __restrict /* MSVC spells C99's restrict this way */
#endif

#define BLOCK 4096  /* elements per block before the float lanes are added into the double totals */
/* Below this many elements the GIL stays held: a call takes a few microseconds, and releasing it would invite
   another thread (the event sender) to take the GIL that the training thread needs again right after. */
#define RELEASE_GIL_FROM 32768

/* AVX-512 or AVX2+FMA where the CPU has them (picked at load time through an ifunc, so glibc only), the
   baseline elsewhere. */
#if defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    defined(__GLIBC__) /* the x86-64-v3/v4 names came with GCC 11 */
#define MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
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

/* add_measured_<T>(p, u, n, out): p[i] = p[i] + u[i] (the same IEEE addition as numpy's `p += u`, so the
   parameters are bit for bit those of an unwatched step); out = {sum of squares of the new p, of u}.
   LANES running sums of each kind, as in summary (32 measured best for both types: 16 float lanes were left
   unvectorized by GCC 12); each block's T sums go into double totals. */
#define DEFINE_ADD_MEASURED(NAME, T, LANES)                                                         \
    MULTIVERSION static void NAME(T *restrict p, const T *restrict u, Py_ssize_t n, double out[2]) { \
        double p_squares = 0.0, u_squares = 0.0;                                                    \
        Py_ssize_t bulk = n - n % LANES;                                                            \
        for (Py_ssize_t start = 0; start < bulk; start += BLOCK) {                                  \
            Py_ssize_t end = start + BLOCK < bulk ? start + BLOCK : bulk;                           \
            T ps[LANES] = {0}, us[LANES] = {0};                                                     \
            for (Py_ssize_t i = start; i < end; i += LANES) {                                       \
                for (int j = 0; j < LANES; j++) {                                                   \
                    T v = u[i + j];                                                                 \
                    T w = p[i + j] + v;                                                             \
                    p[i + j] = w;                                                                   \
                    ps[j] += w * w;                                                                 \
                    us[j] += v * v;                                                                 \
                }                                                                                   \
            }                                                                                       \
            for (int j = 0; j < LANES; j++) {                                                       \
                p_squares += ps[j];                                                                 \
                u_squares += us[j];                                                                 \
            }                                                                                       \
        }                                                                                           \
        for (Py_ssize_t i = bulk; i < n; i++) { /* the tail: fewer than LANES elements */          \
            T v = u[i];                                                                             \
            T w = p[i] + v;                                                                         \
            p[i] = w;                                                                               \
            p_squares += (double)w * w;                                                             \
            u_squares += (double)v * v;                                                             \
        }                                                                                           \
        out[0] = p_squares;                                                                         \
        out[1] = u_squares;                                                                         \
    }

DEFINE_ADD_MEASURED(add_measured_f32, float, 32)
DEFINE_ADD_MEASURED(add_measured_f64, double, 32)

/* 1 for float32, 2 for float64, 0 (with TypeError or ValueError set) for anything else, or for a buffer whose
   address is not a multiple of its item size (the loops read it as float or double). */
static int float_kind(const Py_buffer *view, const char *who) {
    const char *given = view->format ? view->format : "B"; /* the protocol's default: unsigned bytes */
    const char *fmt = given;
    if (fmt[0] == '@' || fmt[0] == '=') fmt++; /* native order, spelled out */
    int kind = strcmp(fmt, "f") == 0 ? 1 : strcmp(fmt, "d") == 0 ? 2 : 0;
    if (!kind) {
        PyErr_Format(PyExc_TypeError, "%s: float32 or float64 buffers only, got format '%s'", who, given);
        return 0;
    }
    if ((uintptr_t)view->buf % (uintptr_t)view->itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: the buffer is not aligned to its %zd-byte items", who, view->itemsize);
        return 0;
    }
    return kind;
}

static PyObject *summary(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    int kind = float_kind(&view, "summary");
    if (!kind) {
        PyBuffer_Release(&view);
        return NULL;
    }
    double out[4];
    Py_ssize_t n = view.len / view.itemsize;
    PyThreadState *saved = n >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
    if (kind == 1)
        summary_f32((const float *)view.buf, n, out);
    else
        summary_f64((const double *)view.buf, n, out);
    if (saved) PyEval_RestoreThread(saved);
    PyBuffer_Release(&view);
    return Py_BuildValue("(dddd)", out[0], out[1], out[2], out[3]);
}

static PyObject *add_measured(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_measured(param, update) takes 2 arguments");
        return NULL;
    }
    Py_buffer p, u;
    if (PyObject_GetBuffer(args[0], &p, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &u, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&p);
        return NULL;
    }
    PyObject *result = NULL;
    int kind = float_kind(&p, "add_measured");
    if (!kind) goto done;
    if (float_kind(&u, "add_measured") != kind) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "add_measured: param and update have different formats");
        goto done;
    }
    int same_shape = p.ndim == u.ndim && p.len == u.len;
    for (int i = 0; same_shape && i < p.ndim; i++) same_shape = p.shape[i] == u.shape[i];
    if (!same_shape) { /* numpy's += would broadcast or refuse; the caller lets it */
        PyErr_Format(PyExc_TypeError, "add_measured: param and update differ in shape (%d and %d dims, %zd and %zd "
                     "bytes)", p.ndim, u.ndim, p.len, u.len);
        goto done;
    }
    /* the kernel promises its compiler no aliasing: overlapping buffers go to numpy, which copes */
    const char *pa = p.buf, *ua = u.buf;
    if (pa < ua + u.len && ua < pa + p.len) {
        PyErr_SetString(PyExc_ValueError, "add_measured: param and update overlap");
        goto done;
    }
    double out[2];
    Py_ssize_t n = p.len / p.itemsize;
    PyThreadState *saved = n >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
    if (kind == 1)
        add_measured_f32((float *)p.buf, (const float *)u.buf, n, out);
    else
        add_measured_f64((double *)p.buf, (const double *)u.buf, n, out);
    if (saved) PyEval_RestoreThread(saved);
    result = Py_BuildValue("(dd)", out[0], out[1]);
done:
    PyBuffer_Release(&u);
    PyBuffer_Release(&p);
    return result;
}

static PyMethodDef methods[] = {
    {"summary", summary, METH_O,
     "summary(buffer) -> (sum of squares, sum, min, max) of a C-contiguous float32/float64 buffer, in one pass.\n"
     "min and max skip NaN; a non-finite sum of squares means NaN/Inf may be present."},
    {"add_measured", (PyCFunction)(void (*)(void))add_measured, METH_FASTCALL,
     "add_measured(param, update) -> (sum of squares of param after, of update): param += update in place, in\n"
     "one pass. Both C-contiguous, the same float32/float64 format and size, not overlapping."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rtxviz._native",
                                    "Fused memory passes for watched runs (see _native.c).", -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
