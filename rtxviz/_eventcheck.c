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
    if (!nonzero || magnitude <= 308) return 1; /* below 1e308 < DBL_MAX */
    if (magnitude > 309) return 0;              /* at least 1e309: infinite as a double */
    char buf[64];
    if (n->len >= (Py_ssize_t)sizeof(buf)) return 0;
    memcpy(buf, n->start, n->len);
    buf[n->len] = 0;
    double d = PyOS_string_to_double(buf, NULL, NULL); /* +-inf past the range (HUGE_VAL) */
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return isfinite(d) ? 1 : 0;
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

static int match_at(Cur *c, PyObject *spec, int depth);

static int int_in(PyObject *spec, long long v) {
    PyObject *ge = PyTuple_GET_ITEM(spec, 1), *le = PyTuple_GET_ITEM(spec, 2);
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

/* Where the top-level members lie (scan_line reads kind, step and the wanted fields from it). */
typedef struct {
    int n;
    Str keys[SCAN_MAX_KEYS];
    const unsigned char *vstart[SCAN_MAX_KEYS], *vend[SCAN_MAX_KEYS];
} Members;

/* an object's members against a scan spec (TYPED, ((name as bytes, spec), ...), required mask, extra): known
   fields by their specs, unknown ones only where extra is allowed, every required one present, no key twice
   (orjson would keep the last: left to the caller). Fields are found by their bytes, with no str made. */
static int match_object(Cur *c, PyObject *spec, int depth, Members *out) {
    if (spec_code(spec, 4) < 0) return -1;
    PyObject *fields = PyTuple_GET_ITEM(spec, 1);
    unsigned long long required = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(spec, 2));
    if (required == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    int extra = PyTuple_GET_ITEM(spec, 3) == Py_True;
    if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) > 64) {
        PyErr_SetString(PyExc_ValueError, "_eventcheck: malformed scan spec");
        return -1;
    }
    Py_ssize_t nfields = PyTuple_GET_SIZE(fields);
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
            PyObject *field = NULL;
            for (Py_ssize_t f = 0; f < nfields; f++) {
                PyObject *pair = PyTuple_GET_ITEM(fields, f);
                PyObject *name = PyTuple_GET_ITEM(pair, 0);
                if (PyBytes_GET_SIZE(name) == key.len && memcmp(PyBytes_AS_STRING(name), key.start, key.len) == 0) {
                    if (seen & (1ULL << f)) return 0; /* twice */
                    seen |= 1ULL << f;
                    field = PyTuple_GET_ITEM(pair, 1);
                    break;
                }
            }
            ws(c);
            const unsigned char *vstart = c->p;
            int ok;
            if (field == NULL) {
                if (!extra || nunknown == 8) return 0; /* an unknown field (or many: left to the caller) */
                for (int i = 0; i < nunknown; i++)
                    if (unknown[i].len == key.len && memcmp(unknown[i].start, key.start, key.len) == 0) return 0;
                unknown[nunknown++] = key;
                ok = skip_value(c, depth + 1);
            } else {
                ok = match_at(c, field, depth + 1);
            }
            if (ok <= 0) return ok;
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
    return (seen & required) == required;
}

/* the value at c->p against `spec`: 1 (and past it), 0 not confirmed, -1 an error */
static int match_at(Cur *c, PyObject *spec, int depth) {
    if (depth > SCAN_MAX_DEPTH) return 0;
    int code = spec_code(spec, 1);
    if (code < 0) return -1;
    ws(c);
    if (c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    switch (code) {
    case ANY:
        return skip_value(c, depth);
    case STR: {
        if (ch != '"') return 0;
        if (spec_code(spec, 2) < 0) return -1;
        Py_ssize_t max = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1));
        if (max == -1 && PyErr_Occurred()) return -1;
        Str s;
        if (!scan_string(c, &s)) return 0;
        return max < 0 || s.chars <= max; /* characters, as pydantic counts */
    }
    case INT: {
        if (spec_code(spec, 3) < 0) return -1;
        if (ch != '-' && !is_digit(ch)) return 0;
        Num n;
        if (!scan_number(c, &n) || !n.is_int || !n.fits) return 0;
        return int_in(spec, n.value);
    }
    case FLOAT: {
        if (ch != '-' && !is_digit(ch)) return 0;
        Num n;
        if (!scan_number(c, &n)) return 0;
        return !n.is_int || n.fits; /* a long integer may be read as an int or a float: left to the caller */
    }
    case BOOL:
        return ch == 't' ? literal(c, "true", 4) : ch == 'f' ? literal(c, "false", 5) : 0;
    case NONE:
        return ch == 'n' ? literal(c, "null", 4) : 0;
    case LITERAL: {
        if (spec_code(spec, 2) < 0) return -1;
        PyObject *values = PyTuple_GET_ITEM(spec, 1);
        Cur start = *c;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++) {
            PyObject *want = PyTuple_GET_ITEM(values, i);
            *c = start;
            if (PyUnicode_CheckExact(want)) {
                Str s;
                Py_ssize_t len;
                const char *w = PyUnicode_AsUTF8AndSize(want, &len);
                if (w == NULL) return -1;
                if (ch == '"' && scan_string(c, &s) && !s.escaped && s.len == len && memcmp(s.start, w, len) == 0)
                    return 1;
            } else if (PyLong_CheckExact(want)) { /* exactly an int: 1 is not True, 1.0 is not 1 */
                int overflow = 0;
                long long w = PyLong_AsLongLongAndOverflow(want, &overflow);
                if (w == -1 && PyErr_Occurred()) return -1;
                Num n;
                if (!overflow && (ch == '-' || is_digit(ch)) && scan_number(c, &n) && n.is_int && n.fits &&
                    n.value == w)
                    return 1;
            } else if (want == Py_True || want == Py_False) {
                if (literal(c, want == Py_True ? "true" : "false", want == Py_True ? 4 : 5)) return 1;
            } else if (want == Py_None) {
                if (literal(c, "null", 4)) return 1;
            } /* other literal types: never confirmed here */
        }
        return 0;
    }
    case LIST: {
        if (ch != '[') return 0;
        if (spec_code(spec, 3) < 0) return -1;
        Py_ssize_t max = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
        if (max == -1 && PyErr_Occurred()) return -1;
        PyObject *item = PyTuple_GET_ITEM(spec, 1);
        Py_ssize_t n = 0;
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 1;
        }
        for (;;) {
            int ok = match_at(c, item, depth + 1);
            if (ok <= 0) return ok;
            n++;
            if (max >= 0 && n > max) return 0;
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
        return ch == '{' ? match_object(c, spec, depth, NULL) : 0;
    case UNION: {
        if (spec_code(spec, 2) < 0) return -1;
        PyObject *options = PyTuple_GET_ITEM(spec, 1);
        Cur start = *c;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(options); i++) {
            *c = start;
            int ok = match_at(c, PyTuple_GET_ITEM(options, i), depth);
            if (ok != 0) return ok;
        }
        return 0;
    }
    default:
        PyErr_Format(PyExc_ValueError, "_eventcheck: unknown spec code %d", code);
        return -1;
    }
}

/* A top-level member's value as Python: an int or an unescaped string built here, anything else by `loads`. */
static PyObject *decode_member(const unsigned char *start, const unsigned char *end, PyObject *loads) {
    Cur c = {start, end};
    unsigned char ch = *start;
    if (ch == '"') {
        Str s;
        if (scan_string(&c, &s) && !s.escaped) return PyUnicode_DecodeUTF8((const char *)s.start, s.len, NULL);
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
   "kind"), else NULL; a string without escapes. */
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

/* One line: 1 with *row and *decoded set (new references), 0 not confirmed, -1 an error. */
static int scan_line(PyObject *line, PyObject *specs, PyObject *wanted, PyObject *loads, PyObject **row,
                     PyObject **decoded) {
    if (!PyBytes_CheckExact(line)) return 0;
    const unsigned char *begin = (const unsigned char *)PyBytes_AS_STRING(line);
    Cur c = {begin, begin + PyBytes_GET_SIZE(line)};
    ws(&c);
    if (c.p >= c.end || *c.p != '{') return 0;
    Str ks;
    if (!early_kind(c, &ks)) return 0; /* the kind elsewhere: left to the caller */
    PyObject *kind = PyUnicode_DecodeUTF8((const char *)ks.start, ks.len, NULL);
    if (kind == NULL) return -1;
    PyObject *spec = PyDict_GetItemWithError(specs, kind); /* borrowed */
    if (spec == NULL) {
        Py_DECREF(kind);
        return PyErr_Occurred() ? -1 : 0; /* a kind without a spec: the caller's */
    }
    Members m;
    int ok = spec_code(spec, 1) == TYPED ? match_object(&c, spec, 1, &m) : 0;
    if (ok > 0) {
        ws(&c);
        ok = c.p == c.end; /* nothing may follow the object */
    }
    if (ok <= 0) {
        Py_DECREF(kind);
        return ok;
    }
    PyObject *step = NULL;
    for (int k = 0; k < m.n && step == NULL; k++) {
        if (m.keys[k].len != 4 || memcmp(m.keys[k].start, "step", 4) != 0) continue;
        Num n;
        Cur sc = {m.vstart[k], m.vend[k]};
        if (*sc.p == 'n') {
            step = Py_NewRef(Py_None);
        } else if ((*sc.p == '-' || is_digit(*sc.p)) && scan_number(&sc, &n) && n.is_int && n.fits) {
            step = PyLong_FromLongLong(n.value);
            if (step == NULL) {
                Py_DECREF(kind);
                return -1;
            }
        } else {
            Py_DECREF(kind);
            return 0; /* a step the spec let through as something else: the caller decodes it */
        }
    }
    if (step == NULL) step = Py_NewRef(Py_None);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)begin, PyBytes_GET_SIZE(line), NULL);
    *row = text == NULL ? NULL : PyTuple_Pack(3, kind, step, text);
    Py_DECREF(step);
    Py_XDECREF(text);
    if (*row == NULL) {
        Py_DECREF(kind);
        return -1;
    }
    PyObject *names = PyDict_GetItemWithError(wanted, kind); /* borrowed */
    Py_DECREF(kind);
    if (names == NULL) {
        if (PyErr_Occurred()) goto fail;
        *decoded = Py_NewRef(Py_None);
        return 1;
    }
    if (!PyTuple_CheckExact(names)) {
        PyErr_SetString(PyExc_TypeError, "scan: wanted maps a kind to a tuple of field names");
        goto fail;
    }
    PyObject *fields = PyDict_New();
    if (fields == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        Py_ssize_t len;
        const char *want = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &len);
        if (want == NULL) {
            Py_DECREF(fields);
            goto fail;
        }
        for (int k = 0; k < m.n; k++) {
            if (m.keys[k].len != len || memcmp(m.keys[k].start, want, len) != 0) continue;
            PyObject *value = decode_member(m.vstart[k], m.vend[k], loads);
            if (value == NULL || PyDict_SetItem(fields, PyTuple_GET_ITEM(names, i), value) < 0) {
                Py_XDECREF(value);
                Py_DECREF(fields);
                goto fail;
            }
            Py_DECREF(value);
            break;
        }
    }
    *decoded = fields;
    return 1;
fail:
    Py_CLEAR(*row);
    return -1;
}

static PyObject *scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4 || !PyList_Check(args[0]) || !PyDict_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "scan(lines: list[bytes], specs: dict, wanted: dict, loads)");
        return NULL;
    }
    PyObject *lines = args[0];
    Py_ssize_t n = PyList_GET_SIZE(lines);
    PyObject *rows = PyList_New(n), *decoded = PyList_New(n);
    if (rows == NULL || decoded == NULL) goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = NULL, *dec = NULL;
        int ok = scan_line(PyList_GET_ITEM(lines, i), args[1], args[2], args[3], &row, &dec);
        if (ok < 0) goto error;
        if (ok == 0) {
            Py_DECREF(rows);
            Py_DECREF(decoded);
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(rows, i, row);
        PyList_SET_ITEM(decoded, i, dec);
    }
    return Py_BuildValue("(NN)", rows, decoded);
error:
    Py_XDECREF(rows);
    Py_XDECREF(decoded);
    return NULL;
}

static PyMethodDef methods[] = {
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL,
     "check(events, specs) -> [indices of the events not confirmed to match the spec of their kind] (pydantic\n"
     "decides those). specs: rtxviz.event_specs.SPECS."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(lines, specs, wanted, loads) -> (rows [(kind, step, text)], decoded [dict of the wanted fields or\n"
     "None]) for NDJSON lines read and checked straight from their bytes; None when any line is not confirmed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rtxviz._eventcheck",
                                    "The server's copy-free check of decoded events (see _eventcheck.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__eventcheck(void) { return PyModule_Create(&module); }
