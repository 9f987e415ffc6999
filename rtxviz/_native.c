/* rtxviz._native: the two memory passes that watching a training run adds, fused into the passes it needs; and
   the LSTM layer's element-wise work per time step (below: lstm_forward_step, lstm_backward_step).

   Why C: a watched run summarises every gradient and reports every parameter update, every step. With numpy
   that is one pass over memory per number (a dot product for a norm, a min, a max, a sum) plus a few
   microseconds of Python per call; on a small MLP those passes were a third of the recording overhead.

   summary(x)            sum of squares, sum, min and max of x in one read (rtxviz.events.stats).
   stats(x, k)           summary's pass, handed back as the finite summary dict itself (shape, norm, min, max,
                         nan, inf, mean, and values when x has at most k elements): rtxviz.summary.tensor_stats
                         for a watched run's every gradient, without two Python frames and a dict built in
                         Python; None when the sum of squares is not finite (the caller counts NaN/Inf then).
   all_finite(x)         whether x holds no NaN/Inf, in one read (the watched forward's check of every output).
   saved_entries(...)    a node event's `saved` list (rtxviz.events.hook.EventHook._saved, which documents the
                         fields): the same dicts its Python loop builds, with its `alias` table, in one call. A
                         recorded op's event is built right after the op's numpy calls have filled the caches
                         with arrays, and the interpreter then runs several times slower than when warm: here
                         the loop over the node's 2-5 saved tensors was half of a node event's time.
   add_measured(p, u)    p += u, returning the sums of squares of the new p and of u from the same pass
                         (rtxviz.optim: the optimizer report's ‖p‖ and ‖u‖ for free).
   sgd_plain(ps, gs, s)  plain SGD's p += g·s over every parameter in one call (rtxviz.optim.SGD: on a small
                         model the two numpy calls per parameter were a fifth of a replayed training step).
   tanh_grad(g, y, out)  tanh's gradient g·(1 − y²) in one pass instead of numpy's three (TanhGrad.forward).
   add_row, sum_rows     a linear layer's bias added to its rows, and a bias gradient's sum over rows (Linear,
                         Sum): on small layers numpy's per-call cost is many times the arithmetic.

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
/* The watched run's own passes (summary, stats, add_measured) keep the GIL far longer: they run on the training
   thread between its numpy calls, and the one other Python thread there is the event sender, so a release can
   hand it the GIL and leave the training thread waiting to take it back. They release it only for a pass long
   enough for another thread to do real work meanwhile: 4M elements, ~0.3 ms of float32 at the summary's rate.
   (Not measured on its own: it landed with other changes, benchmarks/README.md, eleventh session.) */
#define WATCH_RELEASE_GIL_FROM (1 << 22)

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
   latency. Each block's sums are added into double totals.
   The running sum adds `v * one` rather than `v`, with `one` a 1 read at run time: v·1 is exact, so the sum is
   the same number, but the compiler fuses it into a multiply-add, which runs on the FMA ports beside the sum of
   squares and leaves the add ports to min and max. With 32 float lanes (two AVX-512 vectors a kind), 401,408
   floats hot in cache: 83 GB/s against 57 for 16 lanes and a plain add as a C loop alone, 74 against 55 through
   `stats` (AMD EPYC Zen 4, x86-64-v4); the AVX2 build reads 55-56 either way, and float64 about as before. */
static volatile float summary_one_f = 1.0f; /* volatile: never folded into the loop as a constant */
static volatile double summary_one_d = 1.0;
#define DEFINE_SUMMARY(NAME, T, LANES, ONE)                                                         \
    MULTIVERSION static void NAME(const T *x, Py_ssize_t n, double out[4]) {                       \
        const T one = (T)(ONE);                                                                     \
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
                    s[j] += v * one;                                                                \
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

DEFINE_SUMMARY(summary_f32, float, 32, summary_one_f)
DEFINE_SUMMARY(summary_f64, double, 32, summary_one_d)

/* finite_<T>(x, n): 1 when no element of x is NaN or Inf. Each lane sums x·0, which is 0 for a finite x and
   NaN for NaN or ±Inf (IEEE: 0·Inf is NaN), and never overflows, unlike a sum of squares; without -ffast-math
   the compiler keeps the product. One multiply-add a vector: a load-bound read, with no branch to stop early
   (a NaN is the rare case, and the caller counts it then). */
#define DEFINE_FINITE(NAME, T, LANES)                                                               \
    MULTIVERSION static int NAME(const T *x, Py_ssize_t n) {                                        \
        T acc[LANES] = {0};                                                                         \
        Py_ssize_t bulk = n - n % LANES;                                                            \
        for (Py_ssize_t i = 0; i < bulk; i += LANES)                                                \
            for (int j = 0; j < LANES; j++) acc[j] += x[i + j] * (T)0;                              \
        T total = 0;                                                                                \
        for (Py_ssize_t i = bulk; i < n; i++) total += x[i] * (T)0;                                 \
        for (int j = 0; j < LANES; j++) total += acc[j];                                            \
        return total == total;                                                                      \
    }

DEFINE_FINITE(finite_f32, float, 32)
DEFINE_FINITE(finite_f64, double, 16)

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

/* sgd_<T>(p, g, n, step): p[i] = p[i] + g[i]·step, rounded after the product and after the sum: the same two
   IEEE operations as the numpy path's `np.multiply(g, step, out=scratch); p += scratch`, so the parameters are
   bit for bit equal. Contraction into a fused multiply-add (one rounding) is switched off for this function:
   x86-64-v3 has FMA, and GCC contracts by default. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define NO_FP_CONTRACT /* clang and MSVC do not contract across statements unless told to */
#endif
#define DEFINE_SGD(NAME, T)                                                                         \
    MULTIVERSION NO_FP_CONTRACT static void NAME(T *restrict p, const T *restrict g, Py_ssize_t n, T step) { \
        for (Py_ssize_t i = 0; i < n; i++) {                                                        \
            T u = g[i] * step;                                                                      \
            p[i] = p[i] + u;                                                                        \
        }                                                                                           \
    }

DEFINE_SGD(sgd_f32, float)
DEFINE_SGD(sgd_f64, double)

/* tanh_grad_<T>(g, y, out, n): out = g·(1 − y·y), three roundings as numpy's `g * (1.0 - y * y)` (the operands
   in that order, so even a NaN's payload is the one numpy keeps); no contraction, as sgd above. */
#define DEFINE_TANH_GRAD(NAME, T)                                                                   \
    MULTIVERSION NO_FP_CONTRACT static void NAME(const T *restrict g, const T *restrict y, T *restrict out, \
                                                 Py_ssize_t n) {                                   \
        for (Py_ssize_t i = 0; i < n; i++) {                                                        \
            T v = y[i];                                                                             \
            T s = v * v;                                                                            \
            T d = (T)1 - s;                                                                         \
            out[i] = g[i] * d;                                                                      \
        }                                                                                           \
    }

DEFINE_TANH_GRAD(tanh_grad_f32, float)
DEFINE_TANH_GRAD(tanh_grad_f64, double)

/* add_row_<T>(x, b, rows, m): x[i, j] += b[j] (numpy's `x += b` for b of x's last length: one addition each).
   sum_rows_<T>(x, out, rows, m): out[j] = 0 + x[0, j] + x[1, j] + ... in row order, numpy's for a sum over
   axis 0 of a C-contiguous [rows, m >= 2] array (with m == 1 numpy sums pairwise: not taken). */
#define DEFINE_ROWS(ADD, SUM, T)                                                                    \
    MULTIVERSION static void ADD(T *restrict x, const T *restrict b, Py_ssize_t rows, Py_ssize_t m) { \
        for (Py_ssize_t i = 0; i < rows; i++, x += m)                                               \
            for (Py_ssize_t j = 0; j < m; j++) x[j] = x[j] + b[j];                                  \
    }                                                                                               \
    MULTIVERSION static void SUM(const T *restrict x, T *restrict out, Py_ssize_t rows, Py_ssize_t m) { \
        for (Py_ssize_t j = 0; j < m; j++) out[j] = 0; /* numpy starts from +0: -0.0s sum to +0.0 */\
        for (Py_ssize_t i = 0; i < rows; i++, x += m)                                               \
            for (Py_ssize_t j = 0; j < m; j++) out[j] = out[j] + x[j];                              \
    }

DEFINE_ROWS(add_row_f32, sum_rows_f32, float)
DEFINE_ROWS(add_row_f64, sum_rows_f64, double)

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

/* `obj`'s buffer into `view` when it is C-contiguous float32/float64: its kind (1, 2), else 0 with the
   exception set and nothing held */
static int take_floats(PyObject *obj, Py_buffer *view, const char *who) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return 0;
    int kind = float_kind(view, who);
    if (!kind) PyBuffer_Release(view);
    return kind;
}

/* summary_<T> of n elements of `view` by its kind; the GIL released only for a very long pass */
static void summarise(const Py_buffer *view, int kind, Py_ssize_t n, double out[4]) {
    PyThreadState *saved = n >= WATCH_RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
    if (kind == 1)
        summary_f32((const float *)view->buf, n, out);
    else
        summary_f64((const double *)view->buf, n, out);
    if (saved) PyEval_RestoreThread(saved);
}

static PyObject *summary(PyObject *self, PyObject *arg) {
    Py_buffer view;
    int kind = take_floats(arg, &view, "summary");
    if (!kind) return NULL;
    double out[4];
    summarise(&view, kind, view.len / view.itemsize, out);
    PyBuffer_Release(&view);
    return Py_BuildValue("(dddd)", out[0], out[1], out[2], out[3]);
}

/* the stats dict's keys, made once (PyInit__native) */
static PyObject *k_shape, *k_norm, *k_min, *k_max, *k_nan, *k_inf, *k_mean, *k_values;

static int set_item(PyObject *dict, PyObject *key, PyObject *value) { /* steals value */
    if (value == NULL) return -1;
    int rc = PyDict_SetItem(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *stats(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "stats(buffer, values_max_numel) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t values_max = PyLong_AsSsize_t(args[1]);
    if (values_max == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    int kind = take_floats(args[0], &view, "stats");
    if (!kind) return NULL;
    Py_ssize_t n = view.len / view.itemsize;
    double out[4];
    if (n > 0) summarise(&view, kind, n, out);
    if (n == 0 || !isfinite(out[0])) { /* empty, or NaN/Inf may be present: the caller's general path */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *shape = PyList_New(view.ndim), *dict = NULL;
    if (shape == NULL) goto fail;
    for (int d = 0; d < view.ndim; d++) {
        PyObject *len = PyLong_FromSsize_t(view.shape[d]);
        if (len == NULL) goto fail;
        PyList_SET_ITEM(shape, d, len);
    }
    dict = PyDict_New();
    if (dict == NULL) goto fail;
    /* the order of tensor_stats' Python path: shape, norm, min, max, nan, inf, mean[, values] */
    int rc = PyDict_SetItem(dict, k_shape, shape);
    Py_CLEAR(shape);
    if (rc < 0 || set_item(dict, k_norm, PyFloat_FromDouble(sqrt(out[0]))) < 0 ||
        set_item(dict, k_min, PyFloat_FromDouble(out[2])) < 0 ||
        set_item(dict, k_max, PyFloat_FromDouble(out[3])) < 0 ||
        set_item(dict, k_nan, PyLong_FromLong(0)) < 0 || set_item(dict, k_inf, PyLong_FromLong(0)) < 0 ||
        set_item(dict, k_mean, PyFloat_FromDouble(out[1] / (double)n)) < 0)
        goto fail;
    if (n <= values_max) { /* what ndarray.tolist gives: Python floats of each element */
        PyObject *values = PyList_New(n);
        if (values == NULL) goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            double v = kind == 1 ? (double)((const float *)view.buf)[i] : ((const double *)view.buf)[i];
            PyObject *f = PyFloat_FromDouble(v);
            if (f == NULL) {
                Py_DECREF(values);
                goto fail;
            }
            PyList_SET_ITEM(values, i, f);
        }
        if (set_item(dict, k_values, values) < 0) goto fail;
    }
    PyBuffer_Release(&view);
    return dict;
fail:
    Py_XDECREF(shape);
    Py_XDECREF(dict);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *all_finite(PyObject *self, PyObject *arg) {
    Py_buffer view;
    int kind = take_floats(arg, &view, "all_finite");
    if (!kind) return NULL;
    Py_ssize_t n = view.len / view.itemsize;
    /* the GIL stays held: a forward output's check takes microseconds, and the training thread needs it next */
    int ok = kind == 1 ? finite_f32((const float *)view.buf, n) : finite_f64((const double *)view.buf, n);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
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
    PyThreadState *saved = n >= WATCH_RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
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

/* ---- the LSTM cell over one time step (rtxviz.engine.ops.nn_recurrent, float32 on numpy) --------------------

   Why C: an LSTM layer's time loop is ~12 small ufunc calls per step on [N, H] slices (the activations, the cell
   update, their gradients); at batch 32 and hidden 128 each call's fixed cost is as large as its arithmetic. One
   call per step does the same element-wise work in one pass; the step's matmul stays numpy's (its BLAS).

   exp and tanh are Cephes' single-precision formulas (expf: x = n·ln2 + r, a degree-6 polynomial in r, 2^n put
   into the exponent bits; tanhf: an odd polynomial below |x| = 0.625, 1 - 2/(e^{2|x|} + 1) above), written
   without branches so that the compiler vectorises the loops: within a few ulp of libm's (tests/nn/test_rnn.py
   compares both with numpy's). NaN propagates; the sigmoid is 1/(1 + e^{-|x|}) or its complement, so it never
   overflows. float32 only: float64 layers keep the numpy path.

   no-trapping-math: GCC if-converts the selects below (and so vectorises the loops) only when it may evaluate
   both sides; the results are the same IEEE operations, nothing here reads the floating-point flags. */

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

static inline float exp_f32(float x) {
    /* x is kept within [ln FLT_MIN, 88] (2^n stays a normal float): below, e^x is FLT_MIN instead of a subnormal,
       above, 1.65e38 instead of an overflow (the gates' sigmoid and tanh read only e^{-|x|}). NaN fails every
       comparison and becomes the lower bound here: the result is set back to NaN below. */
    float xc = x >= -87.336544f ? (x <= 88.0f ? x : 88.0f) : -87.336544f;
    float n = floorf(xc * 1.44269504088896341f + 0.5f);
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x == x ? p * scale : x;
}

static inline float sigmoid_f32(float x) {
    float e = exp_f32(-fabsf(x)); /* in (0, 1]: no overflow on either side */
    float s = 1.0f / (1.0f + e);
    return x >= 0.0f ? s : (x == x ? e * s : x);
}

static inline float tanh_f32(float x) {
    float a = fabsf(x);
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float e = exp_f32(-2.0f * a);
    float large = (1.0f - e) / (1.0f + e);
    large = x < 0.0f ? -large : large;
    return a < 0.625f ? small : large;
}

/* Step t of the forward: z = gates[t] holds h_{t-1}·W_hhᵀ (the caller's matmul); adds xw[t], writes the activated
   gates i, f, g, o back into gates[t], c_t into out[t][:, P:] and o·tanh(c_t) into hr [N, H] (contiguous: the next
   step's matmul reads it faster than a strided slice of out), and with `into_out` into out[t][:, :P] too (P = H,
   no projection). c_{t-1} is out[t-1][:, P:], or c0 at t = 0. */
MULTIVERSION static void lstm_forward_f32(float *restrict gates, const float *restrict xw, float *restrict out,
                                          const float *restrict c0, float *restrict hr, int into_out, Py_ssize_t t,
                                          Py_ssize_t n, Py_ssize_t hidden, Py_ssize_t p) {
    Py_ssize_t h4 = 4 * hidden, row = p + hidden;
    for (Py_ssize_t b = 0; b < n; b++) {
        float *z = gates + (t * n + b) * h4;
        const float *x = xw + (t * n + b) * h4;
        float *c = out + (t * n + b) * row + p;
        const float *cp = t == 0 ? c0 + b * hidden : out + ((t - 1) * n + b) * row + p;
        float *h = hr + b * hidden;
        for (Py_ssize_t j = 0; j < hidden; j++) {
            float i = sigmoid_f32(z[j] + x[j]);
            float f = sigmoid_f32(z[hidden + j] + x[hidden + j]);
            float g = tanh_f32(z[2 * hidden + j] + x[2 * hidden + j]);
            float o = sigmoid_f32(z[3 * hidden + j] + x[3 * hidden + j]);
            z[j] = i;
            z[hidden + j] = f;
            z[2 * hidden + j] = g;
            z[3 * hidden + j] = o;
            float cn = f * cp[j] + i * g;
            c[j] = cn;
            h[j] = o * tanh_f32(cn);
        }
        if (into_out) memcpy(out + (t * n + b) * row, h, (size_t)hidden * sizeof(float));
    }
}

/* Step t of the backward (back-propagation through time), from the activated gates and the cells of the forward.
   dhr: the gradient reaching o·tanh(c_t): with `add_dy`, dh (the step's dh_t·W_hh from the caller's matmul) plus
   dy[t][:, :H] (no projection, P = H); else dh as given (the caller projected it). dc (in place): the gradient
   of c_t from the later steps; leaves that of c_{t-1}. Writes dz[t] = the gradient of the pre-activations. */
MULTIVERSION static void lstm_backward_f32(const float *restrict gates, const float *restrict out,
                                           const float *restrict c0, const float *restrict dy,
                                           const float *restrict dh, int add_dy, float *restrict dc,
                                           float *restrict dz, Py_ssize_t t, Py_ssize_t n, Py_ssize_t hidden,
                                           Py_ssize_t p) {
    Py_ssize_t h4 = 4 * hidden, row = p + hidden;
    for (Py_ssize_t b = 0; b < n; b++) {
        const float *a = gates + (t * n + b) * h4;
        const float *c = out + (t * n + b) * row + p;
        const float *cp = t == 0 ? c0 + b * hidden : out + ((t - 1) * n + b) * row + p;
        const float *gy = dy + (t * n + b) * row;
        const float *dhb = dh + b * (add_dy ? p : hidden);
        float *dcb = dc + b * hidden;
        float *d = dz + (t * n + b) * h4;
        for (Py_ssize_t j = 0; j < hidden; j++) {
            float i = a[j], f = a[hidden + j], g = a[2 * hidden + j], o = a[3 * hidden + j];
            float dhr = add_dy ? dhb[j] + gy[j] : dhb[j];
            float tc = tanh_f32(c[j]);
            float dcn = dcb[j] + gy[p + j] + dhr * o * (1.0f - tc * tc);
            d[j] = dcn * g * i * (1.0f - i);
            d[hidden + j] = dcn * cp[j] * f * (1.0f - f);
            d[2 * hidden + j] = dcn * i * (1.0f - g * g);
            d[3 * hidden + j] = dhr * tc * o * (1.0f - o);
            dcb[j] = dcn * f;
        }
    }
}

/* which: 0 exp, 1 tanh, 2 sigmoid of xs into ys (vectorised as the kernels are: what the tests compare) */
MULTIVERSION static void lstm_math_f32(long which, const float *restrict xs, float *restrict ys, Py_ssize_t count) {
    if (which == 0)
        for (Py_ssize_t k = 0; k < count; k++) ys[k] = exp_f32(xs[k]);
    else if (which == 1)
        for (Py_ssize_t k = 0; k < count; k++) ys[k] = tanh_f32(xs[k]);
    else
        for (Py_ssize_t k = 0; k < count; k++) ys[k] = sigmoid_f32(xs[k]);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* The buffers of one call, each C-contiguous float32 of exactly `count` elements (or the call fails with the
   name of the argument: these are internal entry points, but a wrong size must never write out of bounds). */
static int take_f32(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t count, const char *who,
                    const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return 0;
    if (float_kind(view, who) != 1) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: %s must be float32", who, name);
        PyBuffer_Release(view);
        return 0;
    }
    if (view->len / view->itemsize != count) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd elements, expected %zd", who, name,
                     view->len / view->itemsize, count);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static int lstm_dims(PyObject *const *args, Py_ssize_t first, Py_ssize_t d[5], const char *who) {
    for (int k = 0; k < 5; k++) {
        d[k] = PyLong_AsSsize_t(args[first + k]);
        if (d[k] == -1 && PyErr_Occurred()) return 0;
    }
    /* d = (t, steps, n, hidden, p) */
    if (d[1] <= 0 || d[2] <= 0 || d[3] <= 0 || d[4] <= 0 || d[0] < 0 || d[0] >= d[1]) {
        PyErr_Format(PyExc_ValueError, "%s: bad step or sizes (t=%zd, steps=%zd, n=%zd, hidden=%zd, p=%zd)", who,
                     d[0], d[1], d[2], d[3], d[4]);
        return 0;
    }
    return 1;
}

/* lstm_forward_step(gates, xw, out, c0, hr, into_out, t, steps, n, hidden, p) */
static PyObject *lstm_forward_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *who = "lstm_forward_step";
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "lstm_forward_step(gates, xw, out, c0, hr, into_out, t, steps, n, hidden, p)");
        return NULL;
    }
    Py_ssize_t d[5];
    if (!lstm_dims(args, 6, d, who)) return NULL;
    Py_ssize_t t = d[0], steps = d[1], n = d[2], hidden = d[3], p = d[4];
    int into_out = PyObject_IsTrue(args[5]);
    if (into_out < 0) return NULL;
    if (into_out && p != hidden) {
        PyErr_SetString(PyExc_ValueError, "lstm_forward_step: into_out needs p == hidden (no projection)");
        return NULL;
    }
    Py_buffer v[5];
    int taken = 0;
    PyObject *result = NULL;
    if (!take_f32(args[0], &v[0], 1, steps * n * 4 * hidden, who, "gates")) goto done;
    taken++;
    if (!take_f32(args[1], &v[1], 0, steps * n * 4 * hidden, who, "xw")) goto done;
    taken++;
    if (!take_f32(args[2], &v[2], 1, steps * n * (p + hidden), who, "out")) goto done;
    taken++;
    if (!take_f32(args[3], &v[3], 0, n * hidden, who, "c0")) goto done;
    taken++;
    if (!take_f32(args[4], &v[4], 1, n * hidden, who, "hr")) goto done;
    taken++;
    lstm_forward_f32((float *)v[0].buf, (const float *)v[1].buf, (float *)v[2].buf, (const float *)v[3].buf,
                     (float *)v[4].buf, into_out, t, n, hidden, p);
    result = Py_NewRef(Py_None);
done:
    while (taken > 0) PyBuffer_Release(&v[--taken]);
    return result;
}

/* lstm_backward_step(gates, out, c0, dy, dh, add_dy, dc, dz, t, steps, n, hidden, p) */
static PyObject *lstm_backward_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *who = "lstm_backward_step";
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError,
                        "lstm_backward_step(gates, out, c0, dy, dh, add_dy, dc, dz, t, steps, n, hidden, p)");
        return NULL;
    }
    Py_ssize_t d[5];
    if (!lstm_dims(args, 8, d, who)) return NULL;
    Py_ssize_t t = d[0], steps = d[1], n = d[2], hidden = d[3], p = d[4];
    int add_dy = PyObject_IsTrue(args[5]);
    if (add_dy < 0) return NULL;
    if (add_dy && p != hidden) {
        PyErr_SetString(PyExc_ValueError, "lstm_backward_step: add_dy needs p == hidden (no projection)");
        return NULL;
    }
    Py_buffer v[7];
    int taken = 0;
    PyObject *result = NULL;
    if (!take_f32(args[0], &v[0], 0, steps * n * 4 * hidden, who, "gates")) goto done;
    taken++;
    if (!take_f32(args[1], &v[1], 0, steps * n * (p + hidden), who, "out")) goto done;
    taken++;
    if (!take_f32(args[2], &v[2], 0, n * hidden, who, "c0")) goto done;
    taken++;
    if (!take_f32(args[3], &v[3], 0, steps * n * (p + hidden), who, "dy")) goto done;
    taken++;
    if (!take_f32(args[4], &v[4], 0, n * (add_dy ? p : hidden), who, "dh")) goto done;
    taken++;
    if (!take_f32(args[6], &v[5], 1, n * hidden, who, "dc")) goto done;
    taken++;
    if (!take_f32(args[7], &v[6], 1, steps * n * 4 * hidden, who, "dz")) goto done;
    taken++;
    lstm_backward_f32((const float *)v[0].buf, (const float *)v[1].buf, (const float *)v[2].buf,
                      (const float *)v[3].buf, (const float *)v[4].buf, add_dy, (float *)v[5].buf,
                      (float *)v[6].buf, t, n, hidden, p);
    result = Py_NewRef(Py_None);
done:
    while (taken > 0) PyBuffer_Release(&v[--taken]);
    return result;
}

/* exp_f32 / tanh_f32 / sigmoid_f32 over a float32 buffer into another of the same size (what the tests compare
   with numpy's functions over many values). which: 0 exp, 1 tanh, 2 sigmoid. */
static PyObject *lstm_math(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "lstm_math(which, x, out)");
        return NULL;
    }
    long which = PyLong_AsLong(args[0]);
    if (which == -1 && PyErr_Occurred()) return NULL;
    if (which < 0 || which > 2) {
        PyErr_Format(PyExc_ValueError, "lstm_math: which must be 0 (exp), 1 (tanh) or 2 (sigmoid), got %ld", which);
        return NULL;
    }
    Py_buffer x, out;
    if (PyObject_GetBuffer(args[1], &x, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = x.len / (x.itemsize ? x.itemsize : 1);
    if (float_kind(&x, "lstm_math") != 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "lstm_math: float32 only");
        PyBuffer_Release(&x);
        return NULL;
    }
    if (!take_f32(args[2], &out, 1, count, "lstm_math", "out")) {
        PyBuffer_Release(&x);
        return NULL;
    }
    lstm_math_f32(which, (const float *)x.buf, (float *)out.buf, count);
    result = Py_NewRef(Py_None);
    PyBuffer_Release(&out);
    PyBuffer_Release(&x);
    return result;
}

/* -- max pooling (rtxviz.engine.ops.nn_pool): the window maximum, and its gradient routed to each window's first
   maximum, one pass each over NCHW planes, float32 and float64, any kernel, stride, padding, dilation and ceil
   mode. numpy needs kh·kw strided passes for the maximum and, for the gradient, kh·kw comparisons, the
   first-hit masks and kh·kw multiplies (4-10x the time of these loops on conv_train's shapes).

   Semantics, shared with the numpy path: positions outside the input (padding, ceil mode's last windows) count
   as -inf; the maximum propagates NaN as numpy.maximum does; the gradient of a window goes to its first position
   in row-major window order whose value equals the window's maximum (none when the maximum is NaN; dropped when
   that position is padding), added into dx (overlapping windows accumulate). */
typedef struct {
    Py_ssize_t planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw;
} PoolGeom;

/* The loops below are branch-free selects, not ifs: on real data which element is a window's maximum is a coin
   toss, and a mispredicted branch per element made the first version 5x slower than numpy (`||` and `&&`
   are branches too: written with `|`, `&` and a NaN test first, GCC emits vector blends). nanmax(a, b) is
   numpy.maximum's NaN rule (either NaN gives NaN). The 2x2 stride-2 case without padding (almost every CNN's
   pooling) has its own loops: the maximum's vectorizes (MULTIVERSION); the gradient's is left to the baseline
   x86-64 code, which GCC 12 compiles to plain selects: its AVX2 and AVX-512 versions (moving each comparison
   through a mask register) took 1.5-4x as long, measured on conv_train's two poolings. */
/* 2x2 windows at stride 2, no padding or dilation, every window inside the input (not ceil mode's last ones) */
static int pool_is_22(const PoolGeom *g) {
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && !g->ph && !g->pw && g->dh == 1 && g->dw == 1 &&
           2 * g->ho <= g->h && 2 * g->wo <= g->w;
}

#define DEFINE_MAXPOOL(FWD, BWD, T)                                                                  \
    static inline T FWD##_nanmax(T a, T b) { return a != a ? a : (a > b ? a : b); }                   \
    MULTIVERSION static void FWD##_22(const T *restrict x, T *restrict out, const PoolGeom *g) {   \
        Py_ssize_t h = g->h, w = g->w, ho = g->ho, wo = g->wo;                                      \
        for (Py_ssize_t p = 0; p < g->planes; p++)                                                  \
            for (Py_ssize_t oh = 0; oh < ho; oh++) {                                                \
                const T *a = x + (p * h + 2 * oh) * w, *b = a + w;                                  \
                T *o = out + (p * ho + oh) * wo;                                                    \
                for (Py_ssize_t ow = 0; ow < wo; ow++)                                              \
                    o[ow] = FWD##_nanmax(FWD##_nanmax(a[2 * ow], a[2 * ow + 1]),                    \
                                         FWD##_nanmax(b[2 * ow], b[2 * ow + 1]));                   \
            }                                                                                       \
    }                                                                                               \
    static void FWD(const T *restrict x, T *restrict out, const PoolGeom *g) {                      \
        if (pool_is_22(g)) {                                                                        \
            FWD##_22(x, out, g);                                                                    \
            return;                                                                                 \
        }                                                                                           \
        for (Py_ssize_t p = 0; p < g->planes; p++) {                                                \
            const T *xp = x + p * g->h * g->w;                                                      \
            T *op = out + p * g->ho * g->wo;                                                        \
            for (Py_ssize_t oh = 0; oh < g->ho; oh++) {                                             \
                Py_ssize_t r0 = oh * g->sh - g->ph;                                                 \
                for (Py_ssize_t ow = 0; ow < g->wo; ow++) {                                         \
                    Py_ssize_t c0 = ow * g->sw - g->pw;                                             \
                    T best = (T)-INFINITY;                                                          \
                    for (Py_ssize_t i = 0; i < g->kh; i++) {                                        \
                        Py_ssize_t r = r0 + i * g->dh;                                              \
                        if (r < 0 || r >= g->h) continue; /* padding: -inf changes nothing */       \
                        const T *row = xp + r * g->w;                                               \
                        for (Py_ssize_t j = 0; j < g->kw; j++) {                                    \
                            Py_ssize_t c = c0 + j * g->dw;                                          \
                            if (c >= 0 && c < g->w) best = FWD##_nanmax(row[c], best);              \
                        }                                                                           \
                    }                                                                               \
                    op[oh * g->wo + ow] = best;                                                     \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
    __attribute__((noinline)) static void BWD##_22(const T *restrict dy, const T *restrict x,      \
                                                   const T *restrict best, T *restrict dx,          \
                                                   Py_ssize_t planes, Py_ssize_t h, Py_ssize_t w,   \
                                                   Py_ssize_t ho, Py_ssize_t wo) {                  \
        for (Py_ssize_t p = 0; p < planes; p++)                                                     \
            for (Py_ssize_t oh = 0; oh < ho; oh++) {                                                \
                Py_ssize_t at = (p * h + 2 * oh) * w, o = (p * ho + oh) * wo;                       \
                const T *a = x + at, *b = a + w;                                                    \
                T *da = dx + at, *db = da + w;                                                      \
                for (Py_ssize_t ow = 0; ow < wo; ow++) {                                            \
                    T m = best[o + ow], v = dy[o + ow];                                             \
                    int h0 = a[2 * ow] == m, h1 = (a[2 * ow + 1] == m) & !h0;                       \
                    int h2 = (b[2 * ow] == m) & !(h0 | h1), h3 = (b[2 * ow + 1] == m) & !(h0 | h1 | h2); \
                    T zero = 0; /* disjoint windows: every position is written once, not added to */ \
                    da[2 * ow] = h0 ? v : zero;                                                     \
                    da[2 * ow + 1] = h1 ? v : zero;                                                 \
                    db[2 * ow] = h2 ? v : zero;                                                     \
                    db[2 * ow + 1] = h3 ? v : zero;                                                 \
                }                                                                                   \
            }                                                                                       \
    }                                                                                               \
    static void BWD(const T *restrict dy, const T *restrict x, const T *restrict best, T *restrict dx, \
                    const PoolGeom *g) {                                                            \
        if (pool_is_22(g)) {                                                                        \
            BWD##_22(dy, x, best, dx, g->planes, g->h, g->w, g->ho, g->wo);                                                           \
            return;                                                                                 \
        }                                                                                           \
        for (Py_ssize_t p = 0; p < g->planes; p++) {                                                \
            const T *xp = x + p * g->h * g->w;                                                      \
            T *dp = dx + p * g->h * g->w;                                                           \
            Py_ssize_t o = p * g->ho * g->wo;                                                       \
            for (Py_ssize_t oh = 0; oh < g->ho; oh++) {                                             \
                Py_ssize_t r0 = oh * g->sh - g->ph;                                                 \
                for (Py_ssize_t ow = 0; ow < g->wo; ow++, o++) {                                    \
                    Py_ssize_t c0 = ow * g->sw - g->pw;                                             \
                    T b = best[o];                                                                  \
                    for (Py_ssize_t i = 0; i < g->kh; i++) {                                        \
                        Py_ssize_t r = r0 + i * g->dh;                                              \
                        int row_in = r >= 0 && r < g->h;                                            \
                        for (Py_ssize_t j = 0; j < g->kw; j++) {                                    \
                            Py_ssize_t c = c0 + j * g->dw;                                          \
                            int in = row_in && c >= 0 && c < g->w;                                  \
                            T v = in ? xp[r * g->w + c] : (T)-INFINITY;                             \
                            if (v == b) {                                                           \
                                if (in) dp[r * g->w + c] += dy[o];                                  \
                                goto next_##T;                                                      \
                            }                                                                       \
                        }                                                                           \
                    }                                                                               \
                next_##T:;                                                                          \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }

DEFINE_MAXPOOL(max_pool_fwd_f32, max_pool_bwd_f32, float)
DEFINE_MAXPOOL(max_pool_fwd_f64, max_pool_bwd_f64, double)

/* Geometry from args[first..first+12]: (planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw). */
static int pool_geom(PyObject *const *args, Py_ssize_t first, PoolGeom *g, const char *who) {
    Py_ssize_t *d = &g->planes;
    for (int k = 0; k < 13; k++) {
        d[k] = PyLong_AsSsize_t(args[first + k]);
        if (d[k] == -1 && PyErr_Occurred()) return 0;
    }
    if (g->planes < 0 || g->h < 1 || g->w < 1 || g->ho < 1 || g->wo < 1 || g->kh < 1 || g->kw < 1 || g->sh < 1 ||
        g->sw < 1 || g->ph < 0 || g->pw < 0 || g->dh < 1 || g->dw < 1) {
        PyErr_Format(PyExc_ValueError, "%s: bad geometry (planes=%zd, h=%zd, w=%zd, ho=%zd, wo=%zd, kernel %zdx%zd, "
                     "stride %zdx%zd, padding %zdx%zd, dilation %zdx%zd)", who, g->planes, g->h, g->w, g->ho,
                     g->wo, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw);
        return 0;
    }
    return 1;
}

/* A C-contiguous float buffer of `kind` (0: whichever, set on return) and `count` elements. */
static int take_float(PyObject *obj, Py_buffer *view, int writable, int *kind, Py_ssize_t count, const char *who,
                      const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return 0;
    int k = float_kind(view, who);
    if (!k || (*kind && k != *kind) || view->len / view->itemsize != count) {
        if (!PyErr_Occurred()) {
            if (*kind && k != *kind)
                PyErr_Format(PyExc_TypeError, "%s: %s has another float type than the first array", who, name);
            else
                PyErr_Format(PyExc_ValueError, "%s: %s has %zd elements, expected %zd", who, name,
                             view->len / view->itemsize, count);
        }
        PyBuffer_Release(view);
        return 0;
    }
    *kind = k;
    return 1;
}

/* max_pool2d_forward(x, out, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw) */
static PyObject *max_pool2d_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *who = "max_pool2d_forward";
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "max_pool2d_forward(x, out, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, "
                                         "dh, dw)");
        return NULL;
    }
    PoolGeom g;
    if (!pool_geom(args, 2, &g, who)) return NULL;
    Py_buffer v[2];
    int kind = 0;
    if (!take_float(args[0], &v[0], 0, &kind, g.planes * g.h * g.w, who, "x")) return NULL;
    if (!take_float(args[1], &v[1], 1, &kind, g.planes * g.ho * g.wo, who, "out")) {
        PyBuffer_Release(&v[0]);
        return NULL;
    }
    PyThreadState *saved = v[0].len / v[0].itemsize >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
    if (kind == 1)
        max_pool_fwd_f32((const float *)v[0].buf, (float *)v[1].buf, &g);
    else
        max_pool_fwd_f64((const double *)v[0].buf, (double *)v[1].buf, &g);
    if (saved) PyEval_RestoreThread(saved);
    PyBuffer_Release(&v[1]);
    PyBuffer_Release(&v[0]);
    Py_RETURN_NONE;
}

/* max_pool2d_scatter(dy, x, best, dx, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw): dx += dy at each
   window's first maximum (dx is not cleared here). */
static PyObject *max_pool2d_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *who = "max_pool2d_scatter";
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "max_pool2d_scatter(dy, x, best, dx, planes, h, w, ho, wo, kh, kw, sh, sw, "
                                         "ph, pw, dh, dw)");
        return NULL;
    }
    PoolGeom g;
    if (!pool_geom(args, 4, &g, who)) return NULL;
    Py_buffer v[4];
    int kind = 0, taken = 0;
    PyObject *result = NULL;
    Py_ssize_t out_n = g.planes * g.ho * g.wo, in_n = g.planes * g.h * g.w;
    if (!take_float(args[0], &v[0], 0, &kind, out_n, who, "dy")) goto done;
    taken++;
    if (!take_float(args[1], &v[1], 0, &kind, in_n, who, "x")) goto done;
    taken++;
    if (!take_float(args[2], &v[2], 0, &kind, out_n, who, "best")) goto done;
    taken++;
    if (!take_float(args[3], &v[3], 1, &kind, in_n, who, "dx")) goto done;
    taken++;
    if (v[3].buf == v[0].buf || v[3].buf == v[1].buf || v[3].buf == v[2].buf) {
        PyErr_Format(PyExc_ValueError, "%s: dx must not be one of the inputs", who);
        goto done;
    }
    PyThreadState *saved = in_n >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
    if (kind == 1)
        max_pool_bwd_f32((const float *)v[0].buf, (const float *)v[1].buf, (const float *)v[2].buf,
                         (float *)v[3].buf, &g);
    else
        max_pool_bwd_f64((const double *)v[0].buf, (const double *)v[1].buf, (const double *)v[2].buf,
                         (double *)v[3].buf, &g);
    if (saved) PyEval_RestoreThread(saved);
    result = Py_NewRef(Py_None);
done:
    while (taken > 0) PyBuffer_Release(&v[--taken]);
    return result;
}

/* -- col2im of a stride-1 convolution's "wide row" columns (rtxviz.engine.ops.nn_conv, Plan(wide=True)) ---------
   cols [c, kh, kw, n, run] (run = ho·wp: each kernel offset's rows span the padded width) are added back into the
   padded image at offset i·dh·wp + j·dw, and the image's interior is the input gradient. numpy does that as kh·kw
   adds into a zero [c, n, hp·wp] buffer (9 passes over memory for a 3x3 kernel) and one transposing copy to
   NCHW; this does the same adds one (channel, image) plane at a time in a buffer that stays in cache, and copies
   its interior into dx [n, c, h, w]. The same additions in the same order (k = 0 .. kh·kw - 1, from zero), so
   the sums are numpy's bit for bit. */
#define DEFINE_COL2IM(NAME, T)                                                                       \
    MULTIVERSION static void NAME(const T *restrict cols, T *restrict dx, T *restrict buf, Py_ssize_t c,  \
                                  Py_ssize_t n, Py_ssize_t h, Py_ssize_t w, Py_ssize_t hp, Py_ssize_t wp, \
                                  Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t dh, \
                                  Py_ssize_t dw, Py_ssize_t run) {                                  \
        Py_ssize_t kk = kh * kw, size = hp * wp + (kw - 1) * dw;                                    \
        for (Py_ssize_t ci = 0; ci < c; ci++)                                                       \
            for (Py_ssize_t ni = 0; ni < n; ni++) {                                                 \
                for (Py_ssize_t q = 0; q < size; q++) buf[q] = (T)0;                                \
                for (Py_ssize_t k = 0; k < kk; k++) {                                               \
                    T *to = buf + (k / kw) * dh * wp + (k % kw) * dw;                               \
                    const T *src = cols + ((ci * kk + k) * n + ni) * run;                           \
                    for (Py_ssize_t q = 0; q < run; q++) to[q] += src[q];                           \
                }                                                                                   \
                T *out = dx + (ni * c + ci) * h * w;                                                \
                for (Py_ssize_t r = 0; r < h; r++)                                                  \
                    memcpy(out + r * w, buf + (r + ph) * wp + pw, (size_t)w * sizeof(T));           \
            }                                                                                       \
    }

DEFINE_COL2IM(col2im_wide_f32, float)
DEFINE_COL2IM(col2im_wide_f64, double)

/* col2im_wide(cols, dx, c, n, h, w, hp, wp, ph, pw, kh, kw, dh, dw, ho): dx [n, c, h, w] is written whole. */
static PyObject *col2im_wide(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *who = "col2im_wide";
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "col2im_wide(cols, dx, c, n, h, w, hp, wp, ph, pw, kh, kw, dh, dw, ho)");
        return NULL;
    }
    Py_ssize_t d[13];
    for (int k = 0; k < 13; k++) {
        d[k] = PyLong_AsSsize_t(args[2 + k]);
        if (d[k] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_ssize_t c = d[0], n = d[1], h = d[2], w = d[3], hp = d[4], wp = d[5], ph = d[6], pw = d[7], kh = d[8],
               kw = d[9], dh = d[10], dw = d[11], ho = d[12];
    /* the geometry a stride-1 convolution has: every row read below lies inside its offset's run */
    if (c < 1 || n < 1 || h < 1 || w < 1 || kh < 1 || kw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0 ||
        hp != h + 2 * ph || wp != w + 2 * pw || ho != hp - dh * (kh - 1) || ho < 1 || wp - dw * (kw - 1) < 1) {
        PyErr_Format(PyExc_ValueError, "%s: bad geometry (c=%zd, n=%zd, h=%zd, w=%zd, hp=%zd, wp=%zd, padding "
                     "%zdx%zd, kernel %zdx%zd, dilation %zdx%zd, ho=%zd)", who, c, n, h, w, hp, wp, ph, pw, kh, kw,
                     dh, dw, ho);
        return NULL;
    }
    Py_buffer v[2];
    int kind = 0;
    Py_ssize_t run = ho * wp;
    if (!take_float(args[0], &v[0], 0, &kind, c * kh * kw * n * run, who, "cols")) return NULL;
    if (!take_float(args[1], &v[1], 1, &kind, n * c * h * w, who, "dx")) {
        PyBuffer_Release(&v[0]);
        return NULL;
    }
    void *buf = PyMem_RawMalloc((size_t)(hp * wp + (kw - 1) * dw) * (size_t)v[0].itemsize);
    if (buf == NULL) {
        PyBuffer_Release(&v[1]);
        PyBuffer_Release(&v[0]);
        return PyErr_NoMemory();
    }
    PyThreadState *saved = v[0].len / v[0].itemsize >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
    if (kind == 1)
        col2im_wide_f32((const float *)v[0].buf, (float *)v[1].buf, (float *)buf, c, n, h, w, hp, wp, ph, pw, kh,
                        kw, dh, dw, run);
    else
        col2im_wide_f64((const double *)v[0].buf, (double *)v[1].buf, (double *)buf, c, n, h, w, hp, wp, ph, pw,
                        kh, kw, dh, dw, run);
    if (saved) PyEval_RestoreThread(saved);
    PyMem_RawFree(buf);
    PyBuffer_Release(&v[1]);
    PyBuffer_Release(&v[0]);
    Py_RETURN_NONE;
}

/* tanh_grad(g, y, out) -> True when out = g·(1 − y²) was written; False (nothing written) unless all three are
   C-contiguous, aligned float32/float64 buffers of one format and shape, out overlapping neither input. */
static PyObject *tanh_grad(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "tanh_grad(g, y, out) takes 3 arguments");
        return NULL;
    }
    Py_buffer v[3];
    int got = 0, done = 0;
    for (; got < 3; got++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (got == 2 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[got], &v[got], flags) < 0) break;
    }
    if (got == 3) {
        int kind = float_kind(&v[0], "tanh_grad");
        int fits = kind && float_kind(&v[1], "tanh_grad") == kind && float_kind(&v[2], "tanh_grad") == kind;
        for (int k = 1; fits && k < 3; k++) {
            fits = v[k].ndim == v[0].ndim && v[k].len == v[0].len;
            for (int i = 0; fits && i < v[0].ndim; i++) fits = v[k].shape[i] == v[0].shape[i];
        }
        const char *o = v[2].buf;
        for (int k = 0; fits && k < 2; k++) {
            const char *a = v[k].buf;
            fits = !(o < a + v[k].len && a < o + v[2].len);
        }
        if (fits) {
            Py_ssize_t n = v[0].len / v[0].itemsize;
            PyThreadState *saved = n >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
            if (kind == 1)
                tanh_grad_f32((const float *)v[0].buf, (const float *)v[1].buf, (float *)v[2].buf, n);
            else
                tanh_grad_f64((const double *)v[0].buf, (const double *)v[1].buf, (double *)v[2].buf, n);
            if (saved) PyEval_RestoreThread(saved);
            done = 1;
        }
    }
    PyErr_Clear(); /* a buffer the kernel does not take: the caller's numpy expression does the work */
    while (got > 0) PyBuffer_Release(&v[--got]);
    return PyBool_FromLong(done);
}

/* Two buffers for the row kernels: a (written when `a_writable`) and b, one float format, C-contiguous, apart. */
static int take_pair(PyObject *a_obj, PyObject *b_obj, int a_writable, Py_buffer *a, Py_buffer *b, int *kind) {
    if (PyObject_GetBuffer(a_obj, a, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (a_writable ? PyBUF_WRITABLE : 0)) < 0)
        return 0;
    if (PyObject_GetBuffer(b_obj, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (a_writable ? 0 : PyBUF_WRITABLE)) < 0) {
        PyBuffer_Release(a);
        return 0;
    }
    *kind = float_kind(a, "rows");
    const char *pa = a->buf, *pb = b->buf;
    if (*kind && float_kind(b, "rows") == *kind && a->ndim >= 1 && !(pa < pb + b->len && pb < pa + a->len))
        return 1;
    PyBuffer_Release(b);
    PyBuffer_Release(a);
    return 0;
}

/* add_row(x, b) -> bool: x += b for b 1-D of x's last length (float32/float64, C-contiguous); False untouched. */
static PyObject *add_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_row(x, b) takes 2 arguments");
        return NULL;
    }
    Py_buffer x, b;
    int kind, done = 0;
    if (take_pair(args[0], args[1], 1, &x, &b, &kind)) {
        Py_ssize_t m = x.shape[x.ndim - 1];
        if (b.ndim == 1 && b.shape[0] == m && m > 0) {
            Py_ssize_t rows = x.len / x.itemsize / m;
            if (kind == 1)
                add_row_f32((float *)x.buf, (const float *)b.buf, rows, m);
            else
                add_row_f64((double *)x.buf, (const double *)b.buf, rows, m);
            done = 1;
        }
        PyBuffer_Release(&b);
        PyBuffer_Release(&x);
    }
    PyErr_Clear();
    return PyBool_FromLong(done);
}

/* sum_rows(x, out) -> bool: out = x summed over axis 0 in row order, x 2-D [rows >= 1, m >= 2], out [m]. */
static PyObject *sum_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "sum_rows(x, out) takes 2 arguments");
        return NULL;
    }
    Py_buffer x, out;
    int kind, done = 0;
    if (take_pair(args[0], args[1], 0, &x, &out, &kind)) {
        if (x.ndim == 2 && x.shape[0] >= 1 && x.shape[1] >= 2 && out.ndim == 1 && out.shape[0] == x.shape[1]) {
            if (kind == 1)
                sum_rows_f32((const float *)x.buf, (float *)out.buf, x.shape[0], x.shape[1]);
            else
                sum_rows_f64((const double *)x.buf, (double *)out.buf, x.shape[0], x.shape[1]);
            done = 1;
        }
        PyBuffer_Release(&out);
        PyBuffer_Release(&x);
    }
    PyErr_Clear();
    return PyBool_FromLong(done);
}

/* One pair of sgd_plain: 1 when updated, 0 when numpy must do it (an error is cleared, not raised). */
static int sgd_pair(PyObject *param, PyObject *grad, double step) {
    Py_buffer p, g;
    if (PyObject_GetBuffer(param, &p, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (PyObject_GetBuffer(grad, &g, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&p);
        return 0;
    }
    int done = 0;
    int kind = float_kind(&p, "sgd_plain");
    /* the same format and shape (numpy would cast or broadcast: its path does that), and no overlap (the
       numpy path reads the whole gradient before it writes the parameter) */
    int fits = kind && float_kind(&g, "sgd_plain") == kind && p.ndim == g.ndim && p.len == g.len;
    for (int i = 0; fits && i < p.ndim; i++) fits = p.shape[i] == g.shape[i];
    const char *pa = p.buf, *ga = g.buf;
    if (fits && !(pa < ga + g.len && ga < pa + p.len)) {
        Py_ssize_t n = p.len / p.itemsize;
        PyThreadState *saved = n >= RELEASE_GIL_FROM ? PyEval_SaveThread() : NULL;
        if (kind == 1)
            sgd_f32((float *)p.buf, (const float *)g.buf, n, (float)step); /* numpy's double -> float rounding */
        else
            sgd_f64((double *)p.buf, (const double *)g.buf, n, step);
        if (saved) PyEval_RestoreThread(saved);
        done = 1;
    }
    PyErr_Clear(); /* float_kind's TypeError/ValueError: that pair goes to numpy */
    PyBuffer_Release(&g);
    PyBuffer_Release(&p);
    return done;
}

/* sgd_plain(params, grads, step) -> list of the indices left to numpy */
static PyObject *sgd_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[0]) || !PyList_Check(args[1]) ||
        PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1])) {
        PyErr_SetString(PyExc_TypeError, "sgd_plain(params, grads, step): two lists of one length and a float");
        return NULL;
    }
    double step = PyFloat_AsDouble(args[2]);
    if (step == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *left = PyList_New(0);
    if (left == NULL) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(args[0]);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (sgd_pair(PyList_GET_ITEM(args[0], i), PyList_GET_ITEM(args[1], i), step)) continue;
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL || PyList_Append(left, index) < 0) {
            Py_XDECREF(index);
            Py_DECREF(left);
            return NULL;
        }
        Py_DECREF(index);
    }
    return left;
}

/* -- saved_entries: the `saved` field of a node event ------------------------------------------------------ */
static PyObject *k_role, *k_bytes, *k_dtype, *k_index, *k_alias, *k_node, *s_input, *s_output, *s_state,
    *a_dtype, *a_nbytes, *a_base, *a_data, *a_name;

/* the end of `array`'s .base chain (rtxviz.engine.memory.root_of): a new reference */
static PyObject *root_buffer(PyObject *array) {
    Py_INCREF(array);
    PyObject *base = PyObject_GetAttr(array, a_base);
    if (base == NULL) {
        Py_DECREF(array);
        return NULL;
    }
    while (base != Py_None) {
        int has = PyObject_HasAttr(base, a_nbytes);
        if (!has) break;
        Py_SETREF(array, base);
        base = PyObject_GetAttr(array, a_base);
        if (base == NULL) { /* no .base: the chain ends at array */
            PyErr_Clear();
            return array;
        }
    }
    Py_DECREF(base);
    return array;
}

/* one entry (EventHook._saved_entry): appended to `out`; 0, or -1 with an exception */
static int saved_entry(PyObject *out, PyObject *nid, PyObject *role, Py_ssize_t index, PyObject *array,
                       PyObject *buffers, PyObject *dtype_names, Py_ssize_t buffers_max) {
    PyObject *e = NULL, *dtype = NULL, *root = NULL, *key = NULL, *here = NULL, *ref = NULL, *pair = NULL;
    int rc = -1;
    dtype = PyObject_GetAttr(array, a_dtype);
    if (dtype == NULL) goto done;
    PyObject *name = PyDict_GetItemWithError(dtype_names, dtype); /* borrowed */
    if (name == NULL) {
        if (PyErr_Occurred()) goto done;
        PyObject *fresh = PyObject_GetAttr(dtype, a_name);
        if (fresh == NULL) goto done;
        int bad = PyDict_SetItem(dtype_names, dtype, fresh);
        Py_DECREF(fresh);
        if (bad < 0) goto done;
        name = PyDict_GetItemWithError(dtype_names, dtype);
        if (name == NULL) goto done;
    }
    PyObject *shape = PyObject_GetAttr(array, k_shape);
    if (shape == NULL) goto done;
    PyObject *shape_list = PySequence_List(shape);
    Py_DECREF(shape);
    if (shape_list == NULL) goto done;
    e = PyDict_New();
    if (e == NULL) {
        Py_DECREF(shape_list);
        goto done;
    }
    if (PyDict_SetItem(e, k_role, role) < 0 || set_item(e, k_bytes, PyObject_GetAttr(array, a_nbytes)) < 0 ||
        set_item(e, k_shape, shape_list) < 0 || PyDict_SetItem(e, k_dtype, name) < 0)
        goto done;
    if (index >= 0 && set_item(e, k_index, PyLong_FromSsize_t(index)) < 0) goto done;
    root = root_buffer(array);
    if (root == NULL) goto done;
    key = PyLong_FromVoidPtr(root); /* id(root) */
    if (key == NULL) goto done;
    PyObject *seen = PyDict_GetItemWithError(buffers, key); /* borrowed: (weak reference, where) */
    if (seen == NULL && PyErr_Occurred()) goto done;
    if (seen != NULL && PyTuple_Check(seen) && PyTuple_GET_SIZE(seen) == 2 &&
        PyWeakref_Check(PyTuple_GET_ITEM(seen, 0)) && PyWeakref_GetObject(PyTuple_GET_ITEM(seen, 0)) == root) {
        if (PyDict_SetItem(e, k_alias, PyTuple_GET_ITEM(seen, 1)) < 0) goto done;
    } else {
        if (PyDict_GET_SIZE(buffers) >= buffers_max) PyDict_Clear(buffers);
        here = PyDict_New();
        if (here == NULL || PyDict_SetItem(here, k_node, nid) < 0 || PyDict_SetItem(here, k_role, role) < 0)
            goto done;
        if (index >= 0 && set_item(here, k_index, PyLong_FromSsize_t(index)) < 0) goto done;
        ref = PyWeakref_NewRef(root, NULL);
        if (ref == NULL) { /* an array type without weak references: no alias is reported for it */
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto done;
            PyErr_Clear();
        } else {
            pair = PyTuple_Pack(2, ref, here);
            if (pair == NULL || PyDict_SetItem(buffers, key, pair) < 0) goto done;
        }
    }
    rc = PyList_Append(out, e);
done:
    Py_XDECREF(e);
    Py_XDECREF(dtype);
    Py_XDECREF(root);
    Py_XDECREF(key);
    Py_XDECREF(here);
    Py_XDECREF(ref);
    Py_XDECREF(pair);
    return rc;
}

/* saved_entries(nid, inputs, out_data, states, buffers, dtype_names, buffers_max) -> list */
static PyObject *saved_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyDict_Check(args[4]) || !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "saved_entries(nid, inputs, out_data, states, buffers: dict, dtype_names: dict, buffers_max)");
        return NULL;
    }
    PyObject *nid = args[0], *inputs = args[1], *out_data = args[2], *states = args[3];
    PyObject *buffers = args[4], *dtype_names = args[5];
    Py_ssize_t buffers_max = PyLong_AsSsize_t(args[6]);
    if (buffers_max == -1 && PyErr_Occurred()) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    if (inputs != Py_None) {
        PyObject *seq = PySequence_Fast(inputs, "saved_entries: inputs must be a sequence");
        if (seq == NULL) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
            if (t == Py_None) continue;
            PyObject *data = PyObject_GetAttr(t, a_data);
            int bad = data == NULL || saved_entry(out, nid, s_input, i, data, buffers, dtype_names, buffers_max) < 0;
            Py_XDECREF(data);
            if (bad) {
                Py_DECREF(seq);
                goto fail;
            }
        }
        Py_DECREF(seq);
    }
    if (out_data != Py_None && saved_entry(out, nid, s_output, -1, out_data, buffers, dtype_names, buffers_max) < 0)
        goto fail;
    if (states != Py_None) {
        PyObject *seq = PySequence_Fast(states, "saved_entries: states must be a sequence");
        if (seq == NULL) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t j = 0; j < n; j++) {
            if (saved_entry(out, nid, s_state, j, PySequence_Fast_GET_ITEM(seq, j), buffers, dtype_names,
                            buffers_max) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
        }
        Py_DECREF(seq);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"summary", summary, METH_O,
     "summary(buffer) -> (sum of squares, sum, min, max) of a C-contiguous float32/float64 buffer, in one pass.\n"
     "min and max skip NaN; a non-finite sum of squares means NaN/Inf may be present."},
    {"stats", (PyCFunction)(void (*)(void))stats, METH_FASTCALL,
     "stats(buffer, values_max_numel) -> dict | None: tensor_stats' summary of a C-contiguous float32/float64\n"
     "buffer whose sum of squares is finite (None otherwise, and for an empty one), in one pass."},
    {"saved_entries", (PyCFunction)(void (*)(void))saved_entries, METH_FASTCALL,
     "saved_entries(nid, inputs, out_data, states, buffers, dtype_names, buffers_max) -> list: a node event's\n"
     "`saved` entries and its alias table's updates, as rtxviz.events.hook.EventHook._saved builds them."},
    {"all_finite", all_finite, METH_O,
     "all_finite(buffer) -> bool: no NaN or Inf in a C-contiguous float32/float64 buffer (one pass, x*0 summed)."},
    {"add_measured", (PyCFunction)(void (*)(void))add_measured, METH_FASTCALL,
     "add_measured(param, update) -> (sum of squares of param after, of update): param += update in place, in\n"
     "one pass. Both C-contiguous, the same float32/float64 format and size, not overlapping."},
    {"lstm_forward_step", (PyCFunction)(void (*)(void))lstm_forward_step, METH_FASTCALL,
     "lstm_forward_step(gates, xw, out, c0, hr, into_out, t, steps, n, hidden, p): step t of an LSTM layer's forward after\n"
     "its matmul (float32; see rtxviz.engine.ops.nn_recurrent)."},
    {"lstm_backward_step", (PyCFunction)(void (*)(void))lstm_backward_step, METH_FASTCALL,
     "lstm_backward_step(gates, out, c0, dy, dh, add_dy, dc, dz, t, steps, n, hidden, p): step t of an LSTM\n"
     "layer's backward through time, before its matmul (float32)."},
    {"lstm_math", (PyCFunction)(void (*)(void))lstm_math, METH_FASTCALL,
     "lstm_math(which, x, out): the LSTM kernels' exp (0), tanh (1) or sigmoid (2) of float32 x into out."},
    {"max_pool2d_forward", (PyCFunction)(void (*)(void))max_pool2d_forward, METH_FASTCALL,
     "max_pool2d_forward(x, out, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw): each window's maximum of\n"
     "the NCHW planes of x into out (float32/float64, C-contiguous; padding counts as -inf)."},
    {"max_pool2d_scatter", (PyCFunction)(void (*)(void))max_pool2d_scatter, METH_FASTCALL,
     "max_pool2d_scatter(dy, x, best, dx, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw): dx += dy at each\n"
     "window's first position whose value equals best (the window maximum)."},
    {"col2im_wide", (PyCFunction)(void (*)(void))col2im_wide, METH_FASTCALL,
     "col2im_wide(cols, dx, c, n, h, w, hp, wp, ph, pw, kh, kw, dh, dw, ho): a stride-1 convolution's wide-row\n"
     "columns [c, kh, kw, n, ho*wp] added back into the input gradient dx [n, c, h, w] (written whole)."},
    {"sgd_plain", (PyCFunction)(void (*)(void))sgd_plain, METH_FASTCALL,
     "sgd_plain(params, grads, step) -> [indices left]: params[i] += grads[i] * step in place, one pass each, the\n"
     "product and the sum each rounded (numpy's two operations). A pair that is not two C-contiguous, aligned,\n"
     "non-overlapping float32/float64 buffers of one format and shape is left alone and its index returned."},
    {"tanh_grad", (PyCFunction)(void (*)(void))tanh_grad, METH_FASTCALL,
     "tanh_grad(g, y, out) -> bool: out = g * (1 - y*y) in one pass (numpy's three roundings) when the three are\n"
     "C-contiguous float32/float64 buffers of one format and shape, out apart from both; else False, untouched."},
    {"add_row", (PyCFunction)(void (*)(void))add_row, METH_FASTCALL,
     "add_row(x, b) -> bool: x += b in place for b 1-D of x's last length (one float format, C-contiguous, apart);\n"
     "False, untouched, otherwise."},
    {"sum_rows", (PyCFunction)(void (*)(void))sum_rows, METH_FASTCALL,
     "sum_rows(x, out) -> bool: out = x.sum(axis=0) for x [rows >= 1, m >= 2], added in row order as numpy does\n"
     "for that layout; False, untouched, otherwise."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rtxviz._native",
                                    "Fused memory passes for watched runs; the LSTM step, max-pooling and col2im kernels (see _native.c).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject **keys[] = {&k_shape, &k_norm, &k_min, &k_max, &k_nan, &k_inf, &k_mean, &k_values};
    const char *names[] = {"shape", "norm", "min", "max", "nan", "inf", "mean", "values"};
    for (int i = 0; i < 8; i++)
        if ((*keys[i] = PyUnicode_InternFromString(names[i])) == NULL) return NULL;
    PyObject **more[] = {&k_role, &k_bytes, &k_dtype, &k_index, &k_alias, &k_node, &s_input, &s_output, &s_state,
                         &a_dtype, &a_nbytes, &a_base, &a_data, &a_name};
    const char *more_names[] = {"role", "bytes", "dtype", "index", "alias", "node", "input", "output", "state",
                                "dtype", "nbytes", "base", "data", "name"};
    for (int i = 0; i < 14; i++)
        if ((*more[i] = PyUnicode_InternFromString(more_names[i])) == NULL) return NULL;
    return PyModule_Create(&module);
}
