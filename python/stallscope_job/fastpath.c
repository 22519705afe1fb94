/* The training thread's fast paths (patches.py), compiled: the same log entries in fewer operations.
 *
 * patches.py's Python wrappers stay the whole behaviour. Each object made here is installed in
 * place of one of them (a DataLoader iterator's __next__, torch.autograd.backward, the optimizer
 * step post-hook) and does only what the Python fast path does for the training thread's usual
 * call; anything else (another thread, a pending first batch, a diagnostic clock, a flush due, an
 * unusual batch, any error before the call it wraps) goes to the Python wrapper, which decides
 * again. The reason is cost: on the 2.5 ms CPU step of `cargo xtask bench job-overhead` each
 * Python call the step passes runs cold (docs/benchmarks.md).
 *
 * Durations use CLOCK_MONOTONIC, the clock of time.perf_counter_ns on Linux (native.py checks the
 * two agree before it uses this module).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stddef.h>
#include <time.h>

#if PY_VERSION_HEX >= 0x030D0000
#define LOOKUP(obj, name, out) PyObject_GetOptionalAttr((obj), (name), (out))
#else
#define LOOKUP(obj, name, out) _PyObject_LookupAttr((obj), (name), (out))
#endif

enum { NEXT, BACKWARD, HOOK, GET, PUT };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int kind;
    PyObject *rt;     /* runtime.Runtime */
    PyObject *orig;   /* the method or function wrapped (NEXT, BACKWARD) */
    PyObject *slow;   /* patches.py's Python wrapper: the whole behaviour */
    PyObject *tensor; /* torch.Tensor */
    PyObject *grad;   /* torch.is_grad_enabled */
    PyObject *now;    /* time.perf_counter_ns (a tracker's `mark` is it outside diagnostics) */
} Fast;

static PyObject *s_fast_tid, *s_tracker, *s_src, *s_plain, *s_depth, *s_mark, *s_log, *s_delivered,
    *s_shape, *s_nbytes, *s_events, *s_lead, *s_quick, *s_copy_spans, *s_flush_at, *s_it_ref,
    *s_ended_quick, *s_sized, *s_q, *s_data, *s_pending, *s_gets, *s_live, *s_feeders,
    *s_last_feeder, *s_session, *s_counting, *s_counted_at_get, *s_count;

static long long clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Who calls: TRAINING (the training thread: `*tr` its tracker, a new reference), OTHER (another
 * thread, the training thread known), or UNKNOWN (not known yet, or an error; none set). */
enum { UNKNOWN, TRAINING, OTHER };
static int caller(Fast *f, PyObject **tr) {
    PyObject *tid = NULL;
    int who = UNKNOWN;
    *tr = NULL;
    if (LOOKUP(f->rt, s_fast_tid, &tid) > 0 && tid != Py_None) {
        unsigned long v = PyLong_AsUnsignedLong(tid);
        if (!(v == (unsigned long)-1 && PyErr_Occurred()))
            who = v == PyThread_get_thread_ident() ? TRAINING : OTHER;
    }
    Py_XDECREF(tid);
    if (who == TRAINING && (LOOKUP(f->rt, s_tracker, tr) <= 0 || *tr == Py_None)) {
        Py_CLEAR(*tr);
        who = UNKNOWN;
    }
    PyErr_Clear();
    return who;
}

/* The tracker when the training thread calls, else NULL (no error set either way). */
static PyObject *training_tracker(Fast *f) {
    PyObject *tr;
    return caller(f, &tr) == TRAINING ? tr : NULL;
}

/* obj.name's truth: 1, 0, or -1 with an error. */
static int truth(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* The source a DataLoader iterator or a queue carries (`self.__dict__.get(name)`), or NULL (no
 * error set): none, or None. */
static PyObject *own_source(PyObject *self, PyObject *name) {
    PyObject *dict = PyObject_GenericGetDict(self, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *info = PyDict_GetItemWithError(dict, name);
    Py_XINCREF(info);
    Py_DECREF(dict);
    if (info == Py_None) Py_CLEAR(info);
    PyErr_Clear();
    return info;
}

/* obj.name as a C long long, or -1 with an error (a missing attribute is an error here). */
static int get_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

static int add_ll(PyObject *obj, PyObject *name, long long delta) {
    long long v;
    return get_ll(obj, name, &v) < 0 ? -1 : set_ll(obj, name, v + delta);
}

static int append_entry(PyObject *tr, PyObject *entry) {
    if (entry == NULL) return -1;
    PyObject *log = PyObject_GetAttr(tr, s_log);
    int r = log == NULL ? -1 : PyList_Append(log, entry);
    Py_XDECREF(log);
    Py_DECREF(entry);
    return r;
}

/* `not torch.is_grad_enabled()` as a new reference. */
static PyObject *no_grad(Fast *f) {
    PyObject *g = PyObject_CallNoArgs(f->grad);
    if (g == NULL) return NULL;
    int on = PyObject_IsTrue(g);
    Py_DECREF(g);
    if (on < 0) return NULL;
    return Py_NewRef(on ? Py_False : Py_True);
}

/* (first dim of the first tensor, bytes of all) of a tuple or list of plain tensors: the usual
 * case of records.batch_size_and_bytes; NULL with no error for anything else. */
static PyObject *plain_size(Fast *f, PyObject *batch) {
    if (!PyTuple_CheckExact(batch) && !PyList_CheckExact(batch)) return NULL;
    PyObject *seq = PySequence_Fast(batch, "");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *first = Py_NewRef(Py_None);
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if ((PyObject *)Py_TYPE(t) != f->tensor) goto other;
        Py_INCREF(t);
        if (first == Py_None) {
            PyObject *shape = PyObject_GetAttr(t, s_shape);
            if (shape == NULL || !PyTuple_Check(shape)) {
                Py_XDECREF(shape);
                Py_DECREF(t);
                goto other;
            }
            if (PyTuple_GET_SIZE(shape) > 0) Py_SETREF(first, Py_NewRef(PyTuple_GET_ITEM(shape, 0)));
            Py_DECREF(shape);
        }
        long long nbytes;
        int bad = get_ll(t, s_nbytes, &nbytes);
        Py_DECREF(t);
        if (bad < 0) goto other;
        total += nbytes;
    }
    Py_DECREF(seq);
    PyObject *out = Py_BuildValue("(NL)", first, total);
    return out;
other:
    PyErr_Clear();
    Py_DECREF(seq);
    Py_DECREF(first);
    return NULL;
}

/* Whether the training thread's fetch from `info` may take the compiled path: a plain DataLoader
 * iterator (NEXT) or a data queue with no gets pending (GET); not nested; no diagnostic clock. */
static int fetch_usual(Fast *f, PyObject *info, PyObject *tr) {
    if (f->kind == NEXT) {
        if (truth(info, s_plain) != 1) return 0;
    } else {
        if (truth(info, s_data) != 1) return 0;
        PyObject *pending = PyObject_GetAttr(info, s_pending);
        Py_XDECREF(pending);
        if (pending != Py_None) return 0;
    }
    if (truth(tr, s_depth) != 0) return 0;
    PyObject *mark = PyObject_GetAttr(tr, s_mark);
    Py_XDECREF(mark);
    return mark == f->now;
}

/* What went wrong in the bookkeeping after the call, to the Python side (rt.fail); the call's
 * result goes to the script all the same. */
static void report(Fast *f, const char *where) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *r = PyObject_CallMethod(f->slow, "failed", "sO", where, v ? v : Py_None);
    Py_XDECREF(r);
    PyErr_Clear();
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}

/* (samples, bytes) of a fetched item: the usual tuple or list of tensors here, the rest (and
 * any error, reported) by the Python side's `sized`; NULL with an error only if that fails. */
static PyObject *item_size(Fast *f, PyObject *item) {
    PyObject *got = plain_size(f, item);
    return got != NULL ? got : PyObject_CallMethodOneArg(f->slow, s_sized, item);
}

/* The training thread's fetch, timed: a DataLoader `next()` (NEXT) or a data queue's `get` (GET),
 * as patches.py's Python fast path does it. `*handled` 0: nothing done, the Python wrapper takes
 * the call. */
static PyObject *fetch_fast(Fast *f, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                            PyObject *tr, int *handled) {
    *handled = 0;
    PyObject *info = own_source(args[0], f->kind == NEXT ? s_src : s_q);
    if (info == NULL) return NULL;
    int usual = fetch_usual(f, info, tr);
    PyErr_Clear();
    long long t0 = clock_ns();
    if (usual != 1 || set_ll(tr, s_depth, t0) < 0) {
        PyErr_Clear();
        Py_DECREF(info);
        return NULL;
    }
    *handled = 1;
    PyObject *item = PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
    long long end = clock_ns();
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb); /* the call's exception, restored below */
    int ok = set_ll(tr, s_depth, 0) == 0;
    int stopped = f->kind == NEXT && item == NULL && et != NULL &&
                  PyErr_GivenExceptionMatches(et, PyExc_StopIteration);
    PyObject *got = Py_NewRef(Py_None);
    if (ok && item != NULL && item != Py_None) {
        Py_SETREF(got, item_size(f, item));
        ok = got != NULL;
    }
    /* A next() that raised anything but StopIteration leaves no entry; a get always does. */
    if (ok && (f->kind == GET || item != NULL || stopped)) {
        PyObject *ng = no_grad(f);
        ok = ng != NULL &&
             append_entry(tr, Py_BuildValue("(LLLOOON)", t0, end, end, info, got,
                                            stopped ? Py_True : Py_False, ng)) == 0;
        if (ok && (f->kind == GET || item != NULL))
            ok = add_ll(info, f->kind == NEXT ? s_delivered : s_gets, 1) == 0;
    }
    Py_XDECREF(got);
    Py_DECREF(info);
    if (!ok) {
        if (item != NULL) report(f, "measuring a fetch");
        else PyErr_Clear(); /* (as in Python, the script's own exception wins) */
    }
    if (item == NULL) PyErr_Restore(et, ev, etb);
    return item;
}

/* A known feeder thread's `next()` on the DataLoader it feeds from: the batch, counted. */
static PyObject *feeder_next(Fast *f, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                             int *handled) {
    PyObject *info = own_source(args[0], s_src), *tr = NULL, *feeders = NULL, *tid = NULL;
    *handled = 0;
    if (info == NULL) return NULL;
    if (truth(info, s_plain) != 1 || LOOKUP(f->rt, s_tracker, &tr) <= 0 ||
        (feeders = PyObject_GetAttr(tr, s_feeders)) == NULL || !PyDict_Check(feeders) ||
        (tid = PyLong_FromUnsignedLong(PyThread_get_thread_ident())) == NULL ||
        PyDict_GetItemWithError(feeders, tid) != info) {
        PyErr_Clear();
        Py_XDECREF(tr);
        Py_XDECREF(feeders);
        Py_XDECREF(tid);
        Py_DECREF(info);
        return NULL;
    }
    Py_DECREF(tr);
    Py_DECREF(feeders);
    Py_DECREF(tid);
    *handled = 1;
    PyObject *batch = PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
    if (batch == NULL) {
        Py_DECREF(info);
        return NULL;
    }
    int ok = add_ll(info, s_delivered, 1) == 0;
    PyObject *session = ok ? PyObject_GetAttr(f->rt, s_session) : NULL;
    int counting = session == NULL ? -1 : truth(session, s_counting);
    Py_XDECREF(session);
    ok = counting >= 0;
    if (counting == 1) {
        int at_get = truth(info, s_counted_at_get);
        ok = at_get >= 0;
        if (at_get == 0) {
            PyObject *r = PyObject_CallMethodObjArgs(f->rt, s_count, info, batch, NULL);
            ok = r != NULL;
            Py_XDECREF(r);
        }
    }
    if (!ok) report(f, "counting a feeder's batch");
    Py_DECREF(info);
    return batch;
}

/* The training thread's fast path for NEXT and GET, a known feeder's for NEXT, else Python. */
static PyObject *call_fetch(Fast *f, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (f->kind == GET ? nargs >= 1 && nargs <= 3 : nargs == 1 && kwnames == NULL) {
        PyObject *tr, *r = NULL;
        int handled = 0, who = caller(f, &tr);
        if (who == TRAINING) {
            r = fetch_fast(f, args, nargsf, kwnames, tr, &handled);
            Py_DECREF(tr);
        } else if (who == OTHER && f->kind == NEXT) {
            r = feeder_next(f, args, nargsf, kwnames, &handled);
        }
        if (handled) return r;
        PyErr_Clear();
    }
    return PyObject_Vectorcall(f->slow, args, nargsf, kwnames);
}

/* A put by a feeder already seen putting into this queue (nothing new to learn): straight on. */
static PyObject *call_put(Fast *f, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) >= 1 && truth(f->rt, s_live) == 1) {
        PyObject *info = own_source(args[0], s_q), *tr = NULL, *feeders = NULL, *last = NULL;
        PyObject *tid = NULL;
        int known = 0;
        if (info != NULL && LOOKUP(f->rt, s_tracker, &tr) > 0 &&
            (feeders = PyObject_GetAttr(tr, s_feeders)) != NULL && PyDict_Check(feeders) &&
            (tid = PyLong_FromUnsignedLong(PyThread_get_thread_ident())) != NULL &&
            (last = PyObject_GetAttr(info, s_last_feeder)) != NULL) {
            PyObject *feeder = PyDict_GetItemWithError(feeders, tid);
            known = feeder != NULL ? last == feeder : (!PyErr_Occurred() && last == info);
        }
        PyErr_Clear();
        Py_XDECREF(info);
        Py_XDECREF(tr);
        Py_XDECREF(feeders);
        Py_XDECREF(tid);
        Py_XDECREF(last);
        if (known) return PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
    }
    PyErr_Clear();
    return PyObject_Vectorcall(f->slow, args, nargsf, kwnames);
}

static PyObject *call_backward(Fast *f, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *tr = training_tracker(f);
    if (tr == NULL) return PyObject_Vectorcall(f->slow, args, nargsf, kwnames);
    int ok = add_ll(tr, s_events, 1) == 0 &&
             append_entry(tr, Py_BuildValue("(L)", clock_ns())) == 0;
    Py_DECREF(tr);
    if (!ok) { /* before anything else ran: the Python wrapper takes the call */
        PyErr_Clear();
        return PyObject_Vectorcall(f->slow, args, nargsf, kwnames);
    }
    return PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
}

/* Tracker.quick_end, step for step; 1 done, 0 not the usual step (nothing changed), -1 error. */
static int quick_end(Fast *f, PyObject *tr) {
    PyObject *log = NULL, *spans = NULL, *mark = NULL, *ref = NULL, *ended_quick = NULL;
    int r = -1;
    if ((log = PyObject_GetAttr(tr, s_log)) == NULL || !PyList_CheckExact(log)) goto out;
    Py_ssize_t n = PyList_GET_SIZE(log);
    r = 0;
    if (n != 1 && (n != 2 || !PyTuple_Check(PyList_GET_ITEM(log, 1)) ||
                   PyTuple_GET_SIZE(PyList_GET_ITEM(log, 1)) != 1))
        goto out;
    r = -1;
    if ((spans = PyObject_GetAttr(tr, s_copy_spans)) == NULL) goto out;
    int busy = PyObject_IsTrue(spans);
    if (busy != 0) {
        r = busy < 0 ? -1 : 0;
        goto out;
    }
    PyObject *entry = PyList_GET_ITEM(log, 0);
    r = 0;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 7 ||
        PyTuple_GET_ITEM(entry, 6) != Py_False || PyTuple_GET_ITEM(entry, 4) == Py_None)
        goto out;
    r = -1;
    if ((mark = PyObject_GetAttr(tr, s_mark)) == NULL) goto out;
    r = 0;
    if (mark != f->now) goto out;
    long long t = clock_ns(), flush_at, t0, returned, synced;
    r = -1;
    if (get_ll(tr, s_flush_at, &flush_at) < 0) goto out;
    r = 0;
    if (t >= flush_at) goto out;
    r = -1;
    t0 = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 0));
    returned = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 1));
    synced = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 2));
    if (PyErr_Occurred()) goto out;
    PyObject *source = PyTuple_GET_ITEM(entry, 3);
    if ((ref = PyObject_GetAttr(source, s_it_ref)) == NULL) goto out;
    int ended = 0;
    if (ref != Py_None) {
        PyObject *it = PyObject_CallNoArgs(ref);
        if (it == NULL) goto out;
        ended = it == Py_None;
        Py_DECREF(it);
    }
    if ((ended_quick = PyObject_GetAttr(tr, s_ended_quick)) == NULL) goto out;
    PyObject *row = Py_BuildValue("(LLLOOO)", t, returned - t0, synced - t0,
                                  PyTuple_GET_ITEM(entry, 4), source, ended ? Py_True : Py_False);
    if (row == NULL) goto out;
    int appended = PyList_Append(ended_quick, row);
    Py_DECREF(row);
    if (appended < 0 || PyList_SetSlice(log, 0, n, NULL) < 0 || add_ll(tr, s_events, 1) < 0 ||
        add_ll(tr, s_quick, -1) < 0)
        goto out;
    r = 1;
out:
    Py_XDECREF(log);
    Py_XDECREF(spans);
    Py_XDECREF(mark);
    Py_XDECREF(ref);
    Py_XDECREF(ended_quick);
    return r;
}

static PyObject *call_hook(Fast *f, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) >= 1 && kwnames == NULL) {
        PyObject *tr = training_tracker(f);
        if (tr != NULL) {
            PyObject *lead = PyObject_GetAttr(tr, s_lead), *quick = NULL;
            int done = 0;
            if (lead == args[0] && (quick = PyObject_GetAttr(tr, s_quick)) != NULL &&
                PyObject_IsTrue(quick) == 1)
                done = quick_end(f, tr);
            Py_XDECREF(lead);
            Py_XDECREF(quick);
            Py_DECREF(tr);
            /* An error here is met again by Tracker.quick_end, which reports it. */
            PyErr_Clear();
            if (done == 1) Py_RETURN_NONE;
        }
    }
    return PyObject_Vectorcall(f->slow, args, nargsf, kwnames);
}

static PyObject *fast_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    Fast *f = (Fast *)self;
    switch (f->kind) {
    case NEXT: case GET: return call_fetch(f, args, nargsf, kwnames);
    case BACKWARD: return call_backward(f, args, nargsf, kwnames);
    case PUT: return call_put(f, args, nargsf, kwnames);
    default: return call_hook(f, args, nargsf, kwnames);
    }
}

/* As a class attribute (__next__) it binds like a Python function. */
static PyObject *fast_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type)) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int fast_traverse(Fast *f, visitproc visit, void *arg) {
    Py_VISIT(f->rt);
    Py_VISIT(f->orig);
    Py_VISIT(f->slow);
    Py_VISIT(f->tensor);
    Py_VISIT(f->grad);
    Py_VISIT(f->now);
    return 0;
}

static int fast_clear(Fast *f) {
    Py_CLEAR(f->rt);
    Py_CLEAR(f->orig);
    Py_CLEAR(f->slow);
    Py_CLEAR(f->tensor);
    Py_CLEAR(f->grad);
    Py_CLEAR(f->now);
    return 0;
}

static void fast_dealloc(Fast *f) {
    PyObject_GC_UnTrack(f);
    fast_clear(f);
    PyObject_GC_Del(f);
}

static PyTypeObject FastType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_stallscope_fast.Fast",
    .tp_basicsize = sizeof(Fast),
    .tp_dealloc = (destructor)fast_dealloc,
    .tp_vectorcall_offset = offsetof(Fast, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_traverse = (traverseproc)fast_traverse,
    .tp_clear = (inquiry)fast_clear,
    .tp_descr_get = fast_get,
};

/* make(kind, rt, orig, slow, tensor, grad_enabled, now): one of the three fast paths. */
static PyObject *make(PyObject *Py_UNUSED(module), PyObject *args) {
    int kind;
    PyObject *rt, *orig, *slow, *tensor, *grad, *now;
    if (!PyArg_ParseTuple(args, "iOOOOOO", &kind, &rt, &orig, &slow, &tensor, &grad, &now))
        return NULL;
    if (kind < NEXT || kind > PUT) {
        PyErr_SetString(PyExc_ValueError, "kind is 0 (next), 1 (backward), 2 (hook), 3 (get), 4 (put)");
        return NULL;
    }
    Fast *f = PyObject_GC_New(Fast, &FastType);
    if (f == NULL) return NULL;
    f->vectorcall = fast_vectorcall;
    f->kind = kind;
    f->rt = Py_NewRef(rt);
    f->orig = Py_NewRef(orig);
    f->slow = Py_NewRef(slow);
    f->tensor = Py_NewRef(tensor);
    f->grad = Py_NewRef(grad);
    f->now = Py_NewRef(now);
    PyObject_GC_Track(f);
    return (PyObject *)f;
}

static PyObject *now_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused)) {
    return PyLong_FromLongLong(clock_ns());
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, "make(kind, rt, orig, slow, tensor, grad_enabled, now)"},
    {"now", now_ns, METH_NOARGS, "The clock the fast paths read, in ns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_stallscope_fast", "stallscope's compiled fast paths", -1, methods,
    NULL, NULL, NULL, NULL,
};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__stallscope_fast(void) {
    INTERN(s_fast_tid, "fast_tid");
    INTERN(s_tracker, "tracker");
    INTERN(s_src, "_stallscope_src");
    INTERN(s_plain, "plain");
    INTERN(s_depth, "depth");
    INTERN(s_mark, "mark");
    INTERN(s_log, "log");
    INTERN(s_delivered, "delivered");
    INTERN(s_shape, "shape");
    INTERN(s_nbytes, "nbytes");
    INTERN(s_events, "events");
    INTERN(s_lead, "lead");
    INTERN(s_quick, "quick");
    INTERN(s_copy_spans, "copy_spans");
    INTERN(s_flush_at, "flush_at");
    INTERN(s_it_ref, "it_ref");
    INTERN(s_ended_quick, "ended_quick");
    INTERN(s_sized, "sized");
    INTERN(s_q, "_stallscope_q");
    INTERN(s_data, "data");
    INTERN(s_pending, "pending");
    INTERN(s_gets, "gets");
    INTERN(s_live, "live");
    INTERN(s_feeders, "feeders");
    INTERN(s_last_feeder, "last_feeder");
    INTERN(s_session, "session");
    INTERN(s_counting, "counting");
    INTERN(s_counted_at_get, "counted_at_get");
    INTERN(s_count, "count");
    if (PyType_Ready(&FastType) < 0) return NULL;
    return PyModule_Create(&moddef);
}
