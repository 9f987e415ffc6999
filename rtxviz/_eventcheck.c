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
#include <math.h>
#include <stdint.h>
#include <string.h>

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


/* -- scan: the same check straight from the bytes of NDJSON lines, without decoding them ----------------------

   scan(lines, specs, wanted, loads) reads each line (bytes) as strict JSON (RFC 8259 as orjson reads it: UTF-8,
   no lone surrogate escapes, no control characters in strings, numbers within the float range) and checks it
   against the spec of its kind, building no Python object but the few the server needs: its kind, its step, its
   text, and, for the kinds in `wanted`, a dict of only the top-level fields named there (what the per-step
   history reads; `loads` decodes those values that are objects, lists or escaped strings). It returns
   (rows, decoded): rows [(kind, step, text)], decoded [that dict, or None for a kind not in wanted], or None
   when any line is not confirmed: the caller then decodes the whole batch with orjson and validates it as
   before, so every refusal and its message stay pydantic's. As `check`, it may leave to the caller what is
   valid (a duplicate key, an escaped key, an integer beyond 64 bits, a generic kind, nesting past 64 levels),
   never the reverse; tests/web/test_event_scan.py compares it with orjson + pydantic on generated lines. */

typedef struct {
    const unsigned char *p, *end;
} Cur;

typedef struct {
    const unsigned char *start; /* after the opening quote */
    Py_ssize_t len;             /* raw bytes up to the closing quote */
    Py_ssize_t chars;           /* code points once decoded */
    int escaped;
} Str;

typedef struct {
    const unsigned char *start;
    Py_ssize_t len;
    int is_int, fits; /* an integer token, and it fits in 64 bits */
    long long value;
} Num;

#define SCAN_MAX_DEPTH 64
#define SCAN_MAX_KEYS 64

static void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *out) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

/* a string at c->p (its opening quote): 1 and c->p past its closing quote, or 0 */
static int scan_string(Cur *c, Str *s) {
    const unsigned char *p = c->p + 1, *end = c->end;
    s->start = p;
    s->chars = 0;
    s->escaped = 0;
    while (p < end) {
        unsigned char ch = *p;
        if (ch == '"') {
            s->len = p - s->start;
            c->p = p + 1;
            return 1;
        }
        if (ch < 0x20) return 0;
        if (ch == '\\') {
            s->escaped = 1;
            if (end - p < 2) return 0;
            unsigned char e = p[1];
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else if (e == 'u') {
                unsigned u;
                if (!hex4(p + 2, end, &u)) return 0;
                p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) return 0; /* a low surrogate alone */
                if (u >= 0xD800 && u <= 0xDBFF) {         /* a high one: its low one must follow */
                    unsigned low;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &low)) return 0;
                    if (low < 0xDC00 || low > 0xDFFF) return 0;
                    p += 6;
                }
            } else {
                return 0;
            }
            s->chars++;
            continue;
        }
        if (ch < 0x80) {
            p++;
        } else if (ch >= 0xC2 && ch <= 0xDF) {
            if (end - p < 2 || (p[1] & 0xC0) != 0x80) return 0;
            p += 2;
        } else if (ch >= 0xE0 && ch <= 0xEF) {
            if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
            if (ch == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
            if (ch == 0xED && p[1] > 0x9F) return 0; /* a surrogate */
            p += 3;
        } else if (ch >= 0xF0 && ch <= 0xF4) {
            if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
            if (ch == 0xF0 && p[1] < 0x90) return 0; /* overlong */
            if (ch == 0xF4 && p[1] > 0x8F) return 0; /* beyond U+10FFFF */
            p += 4;
        } else {
            return 0;
        }
        s->chars++;
    }
    return 0;
}

static int is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }

/* a number at c->p: the JSON grammar; a fraction or exponent makes it a float, which must be finite as a double
   (orjson refuses one that is not). Finiteness is read off the decimal exponent (the value is below 10^E, E
   counting the significant integer digits plus the exponent): only E = 309, the band around DBL_MAX, is parsed */
static int scan_number(Cur *c, Num *n) {
    const unsigned char *p = c->p, *end = c->end;
    n->start = p;
    if (p < end && *p == '-') p++;
    if (p >= end || !is_digit(*p)) return 0;
    long long magnitude = 0; /* E before the exponent */
    int nonzero = 0;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && is_digit(*p)) {
            p++;
            magnitude++;
        }
        nonzero = 1;
    }
    n->is_int = 1;
    if (p < end && *p == '.') {
        n->is_int = 0;
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        while (p < end && is_digit(*p)) {
            if (!nonzero) {
                if (*p == '0') magnitude--;
                else nonzero = 1;
            }
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        n->is_int = 0;
        p++;
        int negative = 0;
        if (p < end && (*p == '+' || *p == '-')) negative = *p++ == '-';
        if (p >= end || !is_digit(*p)) return 0;
        long long e = 0;
        while (p < end && is_digit(*p)) {
            if (e < 1000000) e = e * 10 + (*p - '0');
            p++;
        }
        magnitude += negative ? -e : e;
    }
    n->len = p - n->start;
    c->p = p;
    n->fits = 0;
    if (n->is_int) {
        /* at most 18 digits always fit in 64 bits; longer integers are left to the caller (orjson reads some as
           floats, pydantic decides) */
        Py_ssize_t digits = n->len - (n->start[0] == '-');
        if (digits <= 18) {
            long long v = 0;
            for (const unsigned char *q = n->start + (n->start[0] == '-'); q < p; q++) v = v * 10 + (*q - '0');
            n->value = n->start[0] == '-' ? -v : v;
            n->fits = 1;
        }
        return 1;
    }
    /* below 1e308 < DBL_MAX: finite. From 1e308 on, a value may round to DBL_MAX or overflow: left to the caller
       (this runs without the GIL, and such numbers are rare) */
    return !nonzero || magnitude <= 308;
}

static int literal(Cur *c, const char *word, Py_ssize_t len) {
    if (c->end - c->p < len || memcmp(c->p, word, len) != 0) return 0;
    c->p += len;
    return 1;
}

/* any JSON value at c->p (after whitespace): 1 and past it, or 0 */
static int skip_value(Cur *c, int depth) {
    if (depth > SCAN_MAX_DEPTH) return 0;
    ws(c);
    if (c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    if (ch == '"') {
        Str s;
        return scan_string(c, &s);
    }
    if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 1;
        }
        for (;;) {
            if (ch == '{') {
                ws(c);
                Str key;
                if (c->p >= c->end || *c->p != '"' || !scan_string(c, &key)) return 0;
                ws(c);
                if (c->p >= c->end || *c->p != ':') return 0;
                c->p++;
            }
            if (!skip_value(c, depth + 1)) return 0;
            ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p == close) {
                c->p++;
                return 1;
            }
            return 0;
        }
    }
    if (ch == '-' || is_digit(ch)) {
        Num n;
        return scan_number(c, &n);
    }
    if (ch == 't') return literal(c, "true", 4);
    if (ch == 'f') return literal(c, "false", 5);
    if (ch == 'n') return literal(c, "null", 4);
    return 0;
}

/* The scan walks specs compiled from SCAN_SPECS into C (`compile_spec`), so that it runs without the GIL: the
   event loop parses requests and feeds viewers on the other core while a batch is scanned. */
typedef struct CSpec CSpec;
typedef struct {
    int type; /* 0 str, 1 int, 2 bool, 3 none */
    const char *text;
    Py_ssize_t len;
    long long value;
} Lit;
struct CSpec {
    int code;
    Py_ssize_t max;             /* STR, LIST: -1 for none */
    int has_ge, has_le;         /* INT */
    long long ge, le;
    CSpec *item;                /* LIST */
    int n;                      /* UNION options, TYPED fields, LITERAL values */
    CSpec **items;              /* UNION options, TYPED field specs */
    char **names;               /* TYPED field names (UTF-8, owned) */
    Py_ssize_t *lens;
    unsigned long long required; /* TYPED: the required fields' bits */
    int extra;
    Lit *lits;                  /* LITERAL (str texts owned) */
};

static void free_spec(CSpec *sp) {
    if (sp == NULL) return;
    free_spec(sp->item);
    for (int i = 0; i < sp->n; i++) {
        if (sp->items != NULL) free_spec(sp->items[i]);
        if (sp->names != NULL) PyMem_Free(sp->names[i]);
        if (sp->lits != NULL && sp->lits[i].type == 0) PyMem_Free((void *)sp->lits[i].text);
    }
    PyMem_Free(sp->items);
    PyMem_Free(sp->names);
    PyMem_Free(sp->lens);
    PyMem_Free(sp->lits);
    PyMem_Free(sp);
}

static char *copy_bytes(const char *src, Py_ssize_t len) {
    char *out = PyMem_Malloc(len + 1);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, src, len);
    out[len] = 0;
    return out;
}

static int long_or_none(PyObject *v, int *has, long long *out) {
    *has = v != Py_None;
    if (!*has) return 0;
    *out = PyLong_AsLongLong(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A scan spec (schema._scan_spec's tuples) as C; NULL with an exception on a malformed one. */
static CSpec *compile_spec(PyObject *spec) {
    int code = spec_code(spec, 1);
    if (code < 0) return NULL;
    CSpec *sp = PyMem_Calloc(1, sizeof(CSpec));
    if (sp == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    sp->code = code;
    sp->max = -1;
    switch (code) {
    case ANY: case FLOAT: case BOOL: case NONE: case DICT:
        return sp;
    case STR:
        if (spec_code(spec, 2) < 0) goto fail;
        sp->max = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1));
        if (sp->max == -1 && PyErr_Occurred()) goto fail;
        return sp;
    case INT:
        if (spec_code(spec, 3) < 0 || long_or_none(PyTuple_GET_ITEM(spec, 1), &sp->has_ge, &sp->ge) < 0 ||
            long_or_none(PyTuple_GET_ITEM(spec, 2), &sp->has_le, &sp->le) < 0)
            goto fail;
        return sp;
    case LIST:
        if (spec_code(spec, 3) < 0) goto fail;
        sp->max = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
        if (sp->max == -1 && PyErr_Occurred()) goto fail;
        if ((sp->item = compile_spec(PyTuple_GET_ITEM(spec, 1))) == NULL) goto fail;
        return sp;
    case LITERAL: {
        if (spec_code(spec, 2) < 0) goto fail;
        PyObject *values = PyTuple_GET_ITEM(spec, 1);
        if (!PyTuple_CheckExact(values)) goto malformed;
        sp->lits = PyMem_Calloc(PyTuple_GET_SIZE(values) + 1, sizeof(Lit));
        if (sp->lits == NULL) goto nomem;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++) {
            PyObject *v = PyTuple_GET_ITEM(values, i);
            Lit *l = &sp->lits[sp->n];
            if (PyUnicode_CheckExact(v)) {
                const char *t = PyUnicode_AsUTF8AndSize(v, &l->len);
                if (t == NULL || (l->text = copy_bytes(t, l->len)) == NULL) goto fail;
                l->type = 0;
            } else if (PyLong_CheckExact(v)) { /* exactly an int: 1 is not True */
                int overflow = 0;
                l->value = PyLong_AsLongLongAndOverflow(v, &overflow);
                if (l->value == -1 && PyErr_Occurred()) goto fail;
                if (overflow) continue; /* never confirmed */
                l->type = 1;
            } else if (v == Py_True || v == Py_False) {
                l->type = 2;
                l->value = v == Py_True;
            } else if (v == Py_None) {
                l->type = 3;
            } else {
                continue; /* other literal types: never confirmed here */
            }
            sp->n++;
        }
        return sp;
    }
    case UNION: {
        if (spec_code(spec, 2) < 0) goto fail;
        PyObject *options = PyTuple_GET_ITEM(spec, 1);
        if (!PyTuple_CheckExact(options)) goto malformed;
        Py_ssize_t n = PyTuple_GET_SIZE(options);
        if ((sp->items = PyMem_Calloc(n + 1, sizeof(CSpec *))) == NULL) goto nomem;
        for (; sp->n < n; sp->n++)
            if ((sp->items[sp->n] = compile_spec(PyTuple_GET_ITEM(options, sp->n))) == NULL) goto fail;
        return sp;
    }
    case TYPED: {
        if (spec_code(spec, 4) < 0) goto fail;
        PyObject *fields = PyTuple_GET_ITEM(spec, 1);
        if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) > 64) goto malformed;
        sp->required = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(spec, 2));
        if (sp->required == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
        sp->extra = PyTuple_GET_ITEM(spec, 3) == Py_True;
        Py_ssize_t n = PyTuple_GET_SIZE(fields);
        sp->items = PyMem_Calloc(n + 1, sizeof(CSpec *));
        sp->names = PyMem_Calloc(n + 1, sizeof(char *));
        sp->lens = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
        if (sp->items == NULL || sp->names == NULL || sp->lens == NULL) goto nomem;
        for (; sp->n < n; sp->n++) {
            PyObject *pair = PyTuple_GET_ITEM(fields, sp->n);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 0)))
                goto malformed;
            PyObject *name = PyTuple_GET_ITEM(pair, 0);
            sp->lens[sp->n] = PyBytes_GET_SIZE(name);
            if ((sp->names[sp->n] = copy_bytes(PyBytes_AS_STRING(name), sp->lens[sp->n])) == NULL) goto fail;
            if ((sp->items[sp->n] = compile_spec(PyTuple_GET_ITEM(pair, 1))) == NULL) goto fail;
        }
        return sp;
    }
    default:
        PyErr_Format(PyExc_ValueError, "_eventcheck: unknown spec code %d", code);
        goto fail;
    }
malformed:
    PyErr_SetString(PyExc_ValueError, "_eventcheck: malformed scan spec");
    goto fail;
nomem:
    PyErr_NoMemory();
fail:
    free_spec(sp);
    return NULL;
}

static int match_at(Cur *c, const CSpec *sp, int depth);

/* Where the top-level members lie (scan_line reads the step and the wanted fields from it). */
typedef struct {
    int n;
    Str keys[SCAN_MAX_KEYS];
    const unsigned char *vstart[SCAN_MAX_KEYS], *vend[SCAN_MAX_KEYS];
} Members;

/* an object's members against a TYPED spec: known fields by their specs, unknown ones only where extra is allowed,
   every required one present, no key twice (orjson would keep the last: left to the caller) */
static int match_object(Cur *c, const CSpec *sp, int depth, Members *out) {
    unsigned long long seen = 0;
    Str unknown[8];
    int nunknown = 0, nmembers = 0;
    c->p++; /* '{' */
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            ws(c);
            Str key;
            if (c->p >= c->end || *c->p != '"' || !scan_string(c, &key) || key.escaped) return 0;
            ws(c);
            if (c->p >= c->end || *c->p != ':') return 0;
            c->p++;
            const CSpec *field = NULL;
            for (int f = 0; f < sp->n; f++) {
                if (sp->lens[f] == key.len && memcmp(sp->names[f], key.start, key.len) == 0) {
                    if (seen & (1ULL << f)) return 0; /* twice */
                    seen |= 1ULL << f;
                    field = sp->items[f];
                    break;
                }
            }
            ws(c);
            const unsigned char *vstart = c->p;
            int ok;
            if (field == NULL) {
                if (!sp->extra || nunknown == 8) return 0; /* an unknown field (or many: left to the caller) */
                for (int i = 0; i < nunknown; i++)
                    if (unknown[i].len == key.len && memcmp(unknown[i].start, key.start, key.len) == 0) return 0;
                unknown[nunknown++] = key;
                ok = skip_value(c, depth + 1);
            } else {
                ok = match_at(c, field, depth + 1);
            }
            if (!ok) return 0;
            if (out != NULL) {
                if (nmembers == SCAN_MAX_KEYS) return 0;
                out->keys[nmembers] = key;
                out->vstart[nmembers] = vstart;
                out->vend[nmembers] = c->p;
            }
            nmembers++;
            ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p == '}') {
                c->p++;
                break;
            }
            return 0;
        }
    }
    if (out != NULL) out->n = nmembers;
    return (seen & sp->required) == sp->required;
}

/* the value at c->p against `sp`: 1 (and past it) or 0, not confirmed */
static int match_at(Cur *c, const CSpec *sp, int depth) {
    if (depth > SCAN_MAX_DEPTH) return 0;
    ws(c);
    if (c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    switch (sp->code) {
    case ANY:
        return skip_value(c, depth);
    case STR: {
        Str s;
        if (ch != '"' || !scan_string(c, &s)) return 0;
        return sp->max < 0 || s.chars <= sp->max; /* characters, as pydantic counts */
    }
    case INT: {
        Num n;
        if ((ch != '-' && !is_digit(ch)) || !scan_number(c, &n) || !n.is_int || !n.fits) return 0;
        return !(sp->has_ge && n.value < sp->ge) && !(sp->has_le && n.value > sp->le);
    }
    case FLOAT: {
        Num n;
        if ((ch != '-' && !is_digit(ch)) || !scan_number(c, &n)) return 0;
        return !n.is_int || n.fits; /* a long integer may be read as an int or a float: left to the caller */
    }
    case BOOL:
        return ch == 't' ? literal(c, "true", 4) : ch == 'f' ? literal(c, "false", 5) : 0;
    case NONE:
        return ch == 'n' ? literal(c, "null", 4) : 0;
    case LITERAL: {
        Cur start = *c;
        for (int i = 0; i < sp->n; i++) {
            const Lit *l = &sp->lits[i];
            *c = start;
            Str s;
            Num n;
            switch (l->type) {
            case 0:
                if (ch == '"' && scan_string(c, &s) && !s.escaped && s.len == l->len && memcmp(s.start, l->text, l->len) == 0)
                    return 1;
                break;
            case 1:
                if ((ch == '-' || is_digit(ch)) && scan_number(c, &n) && n.is_int && n.fits && n.value == l->value)
                    return 1;
                break;
            case 2:
                if (literal(c, l->value ? "true" : "false", l->value ? 4 : 5)) return 1;
                break;
            default:
                if (literal(c, "null", 4)) return 1;
            }
        }
        return 0;
    }
    case LIST: {
        if (ch != '[') return 0;
        Py_ssize_t n = 0;
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 1;
        }
        for (;;) {
            if (!match_at(c, sp->item, depth + 1)) return 0;
            n++;
            if (sp->max >= 0 && n > sp->max) return 0;
            ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p == ']') {
                c->p++;
                return 1;
            }
            return 0;
        }
    }
    case DICT:
        return ch == '{' ? skip_value(c, depth) : 0;
    case TYPED:
        return ch == '{' ? match_object(c, sp, depth, NULL) : 0;
    case UNION: {
        Cur start = *c;
        for (int i = 0; i < sp->n; i++) {
            *c = start;
            if (match_at(c, sp->items[i], depth)) return 1;
        }
        return 0;
    }
    default:
        return 0;
    }
}

/* Short strings decoded for the history (op and module names: a few distinct ones, each in thousands of events)
   come from a small cache keyed by their bytes: one str per distinct name, whose hash is then computed once. Used
   with the GIL held only. */
#define NAME_CACHE 256
#define NAME_CACHE_MAX_LEN 64
static PyObject *name_cache[NAME_CACHE];

static PyObject *short_str(const unsigned char *p, Py_ssize_t len) {
    if (len > NAME_CACHE_MAX_LEN) return PyUnicode_DecodeUTF8((const char *)p, len, NULL);
    unsigned h = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
    PyObject **slot = &name_cache[h % NAME_CACHE];
    if (*slot != NULL) {
        Py_ssize_t have;
        const char *text = PyUnicode_AsUTF8AndSize(*slot, &have);
        if (text != NULL && have == len && memcmp(text, p, len) == 0) return Py_NewRef(*slot);
        PyErr_Clear();
    }
    PyObject *str = PyUnicode_DecodeUTF8((const char *)p, len, NULL);
    if (str != NULL) Py_XSETREF(*slot, Py_NewRef(str));
    return str;
}

/* A top-level member's value as Python: an int or an unescaped string built here, anything else by `loads`. */
static PyObject *decode_member(const unsigned char *start, const unsigned char *end, PyObject *loads) {
    Cur c = {start, end};
    unsigned char ch = *start;
    if (ch == '"') {
        Str s;
        if (scan_string(&c, &s) && !s.escaped) return short_str(s.start, s.len);
    } else if (ch == '-' || is_digit(ch)) {
        Num n;
        if (scan_number(&c, &n) && n.is_int && n.fits) return PyLong_FromLongLong(n.value);
    } else if (ch == 'n' && end - start == 4) {
        Py_RETURN_NONE;
    }
    PyObject *text = PyBytes_FromStringAndSize((const char *)start, end - start);
    if (text == NULL) return NULL;
    PyObject *value = PyObject_CallOneArg(loads, text);
    Py_DECREF(text);
    return value;
}

/* The kind of the object at c->p when it is one of its first two members (as every emitter writes it: "v" then
   "kind"); a string without escapes. */
static int early_kind(Cur c, Str *kind) {
    c.p++;
    for (int i = 0; i < 2; i++) {
        ws(&c);
        Str key;
        if (c.p >= c.end || *c.p != '"' || !scan_string(&c, &key)) return 0;
        ws(&c);
        if (c.p >= c.end || *c.p != ':') return 0;
        c.p++;
        ws(&c);
        if (key.len == 4 && memcmp(key.start, "kind", 4) == 0)
            return c.p < c.end && *c.p == '"' && scan_string(&c, kind) && !kind->escaped;
        if (!skip_value(&c, 2)) return 0;
        ws(&c);
        if (c.p >= c.end || *c.p != ',') return 0;
        c.p++;
    }
    return 0;
}

/* The compiled specs, one per kind: made when `scan` is first given a specs dict (SCAN_SPECS, made once at import)
   and kept while the same dict comes. A table is never freed: a scan in another thread, without the GIL, may be
   reading it (another dict makes another table; only tests pass one). */
#define SCAN_MAX_WANTED 4
typedef struct {
    char *name;
    Py_ssize_t len;
    PyObject *kind; /* the dict's own key */
    CSpec *spec;
} Kind;
typedef struct {
    PyObject *specs; /* a reference: the dict this table was made from */
    Kind *kinds;
    Py_ssize_t n;
} KindTable;
static KindTable *current_table = NULL;

static KindTable *compile_kinds(PyObject *specs) {
    if (current_table != NULL && current_table->specs == specs) return current_table;
    Py_ssize_t pos = 0;
    KindTable *t = PyMem_Calloc(1, sizeof(KindTable));
    if (t == NULL || (t->kinds = PyMem_Calloc(PyDict_GET_SIZE(specs) + 1, sizeof(Kind))) == NULL) {
        PyMem_Free(t);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *key, *value;
    while (PyDict_Next(specs, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) continue;
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(key, &len);
        Kind *k = &t->kinds[t->n];
        if (text == NULL || (k->name = copy_bytes(text, len)) == NULL) goto fail;
        k->len = len;
        k->kind = Py_NewRef(key);
        t->n++;
        if ((k->spec = compile_spec(value)) == NULL) goto fail;
        if (k->spec->code != TYPED) {
            PyErr_SetString(PyExc_ValueError, "_eventcheck: a kind's scan spec must be a typed dict");
            goto fail;
        }
    }
    t->specs = Py_NewRef(specs);
    current_table = t; /* the previous one stays (see above) */
    return t;
fail:
    for (Py_ssize_t i = 0; i < t->n; i++) {
        PyMem_Free(t->kinds[i].name);
        Py_XDECREF(t->kinds[i].kind);
        free_spec(t->kinds[i].spec);
    }
    PyMem_Free(t->kinds);
    PyMem_Free(t);
    return NULL;
}

/* What the scan of one line found (without the GIL): its kind, its step, where its wanted fields' values lie. */
typedef struct {
    int ok;
    int kind;
    int has_step;
    long long step;
    const unsigned char *wstart[SCAN_MAX_WANTED], *wend[SCAN_MAX_WANTED];
} Found;

typedef struct {
    int n;
    const char *names[SCAN_MAX_WANTED];
    Py_ssize_t lens[SCAN_MAX_WANTED];
} Wanted;

static void scan_line(const KindTable *t, const unsigned char *begin, Py_ssize_t size, const Wanted *wanted,
                      Found *f) {
    f->ok = 0;
    Cur c = {begin, begin + size};
    ws(&c);
    if (c.p >= c.end || *c.p != '{') return;
    Str ks;
    if (!early_kind(c, &ks)) return; /* the kind elsewhere: left to the caller */
    int kind = -1;
    for (Py_ssize_t i = 0; i < t->n && kind < 0; i++)
        if (t->kinds[i].len == ks.len && memcmp(t->kinds[i].name, ks.start, ks.len) == 0) kind = (int)i;
    if (kind < 0) return; /* a kind without a spec: the caller's */
    Members m;
    if (!match_object(&c, t->kinds[kind].spec, 1, &m)) return;
    ws(&c);
    if (c.p != c.end) return; /* nothing may follow the object */
    f->kind = kind;
    f->has_step = 0;
    for (int k = 0; k < m.n; k++) {
        if (m.keys[k].len != 4 || memcmp(m.keys[k].start, "step", 4) != 0) continue;
        Num n;
        Cur sc = {m.vstart[k], m.vend[k]};
        if (*sc.p == 'n') break;
        if (!((*sc.p == '-' || is_digit(*sc.p)) && scan_number(&sc, &n) && n.is_int && n.fits))
            return; /* a step the spec let through as something else: the caller decodes it */
        f->has_step = 1;
        f->step = n.value;
        break;
    }
    const Wanted *w = &wanted[kind];
    for (int i = 0; i < w->n; i++) {
        f->wstart[i] = NULL;
        for (int k = 0; k < m.n; k++) {
            if (m.keys[k].len == w->lens[i] && memcmp(m.keys[k].start, w->names[i], w->lens[i]) == 0) {
                f->wstart[i] = m.vstart[k];
                f->wend[i] = m.vend[k];
                break;
            }
        }
    }
    f->ok = 1;
}

static int is_strip_space(unsigned char ch) { /* what bytes.strip() strips */
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\x0b' || ch == '\x0c';
}

/* scan(source, specs, wanted, loads, max_events=-1, max_line=-1): `source` is a list of lines (bytes) or a whole
   NDJSON body (bytes: split on newlines here, each line stripped as bytes.strip() strips it, empty ones skipped).
   None when a line is not confirmed, or when the body holds more than max_events lines or a line longer than
   max_line bytes (the caller's careful path names those). */
static PyObject *scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 4 || nargs > 6 || !(PyList_CheckExact(args[0]) || PyBytes_CheckExact(args[0])) ||
        !PyDict_CheckExact(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "scan(lines: list[bytes] | body: bytes, specs: dict, wanted: dict, loads, "
                                         "max_events=-1, max_line=-1)");
        return NULL;
    }
    Py_ssize_t max_events = -1, max_line = -1;
    if (nargs > 4 && (max_events = PyLong_AsSsize_t(args[4])) == -1 && PyErr_Occurred()) return NULL;
    if (nargs > 5 && (max_line = PyLong_AsSsize_t(args[5])) == -1 && PyErr_Occurred()) return NULL;
    PyObject *source = args[0], *specs = args[1], *wanted_dict = args[2], *loads = args[3];
    KindTable *t = compile_kinds(specs);
    if (t == NULL) return NULL;
    Py_ssize_t nkinds = t->n;
    Kind *kinds = t->kinds;
    int from_body = PyBytes_CheckExact(source);
    Py_ssize_t n = 0;
    if (from_body) { /* an upper bound: the newlines + 1 */
        const char *p = PyBytes_AS_STRING(source), *end = p + PyBytes_GET_SIZE(source);
        n = 1;
        while ((p = memchr(p, '\n', end - p)) != NULL) {
            n++;
            p++;
        }
    } else {
        n = PyList_GET_SIZE(source);
    }
    /* the lines' bytes (each held, or the body held: a list may change while the GIL is released) */
    PyObject **held = PyMem_Calloc(n + 1, sizeof(PyObject *));
    const unsigned char **starts = PyMem_Malloc((n + 1) * sizeof(unsigned char *));
    Py_ssize_t *lens = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    Found *found = PyMem_Malloc((n + 1) * sizeof(Found));
    Wanted *wanted = PyMem_Calloc(nkinds + 1, sizeof(Wanted));
    PyObject **wanted_names = PyMem_Calloc(nkinds + 1, sizeof(PyObject *));
    PyObject *result = NULL, *rows = NULL, *decoded = NULL;
    Py_ssize_t nheld = 0;
    if (held == NULL || starts == NULL || lens == NULL || found == NULL || wanted == NULL || wanted_names == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (from_body) {
        held[nheld++] = Py_NewRef(source);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(source);
        const unsigned char *end = p + PyBytes_GET_SIZE(source);
        Py_ssize_t m = 0;
        for (;;) {
            const unsigned char *nl = memchr(p, '\n', end - p);
            const unsigned char *stop = nl != NULL ? nl : end, *q = p;
            while (q < stop && is_strip_space(*q)) q++;
            while (stop > q && is_strip_space(stop[-1])) stop--;
            if (stop > q) {
                if ((max_events >= 0 && m >= max_events) || (max_line >= 0 && stop - q > max_line)) {
                    result = Py_NewRef(Py_None);
                    goto done;
                }
                starts[m] = q;
                lens[m++] = stop - q;
            }
            if (nl == NULL) break;
            p = nl + 1;
        }
        n = m;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *line = PyList_GET_ITEM(source, i);
            if (!PyBytes_CheckExact(line)) { /* not bytes: the caller's */
                result = Py_NewRef(Py_None);
                goto done;
            }
            held[nheld++] = Py_NewRef(line);
            starts[i] = (const unsigned char *)PyBytes_AS_STRING(line);
            lens[i] = PyBytes_GET_SIZE(line);
        }
    }
    for (Py_ssize_t k = 0; k < nkinds; k++) {
        PyObject *names = PyDict_GetItemWithError(wanted_dict, kinds[k].kind); /* borrowed */
        if (names == NULL) {
            if (PyErr_Occurred()) goto done;
            continue;
        }
        if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) > SCAN_MAX_WANTED) {
            PyErr_SetString(PyExc_TypeError, "scan: wanted maps a kind to a tuple of at most 4 field names");
            goto done;
        }
        wanted_names[k] = Py_NewRef(names);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
            wanted[k].names[i] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &wanted[k].lens[i]);
            if (wanted[k].names[i] == NULL) goto done;
        }
        wanted[k].n = (int)PyTuple_GET_SIZE(names);
    }
    int all = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && all; i++) {
        scan_line(t, starts[i], lens[i], wanted, &found[i]);
        all = found[i].ok;
    }
    Py_END_ALLOW_THREADS
    if (!all) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    rows = PyList_New(n);
    decoded = PyList_New(n);
    if (rows == NULL || decoded == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Found *f = &found[i];
        PyObject *step = f->has_step ? PyLong_FromLongLong(f->step) : Py_NewRef(Py_None);
        PyObject *text = step == NULL ? NULL : PyUnicode_DecodeUTF8((const char *)starts[i], lens[i], NULL);
        PyObject *row = text == NULL ? NULL : PyTuple_Pack(3, kinds[f->kind].kind, step, text);
        Py_XDECREF(step);
        Py_XDECREF(text);
        if (row == NULL) goto done;
        PyList_SET_ITEM(rows, i, row);
        PyObject *names = wanted_names[f->kind];
        if (names == NULL) {
            PyList_SET_ITEM(decoded, i, Py_NewRef(Py_None));
            continue;
        }
        PyObject *fields = PyDict_New();
        if (fields == NULL) goto done;
        PyList_SET_ITEM(decoded, i, fields);
        for (int w = 0; w < wanted[f->kind].n; w++) {
            if (f->wstart[w] == NULL) continue;
            PyObject *value = decode_member(f->wstart[w], f->wend[w], loads);
            if (value == NULL || PyDict_SetItem(fields, PyTuple_GET_ITEM(names, w), value) < 0) {
                Py_XDECREF(value);
                goto done;
            }
            Py_DECREF(value);
        }
    }
    result = Py_BuildValue("(OO)", rows, decoded);
done:
    Py_XDECREF(rows);
    Py_XDECREF(decoded);
    for (Py_ssize_t i = 0; i < nheld; i++) Py_DECREF(held[i]);
    if (wanted_names != NULL)
        for (Py_ssize_t k = 0; k < nkinds; k++) Py_XDECREF(wanted_names[k]);
    PyMem_Free(held);
    PyMem_Free(starts);
    PyMem_Free(lens);
    PyMem_Free(found);
    PyMem_Free(wanted);
    PyMem_Free(wanted_names);
    return result;
}

/* What the builders below answer for input they leave to the caller's Python. Compared by address only: never
   returned to Python, never counted. */
static PyObject not_taken_sentinel;
#define NOT_TAKEN (&not_taken_sentinel)

/* The stored text of one event: `text` (a str starting with "{") with "seq":N put first and every character past
   ASCII written as its JSON escape (\u00e9; a pair of them past U+FFFF), so that the stored text is one byte a
   character from here to the file: a str of wider characters costs the server a UTF-8 encoding at every bind and
   twice the bytes in every join (~7% of its CPU for an mlp_train stream, whose node events carry backward rules
   such as "dW = dY\u1d40 @ X"). The JSON is the same: outside strings JSON text is ASCII, and inside them an
   escape reads as the character. NOT_TAKEN when `text` is not of that form or holds a lone surrogate (the caller's
   Python then does it, and refuses the surrogate). */
static PyObject *seq_text(PyObject *text, long long seq) {
    if (!PyUnicode_CheckExact(text) || PyUnicode_GET_LENGTH(text) < 2 || PyUnicode_READ_CHAR(text, 0) != '{')
        return NOT_TAKEN;
    char prefix[40];
    int plen = snprintf(prefix, sizeof(prefix), "{\"seq\":%lld,", seq);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        PyObject *s = PyUnicode_New(plen + len - 1, 127);
        if (s == NULL) return NULL;
        Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
        memcpy(out, prefix, plen);
        memcpy(out + plen, PyUnicode_1BYTE_DATA(text) + 1, len - 1);
        return s;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t need = plen;
    for (Py_ssize_t i = 1; i < len; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch >= 0xD800 && ch <= 0xDFFF) return NOT_TAKEN; /* a lone surrogate: Python's path refuses it */
        need += ch < 0x80 ? 1 : ch < 0x10000 ? 6 : 12;
    }
    PyObject *s = PyUnicode_New(need, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
    memcpy(out, prefix, plen);
    out += plen;
    static const char hex[] = "0123456789abcdef";
    for (Py_ssize_t i = 1; i < len; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch < 0x80) {
            *out++ = (Py_UCS1)ch;
            continue;
        }
        Py_UCS4 units[2] = {ch, 0};
        int nunits = 1;
        if (ch >= 0x10000) {
            units[0] = 0xD800 + ((ch - 0x10000) >> 10);
            units[1] = 0xDC00 + ((ch - 0x10000) & 0x3FF);
            nunits = 2;
        }
        for (int u = 0; u < nunits; u++) {
            *out++ = '\\';
            *out++ = 'u';
            for (int shift = 12; shift >= 0; shift -= 4) *out++ = (Py_UCS1)hex[(units[u] >> shift) & 0xF];
        }
    }
    return s;
}

/* The texts of `rows` ((kind, step, text) tuples), seq from `seq` on (`seq_text`); NOT_TAKEN for a row not of that
   form. */
static PyObject *seq_text_list(PyObject *rows, long long seq) {
    Py_ssize_t n = PyList_GET_SIZE(rows);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++, seq++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        PyObject *s = PyTuple_CheckExact(row) && PyTuple_GET_SIZE(row) == 3 ? seq_text(PyTuple_GET_ITEM(row, 2), seq)
                                                                            : NOT_TAKEN;
        if (s == NULL || s == NOT_TAKEN) {
            Py_DECREF(out);
            return s;
        }
        PyList_SET_ITEM(out, i, s);
    }
    return out;
}

/* seq_texts(rows, first): each row's stored text (`seq_text`), N counting from `first` (rtxviz.store.rows.
   stored_texts); None when a row is not of that form (the caller's Python then does it). */
static PyObject *seq_texts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "seq_texts(rows: list, first: int)");
        return NULL;
    }
    long long seq = PyLong_AsLongLong(args[1]);
    if (seq == -1 && PyErr_Occurred()) return NULL;
    PyObject *out = seq_text_list(args[0], seq);
    return out == NOT_TAKEN ? Py_NewRef(Py_None) : out;
}

/* 1: rows a and b ((kind, step, text) tuples) have the same kind and step; 0: not; -1: not of the form taken (a
   kind that is not a str, a step neither an int nor None). */
static int same_kind_and_step(PyObject *a, PyObject *b) {
    PyObject *ka = PyTuple_GET_ITEM(a, 0), *kb = PyTuple_GET_ITEM(b, 0);
    PyObject *sa = PyTuple_GET_ITEM(a, 1), *sb = PyTuple_GET_ITEM(b, 1);
    if (!PyUnicode_CheckExact(ka) || !PyUnicode_CheckExact(kb)) return -1;
    if ((sa != Py_None && !PyLong_CheckExact(sa)) || (sb != Py_None && !PyLong_CheckExact(sb))) return -1;
    if (ka != kb && PyUnicode_Compare(ka, kb) != 0) return PyErr_Occurred() ? -1 : 0;
    if (sa == Py_None || sb == Py_None) return sa == sb;
    return PyObject_RichCompareBool(sa, sb, Py_EQ);
}

/* seq_pack(rows, first, run_id, packed_kinds, pack_max, sep) -> (texts, bindings): `seq_texts` and
   rtxviz.store.sqlite.pack_rows in one pass, the same lists (tests/store/test_compiled_pack.py compares them); None
   for a batch it does not take (a row not of the form, a text holding `sep`): the caller's Python then does it,
   and names what is wrong. */
static PyObject *seq_pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyUnicode_CheckExact(args[2]) ||
        !PyFrozenSet_CheckExact(args[3]) || !PyUnicode_CheckExact(args[5]) || PyUnicode_GET_LENGTH(args[5]) != 1) {
        PyErr_SetString(PyExc_TypeError, "seq_pack(rows: list, first: int, run_id: str, packed_kinds: frozenset, "
                                         "pack_max: int, sep: str of one character)");
        return NULL;
    }
    PyObject *rows = args[0], *run_id = args[2], *packed = args[3], *sep = args[5];
    long long first = PyLong_AsLongLong(args[1]);
    if (first == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t pack_max = PyLong_AsSsize_t(args[4]);
    if (pack_max == -1 && PyErr_Occurred()) return NULL;
    if (pack_max < 1) {
        PyErr_SetString(PyExc_ValueError, "seq_pack: pack_max must be at least 1");
        return NULL;
    }
    Py_UCS4 sep_char = PyUnicode_READ_CHAR(sep, 0);
    PyObject *texts = seq_text_list(rows, first);
    if (texts == NULL) return NULL;
    if (texts == NOT_TAKEN) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(texts);
    PyObject *flat = PyList_New(0), *result = NULL;
    if (flat == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(texts, i);
        Py_ssize_t at = PyUnicode_FindChar(t, sep_char, 0, PyUnicode_GET_LENGTH(t), 1);
        if (at == -2) goto done;
        if (at >= 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n;) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        Py_ssize_t j = i + 1;
        int same = 0;
        while (j < n && (same = same_kind_and_step(row, PyList_GET_ITEM(rows, j))) == 1) j++;
        if (same < 0) {
            if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *kind = PyTuple_GET_ITEM(row, 0), *step = PyTuple_GET_ITEM(row, 1);
        int pack = 0;
        /* j - i > 1: same_kind_and_step found `kind` an exact str, and `packed` is an exact frozenset, so the
           lookup runs no Python code that could change `rows` under the borrowed pointers */
        if (j - i > 1 && (pack = PySet_Contains(packed, kind)) < 0) goto done;
        Py_ssize_t width = pack ? pack_max : 1;
        for (Py_ssize_t start = i; start < j; start += width) {
            Py_ssize_t stop = start + width < j ? start + width : j;
            PyObject *body;
            if (stop - start == 1) {
                body = Py_NewRef(PyList_GET_ITEM(texts, start));
            } else {
                PyObject *part = PyList_GetSlice(texts, start, stop);
                body = part == NULL ? NULL : PyUnicode_Join(sep, part);
                Py_XDECREF(part);
            }
            PyObject *seq = body == NULL ? NULL : PyLong_FromLongLong(first + start);
            int bad = seq == NULL || PyList_Append(flat, run_id) < 0 || PyList_Append(flat, seq) < 0 ||
                      PyList_Append(flat, kind) < 0 || PyList_Append(flat, step) < 0 || PyList_Append(flat, body) < 0;
            Py_XDECREF(seq);
            Py_XDECREF(body);
            if (bad) goto done;
        }
        i = j;
    }
    result = PyTuple_Pack(2, texts, flat);
done:
    Py_DECREF(texts);
    Py_XDECREF(flat);
    return result;
}

static PyMethodDef methods[] = {
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL,
     "check(events, specs) -> [indices of the events not confirmed to match the spec of their kind] (pydantic\n"
     "decides those). specs: rtxviz.event_specs.SPECS."},
    {"seq_texts", (PyCFunction)(void (*)(void))seq_texts, METH_FASTCALL,
     "seq_texts(rows, first) -> each row's text with \"seq\":N put first and non-ASCII escaped (None for a row it\n"
     "does not take)."},
    {"seq_pack", (PyCFunction)(void (*)(void))seq_pack, METH_FASTCALL,
     "seq_pack(rows, first, run_id, packed_kinds, pack_max, sep) -> (seq_texts(rows, first), the SQLite store's\n"
     "row bindings: rtxviz.store.sqlite.pack_rows), or None for a batch it does not take."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(lines, specs, wanted, loads) -> (rows [(kind, step, text)], decoded [dict of the wanted fields or\n"
     "None]) for NDJSON lines read and checked straight from their bytes; None when any line is not confirmed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rtxviz._eventcheck",
                                    "The server's copy-free check of decoded events (see _eventcheck.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__eventcheck(void) { return PyModule_Create(&module); }
