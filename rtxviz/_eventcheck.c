/* rtxviz._eventcheck: the server's check of decoded events against the schema's models, without making copies.

   Why C: the server validates every event it ingests. pydantic's strict validation of a node event builds a
   validated copy of it (dicts, lists, strings) that the server throws away: about 4 us an event, a third of the
   ingest path's CPU. This module only walks the decoded objects and answers yes or "not sure".

   check(events, specs) -> the indices of the events it could not confirm (usually none): a wrong type, a missing
   or unknown field, a bound exceeded, a kind without a spec (the generic kinds), an integer beyond 64 bits, a
   dict subclass... The caller runs pydantic on those, which is the authority: it names the first fault, or
   accepts what this module was too cautious to. So this module may refuse
   what pydantic accepts, never the reverse; tests/web/test_event_check.py compares the two on generated events.

   The specs are built in Python from the TypedDicts in rtxviz/schema.py (rtxviz/event_specs.py): nested tuples
   whose first item is one of the codes below. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum {
    ANY = 0,       /* (ANY,) */
    STR = 1,       /* (STR, max_length or -1) */
    INT = 2,       /* (INT, ge, le): an int (not a bool) of 64 bits within [ge, le]; a bound may be None */
    FLOAT = 3,     /* (FLOAT,): a float or an int (pydantic's strict float takes ints), not a bool */
    BOOL = 4,      /* (BOOL,) */
    NONE = 5,      /* (NONE,) */
    LITERAL = 6,   /* (LITERAL, (value, ...)): equal to one of them and of exactly its type */
    LIST = 7,      /* (LIST, item spec, max_length or -1) */
    DICT = 8,      /* (DICT,): a dict (JSON keys are strings), any values */
    TYPED = 9,     /* (TYPED, {name: spec}, (required names...), extra allowed 0/1) */
    UNION = 10,    /* (UNION, (spec, ...)) */
};

/* 1: `obj` matches `spec`; 0: not confirmed; -1: an error (a malformed spec). Depth is bounded by the caller's
   nesting check (ingest refuses events nesting deeper than 64 levels) and by the specs, which do not recurse. */
static int match(PyObject *obj, PyObject *spec);

static int spec_code(PyObject *spec, Py_ssize_t need) {
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) < need) {
        PyErr_SetString(PyExc_ValueError, "_eventcheck: malformed spec");
        return -1;
    }
    long code = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    if (code == -1 && PyErr_Occurred()) return -1;
    return (int)code;
}

static int match_int(PyObject *obj, PyObject *spec) {
    if (!PyLong_CheckExact(obj)) return 0; /* bool is a subclass of int: refused here */
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow) return 0; /* beyond int64: pydantic decides */
    if (v == -1 && PyErr_Occurred()) return -1;
    PyObject *ge = PyTuple_GET_ITEM(spec, 1), *le = PyTuple_GET_ITEM(spec, 2); /* None: no bound */
    if (ge != Py_None) {
        long long lo = PyLong_AsLongLong(ge);
        if (lo == -1 && PyErr_Occurred()) return -1;
        if (v < lo) return 0;
    }
    if (le != Py_None) {
        long long hi = PyLong_AsLongLong(le);
        if (hi == -1 && PyErr_Occurred()) return -1;
        if (v > hi) return 0;
    }
    return 1;
}

static int match_typed(PyObject *obj, PyObject *spec) {
    if (!PyDict_CheckExact(obj)) return 0;
    PyObject *fields = PyTuple_GET_ITEM(spec, 1), *required = PyTuple_GET_ITEM(spec, 2);
    long extra = PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
    if (extra == -1 && PyErr_Occurred()) return -1;
    if (!PyDict_CheckExact(fields) || !PyTuple_CheckExact(required)) {
        PyErr_SetString(PyExc_ValueError, "_eventcheck: malformed typed-dict spec");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(required); i++) {
        int has = PyDict_Contains(obj, PyTuple_GET_ITEM(required, i));
        if (has <= 0) return has;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        PyObject *field = PyDict_GetItemWithError(fields, key); /* borrowed */
        if (field == NULL) {
            if (PyErr_Occurred()) return -1;
            if (!extra) return 0; /* an unknown field */
            continue;
        }
        int ok = match(value, field);
        if (ok <= 0) return ok;
    }
    return 1;
}

static int match(PyObject *obj, PyObject *spec) {
    int code = spec_code(spec, 1);
    if (code < 0) return -1;
    switch (code) {
    case ANY:
        return 1;
    case STR: {
        if (!PyUnicode_CheckExact(obj)) return 0;
        if (spec_code(spec, 2) < 0) return -1;
        Py_ssize_t max = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1));
        if (max == -1 && PyErr_Occurred()) return -1;
        return max < 0 || PyUnicode_GET_LENGTH(obj) <= max; /* characters, as pydantic counts */
    }
    case INT:
        if (spec_code(spec, 3) < 0) return -1;
        return match_int(obj, spec);
    case FLOAT:
        return PyFloat_CheckExact(obj) || PyLong_CheckExact(obj);
    case BOOL:
        return PyBool_Check(obj);
    case NONE:
        return obj == Py_None;
    case LITERAL: {
        if (spec_code(spec, 2) < 0) return -1;
        PyObject *values = PyTuple_GET_ITEM(spec, 1);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++) {
            PyObject *want = PyTuple_GET_ITEM(values, i);
            if (Py_TYPE(want) != Py_TYPE(obj)) continue; /* 1 is not True, 1.0 is not 1 */
            int eq = PyObject_RichCompareBool(obj, want, Py_EQ);
            if (eq != 0) return eq;
        }
        return 0;
    }
    case LIST: {
        if (!PyList_CheckExact(obj)) return 0;
        if (spec_code(spec, 3) < 0) return -1;
        Py_ssize_t max = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
        if (max == -1 && PyErr_Occurred()) return -1;
        Py_ssize_t n = PyList_GET_SIZE(obj);
        if (max >= 0 && n > max) return 0;
        PyObject *item = PyTuple_GET_ITEM(spec, 1);
        for (Py_ssize_t i = 0; i < n; i++) {
            int ok = match(PyList_GET_ITEM(obj, i), item);
            if (ok <= 0) return ok;
        }
        return 1;
    }
    case DICT:
        return PyDict_CheckExact(obj);
    case TYPED:
        if (spec_code(spec, 4) < 0) return -1;
        return match_typed(obj, spec);
    case UNION: {
        if (spec_code(spec, 2) < 0) return -1;
        PyObject *options = PyTuple_GET_ITEM(spec, 1);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(options); i++) {
            int ok = match(obj, PyTuple_GET_ITEM(options, i));
            if (ok != 0) return ok;
        }
        return 0;
    }
    default:
        PyErr_Format(PyExc_ValueError, "_eventcheck: unknown spec code %d", code);
        return -1;
    }
}

static PyObject *check(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyList_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "check(events: list, specs: dict[kind, spec])");
        return NULL;
    }
    PyObject *events = args[0], *specs = args[1];
    PyObject *unconfirmed = PyList_New(0);
    if (unconfirmed == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        PyObject *kind = PyDict_CheckExact(ev) ? PyDict_GetItemString(ev, "kind") : NULL; /* borrowed */
        PyObject *spec = (kind != NULL && PyUnicode_CheckExact(kind)) ? PyDict_GetItemWithError(specs, kind) : NULL;
        int ok = PyErr_Occurred() ? -1 : spec == NULL ? 0 : match(ev, spec);
        if (ok < 0) {
            Py_DECREF(unconfirmed);
            return NULL;
        }
        if (!ok) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(unconfirmed, index) < 0) {
                Py_XDECREF(index);
                Py_DECREF(unconfirmed);
                return NULL;
            }
            Py_DECREF(index);
        }
    }
    return unconfirmed;
}

static PyMethodDef methods[] = {
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL,
     "check(events, specs) -> [indices of the events not confirmed to match the spec of their kind] (pydantic\n"
     "decides those). specs: rtxviz.event_specs.SPECS."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rtxviz._eventcheck",
                                    "The server's copy-free check of decoded events (see _eventcheck.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__eventcheck(void) { return PyModule_Create(&module); }
