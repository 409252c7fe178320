/* smelt._smelt: the CPython extension under the smelt package (python/src/smelt).
 * A thin layer over include/smelt.h: sessions, runs over buffer-protocol
 * inputs (read in place, no copy) and outputs handed out as Buffer objects
 * that own smelt's memory (numpy.asarray views them; the memory goes back
 * with smelt_tensor_release when the last view dies).  Built with NumPy's
 * headers, run_arrays is the same run for NumPy arrays through NumPy's C API:
 * the arrays read directly and the outputs made as NumPy arrays whose base
 * is the Buffer (Session.run's fast path).  The GIL is released
 * while smelt runs.  Error classes come from smelt/errors.py (set_errors). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "smelt.h"

#ifdef SMELT_PY_NUMPY /* NumPy's C API: Session.run's fast path (run_arrays) */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL smelt_ARRAY_API
#include <numpy/arrayobject.h>
static bool numpy_api; /* NumPy's C API imported (PyInit__smelt) */
#endif

static PyObject *error_classes; /* tuple indexed by smelt_status; [0] = smelt.Error */

static PyObject *raise_status(smelt_status s, const char *msg) {
  PyObject *cls = PyExc_RuntimeError;
  if (error_classes && PyTuple_Check(error_classes)) {
    Py_ssize_t n = PyTuple_GET_SIZE(error_classes);
    cls = PyTuple_GET_ITEM(error_classes, (Py_ssize_t)s < n ? (Py_ssize_t)s : 0);
  }
  PyObject *args = Py_BuildValue("(si)", msg, (int)s);
  if (args) {
    PyErr_SetObject(cls, args);
    Py_DECREF(args);
  }
  return NULL;
}

static PyObject *raise_last(smelt_status s) { return raise_status(s, smelt_last_error()); }

/* ---- dtype <-> buffer format ---- */

static const char *dtype_format(smelt_dtype t) {
  switch (t) {
    case SMELT_F32: return "f";
    case SMELT_F64: return "d";
    case SMELT_F16: return "e";
    case SMELT_I8: return "b";
    case SMELT_U8: return "B";
    case SMELT_I16: return "h";
    case SMELT_U16: return "H";
    case SMELT_I32: return "i";
    case SMELT_U32: return "I";
    case SMELT_I64: return "q";
    case SMELT_U64: return "Q";
    case SMELT_BOOL: return "?";
    default: return NULL;
  }
}

static smelt_dtype format_dtype(const char *f, Py_ssize_t itemsize) {
  if (!f) return SMELT_U8;
  if (*f == '@' || *f == '=' || *f == '<') f++;
  if (!f[0] || f[1]) return SMELT_UNDEFINED;
  switch (*f) {
    case 'f': return SMELT_F32;
    case 'd': return SMELT_F64;
    case 'e': return SMELT_F16;
    case 'b': return SMELT_I8;
    case 'B': return SMELT_U8;
    case 'h': return SMELT_I16;
    case 'H': return SMELT_U16;
    case 'i': return SMELT_I32;
    case 'I': return SMELT_U32;
    case 'l': case 'q': return itemsize == 8 ? SMELT_I64 : SMELT_I32;
    case 'L': case 'Q': return itemsize == 8 ? SMELT_U64 : SMELT_U32;
    case '?': return SMELT_BOOL;
    default: return SMELT_UNDEFINED;
  }
}

/* ---- Buffer: one output tensor smelt allocated ---- */

typedef struct {
  PyObject_HEAD
  smelt_tensor t;
  Py_ssize_t shape[SMELT_MAX_RANK];
  Py_ssize_t strides[SMELT_MAX_RANK];
} BufferObject;

static void buffer_dealloc(BufferObject *b) {
  smelt_tensor_release(&b->t);
  Py_TYPE(b)->tp_free((PyObject *)b);
}

static int buffer_getbuffer(BufferObject *b, Py_buffer *view, int flags) {
  const char *fmt = dtype_format(b->t.dtype);
  if (!fmt) {
    PyErr_SetString(PyExc_BufferError, "smelt output dtype has no buffer format");
    view->obj = NULL;
    return -1;
  }
  size_t item = smelt_dtype_size(b->t.dtype);
  view->buf = b->t.data;
  view->obj = (PyObject *)b;
  Py_INCREF(b);
  view->len = (Py_ssize_t)b->t.nbytes;
  view->readonly = 0;
  view->itemsize = (Py_ssize_t)item;
  view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
  view->ndim = b->t.rank;
  view->shape = (flags & PyBUF_ND) ? b->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? b->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static PyBufferProcs buffer_procs = {(getbufferproc)buffer_getbuffer, NULL};

static PyObject *buffer_nbytes(BufferObject *b, void *closure) {
  return PyLong_FromSize_t(b->t.nbytes);
}

static PyObject *buffer_address(BufferObject *b, void *closure) {
  return PyLong_FromVoidPtr(b->t.data);
}

static PyGetSetDef buffer_getset[] = {
    {"nbytes", (getter)buffer_nbytes, NULL, "bytes of data", NULL},
    {"address", (getter)buffer_address, NULL, "address of smelt's buffer", NULL},
    {NULL}};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smelt._smelt.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An output tensor allocated by smelt; freed when the last view of it dies.",
    .tp_getset = buffer_getset,
};

static PyObject *buffer_new(smelt_tensor *t) {
  BufferObject *b = PyObject_New(BufferObject, &BufferType);
  if (!b) {
    smelt_tensor_release(t);
    return NULL;
  }
  b->t = *t;
  b->t.name = NULL;
  size_t item = smelt_dtype_size(t->dtype);
  Py_ssize_t stride = (Py_ssize_t)item;
  for (int i = t->rank - 1; i >= 0; i--) {
    b->shape[i] = (Py_ssize_t)t->dims[i];
    b->strides[i] = stride;
    stride *= (Py_ssize_t)t->dims[i];
  }
  return (PyObject *)b;
}

#ifdef SMELT_PY_NUMPY
/* The smelt dtype of a NumPy array's elements, SMELT_UNDEFINED if smelt has none. */
static smelt_dtype npy_dtype(PyArrayObject *a) {
  int item = (int)PyArray_ITEMSIZE(a);
  switch (PyArray_DESCR(a)->kind) {
    case 'f': return item == 4 ? SMELT_F32 : item == 8 ? SMELT_F64 : item == 2 ? SMELT_F16 : SMELT_UNDEFINED;
    case 'i': return item == 1 ? SMELT_I8 : item == 2 ? SMELT_I16 : item == 4 ? SMELT_I32 : item == 8 ? SMELT_I64 : SMELT_UNDEFINED;
    case 'u': return item == 1 ? SMELT_U8 : item == 2 ? SMELT_U16 : item == 4 ? SMELT_U32 : item == 8 ? SMELT_U64 : SMELT_UNDEFINED;
    case 'b': return item == 1 ? SMELT_BOOL : SMELT_UNDEFINED;
    default: return SMELT_UNDEFINED;
  }
}

static int npy_type(smelt_dtype t) {
  switch (t) {
    case SMELT_F32: return NPY_FLOAT32;
    case SMELT_F64: return NPY_FLOAT64;
    case SMELT_F16: return NPY_FLOAT16;
    case SMELT_I8: return NPY_INT8;
    case SMELT_U8: return NPY_UINT8;
    case SMELT_I16: return NPY_INT16;
    case SMELT_U16: return NPY_UINT16;
    case SMELT_I32: return NPY_INT32;
    case SMELT_U32: return NPY_UINT32;
    case SMELT_I64: return NPY_INT64;
    case SMELT_U64: return NPY_UINT64;
    case SMELT_BOOL: return NPY_BOOL;
    default: return -1;
  }
}

/* b (a new Buffer, stolen) as a writable NumPy array over its memory, whose
 * base it becomes.  A dtype NumPy has no type for goes through
 * numpy.asarray's own path (PyArray_FromAny), as the general run does: the
 * same array or the same error. */
static PyObject *buffer_ndarray(PyObject *b) {
  BufferObject *bo = (BufferObject *)b;
  int type = npy_type(bo->t.dtype);
  if (type < 0) {
    PyObject *a = PyArray_FromAny(b, NULL, 0, 0, 0, NULL);
    Py_DECREF(b);
    return a;
  }
  npy_intp dims[SMELT_MAX_RANK];
  for (int i = 0; i < bo->t.rank; i++) dims[i] = (npy_intp)bo->t.dims[i];
  PyObject *a = PyArray_New(&PyArray_Type, bo->t.rank, dims, type, NULL, bo->t.data, 0, NPY_ARRAY_CARRAY, NULL);
  if (!a) {
    Py_DECREF(b);
    return NULL;
  }
  if (PyArray_SetBaseObject((PyArrayObject *)a, b) < 0) { /* steals b, on failure too */
    Py_DECREF(a);
    return NULL;
  }
  return a;
}
#else
static PyObject *buffer_ndarray(PyObject *b) { return b; }
#endif

/* ---- Session ---- */

typedef struct {
  PyObject_HEAD
  smelt_model *model;
  smelt_session *session;
  int active; /* runs in flight (counted under the GIL) */
  PyObject *in_names;  /* tuple of str */
  PyObject *out_names; /* tuple of str */
  int n_outputs;
  void *last_inputs[8]; /* data pointers of the last run's first inputs (tests: no copy) */
  double last_run_s;    /* seconds the last smelt_session_run took (bench/py_overhead.py) */
  PyObject *consts;     /* list of memoryviews the model's bound constants view (kept until close) */
} SessionObject;

static void session_close_impl(SessionObject *s) {
  smelt_session *session = s->session;
  smelt_model *model = s->model;
  s->session = NULL;
  s->model = NULL;
  /* both may wait for their cache writers (prepared weights, the model
   * file's image): other Python threads go on meanwhile */
  Py_BEGIN_ALLOW_THREADS
  smelt_session_free(session);
  smelt_model_free(model);
  Py_END_ALLOW_THREADS
  Py_CLEAR(s->consts); /* after the model: it viewed them */
}

/* consts: a sequence of (name, array) pairs, each array exporting a
 * C-contiguous buffer.  Fills t[0..n) viewing them and returns a new list of
 * the memoryviews that keep them alive (NULL with an exception set). */
static PyObject *consts_views(PyObject *consts, smelt_tensor **t_out, Py_ssize_t *n_out) {
  PyObject *seq = PySequence_Fast(consts, "consts must be a sequence of (name, array) pairs");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject *keep = PyList_New(0);
  smelt_tensor *t = PyMem_Calloc(n ? (size_t)n : 1, sizeof *t);
  if (!keep || !t) {
    if (!t) PyErr_NoMemory();
    goto fail;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *pair = PySequence_Fast_GET_ITEM(seq, i), *name, *arr;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
      PyErr_Format(PyExc_TypeError, "consts[%zd] is not a (name, array) pair", i);
      goto fail;
    }
    name = PyTuple_GET_ITEM(pair, 0);
    arr = PyTuple_GET_ITEM(pair, 1);
    const char *cname = PyUnicode_AsUTF8(name);
    if (!cname) goto fail;
    PyObject *mv = PyMemoryView_FromObject(arr);
    if (!mv) goto fail;
    int bad = PyList_Append(keep, mv);
    Py_DECREF(mv);
    if (bad) goto fail;
    Py_buffer *v = PyMemoryView_GET_BUFFER(mv);
    if (!PyBuffer_IsContiguous(v, 'C') || v->ndim > SMELT_MAX_RANK) {
      PyErr_Format(PyExc_ValueError, "consts %s: not a C-contiguous array of rank <= %d", cname, SMELT_MAX_RANK);
      goto fail;
    }
    t[i].name = cname; /* owned by the name object, alive in seq's caller */
    t[i].dtype = format_dtype(v->format ? v->format : "B", v->itemsize);
    if (t[i].dtype == SMELT_UNDEFINED) {
      PyErr_Format(PyExc_TypeError, "consts %s: unsupported element format %s", cname, v->format ? v->format : "B");
      goto fail;
    }
    t[i].rank = v->ndim;
    for (int d = 0; d < v->ndim; d++) t[i].dims[d] = (int64_t)v->shape[d];
    t[i].data = v->buf;
    t[i].nbytes = (size_t)v->len;
  }
  Py_DECREF(seq);
  *t_out = t;
  *n_out = n;
  return keep;
fail:
  PyMem_Free(t);
  Py_XDECREF(keep);
  Py_DECREF(seq);
  return NULL;
}

static void session_dealloc(SessionObject *s) {
  session_close_impl(s);
  Py_XDECREF(s->in_names);
  Py_XDECREF(s->out_names);
  Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *names_tuple(const smelt_model *m, int input) {
  int n = input ? smelt_model_num_inputs(m) : smelt_model_num_outputs(m);
  PyObject *t = PyTuple_New(n);
  if (!t) return NULL;
  for (int i = 0; i < n; i++) {
    smelt_value_info vi;
    smelt_status st = input ? smelt_model_input(m, i, &vi) : smelt_model_output(m, i, &vi);
    if (st) {
      Py_DECREF(t);
      return raise_last(st);
    }
    PyObject *name = PyUnicode_FromString(vi.name ? vi.name : "");
    if (!name) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, name);
  }
  return t;
}

static int session_init(SessionObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"source", "mode", "threads", "dims", "cache_dir", "buckets",
                           "dynamic", "fullgraph", "recompile_limit", "precision", "device", "consts", NULL};
  PyObject *source, *consts = Py_None;
  const char *mode = "default", *dims = NULL, *cache_dir = NULL, *buckets = NULL, *precision = "fp32", *device = NULL;
  int threads = 0, dynamic = 0, fullgraph = 0, recompile_limit = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sizzzppiszO", kwlist, &source, &mode, &threads,
                                   &dims, &cache_dir, &buckets, &dynamic, &fullgraph,
                                   &recompile_limit, &precision, &device, &consts))
    return -1;
  if (self->session) {
    PyErr_SetString(PyExc_RuntimeError, "Session.__init__ called twice");
    return -1;
  }
  smelt_session_options opts = smelt_session_options_default();
  opts.log = smelt_log_stderr; /* the library's warnings, on stderr as the CLI shows them */
  smelt_status st = smelt_mode_parse(mode, &opts.mode);
  if (st) {
    raise_last(st);
    return -1;
  }
  st = smelt_precision_parse(precision, &opts.precision);
  if (st) {
    raise_last(st);
    return -1;
  }
  opts.threads = threads;
  opts.dims = dims;
  opts.cache_dir = cache_dir;
  opts.buckets = buckets;
  opts.dynamic = dynamic;
  opts.fullgraph = fullgraph;
  if (recompile_limit >= 0) opts.recompile_limit = recompile_limit;
  opts.device = device; /* copied (resolved to the device's name) by smelt_session_create */

  smelt_model *m = NULL;
  if (PyBytes_Check(source) || PyByteArray_Check(source) || PyMemoryView_Check(source)) {
    Py_buffer view;
    smelt_tensor *ct = NULL;
    Py_ssize_t nc = 0;
    if (consts != Py_None && !(self->consts = consts_views(consts, &ct, &nc))) return -1;
    if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0) {
      PyMem_Free(ct);
      Py_CLEAR(self->consts);
      return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    st = nc ? smelt_model_load_bytes_with(view.buf, (size_t)view.len, ct, (size_t)nc, &m)
            : smelt_model_load_bytes(view.buf, (size_t)view.len, &m);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyMem_Free(ct);
    if (st) Py_CLEAR(self->consts);
  } else if (consts != Py_None) {
    PyErr_SetString(PyExc_ValueError, "consts need the model given as bytes, not a path");
    return -1;
  } else {
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(source, &bytes)) return -1;
    const char *path = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    st = smelt_model_load(path, &m);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
  }
  if (st) {
    raise_last(st);
    return -1;
  }
  smelt_session *s = NULL;
  Py_BEGIN_ALLOW_THREADS
  st = smelt_session_create(m, &opts, &s);
  Py_END_ALLOW_THREADS
  if (st) {
    raise_last(st);
    smelt_model_free(m);
    Py_CLEAR(self->consts);
    return -1;
  }
  self->model = m;
  self->session = s;
  self->n_outputs = smelt_model_num_outputs(m);
  self->in_names = names_tuple(m, 1);
  self->out_names = self->in_names ? names_tuple(m, 0) : NULL;
  return self->out_names ? 0 : -1;
}

static int check_open(SessionObject *s) {
  if (s->session) return 0;
  raise_status(SMELT_ERR_INVALID_ARGUMENT, "the session is closed");
  return -1;
}

/* Runs the session on ins[0..n) with the GIL released; the outputs as a new
 * list: with nd, NumPy arrays viewing smelt's buffers wherever the dtype has a
 * NumPy type (the array's base is the Buffer that owns the memory), else
 * Buffer objects.  NULL with the error set on failure (outputs already made
 * are released). */
static PyObject *run_outputs(SessionObject *self, smelt_tensor *ins, Py_ssize_t n, int nd) {
  int n_out = self->n_outputs;
  smelt_tensor outs_stack[16];
  smelt_tensor *outs = n_out <= 16 ? outs_stack : PyMem_Calloc((size_t)n_out, sizeof *outs);
  if (!outs) return PyErr_NoMemory();
  memset(outs, 0, (size_t)n_out * sizeof *outs);
  smelt_status st;
  const char *msg = NULL;
  struct timespec t0, t1;
  self->active++;
  Py_BEGIN_ALLOW_THREADS
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = smelt_session_run(self->session, ins, (size_t)n, outs, (size_t)n_out);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (st) msg = smelt_last_error(); /* per thread: read it before taking the GIL back */
  Py_END_ALLOW_THREADS
  self->active--;
  self->last_run_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (st) {
    if (outs != outs_stack) PyMem_Free(outs);
    return raise_status(st, msg);
  }
  PyObject *res = PyList_New(n_out);
  for (int i = 0; i < n_out; i++) {
    PyObject *b = res ? buffer_new(&outs[i]) : NULL;
    if (b && nd) b = buffer_ndarray(b);
    if (!b) {
      for (int j = i + (res ? 1 : 0); j < n_out; j++) smelt_tensor_release(&outs[j]);
      Py_XDECREF(res);
      res = NULL;
      break;
    }
    PyList_SET_ITEM(res, i, b);
  }
  if (outs != outs_stack) PyMem_Free(outs);
  return res;
}

/* names: None or a sequence of str as long as the inputs; 0, or -1 with the
 * error set.  *nseq: a new reference to the sequence, or NULL for None. */
static int names_seq(PyObject *names, Py_ssize_t n, PyObject **nseq) {
  *nseq = NULL;
  if (names == Py_None) return 0;
  *nseq = PySequence_Fast(names, "names must be a sequence of str");
  if (!*nseq) return -1;
  if (PySequence_Fast_GET_SIZE(*nseq) == n) return 0;
  PyErr_SetString(PyExc_ValueError, "names and arrays differ in length");
  Py_CLEAR(*nseq);
  return -1;
}

/* run(arrays, names=None) -> list of Buffer.  arrays: a sequence of objects
 * exporting a C-contiguous buffer; names: None (by position) or a sequence of
 * str of the same length. */
static PyObject *session_run(SessionObject *self, PyObject *args) {
  PyObject *arrays, *names = Py_None;
  if (!PyArg_ParseTuple(args, "O|O", &arrays, &names)) return NULL;
  if (check_open(self)) return NULL;
  PyObject *seq = PySequence_Fast(arrays, "inputs must be a sequence of arrays");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject *nseq = NULL, *res = NULL;
  if (names_seq(names, n, &nseq)) goto fail_seq;
  if (n > 64) {
    raise_status(SMELT_ERR_INVALID_ARGUMENT, "more than 64 inputs given");
    goto fail_seq;
  }
  Py_buffer views[64];
  smelt_tensor ins[64];
  Py_ssize_t got = 0;
  for (; got < n; got++) {
    PyObject *a = PySequence_Fast_GET_ITEM(seq, got);
    smelt_tensor *t = &ins[got];
    memset(t, 0, sizeof *t);
    if (nseq) {
      t->name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(nseq, got));
      if (!t->name) goto fail_views;
    }
    if (PyObject_GetBuffer(a, &views[got], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "input %zd: not a C-contiguous array", got);
      goto fail_views;
    }
    Py_buffer *v = &views[got];
    t->dtype = format_dtype(v->format, v->itemsize);
    if (t->dtype == SMELT_UNDEFINED || smelt_dtype_size(t->dtype) != (size_t)v->itemsize) {
      got++;
      raise_status(SMELT_ERR_INVALID_ARGUMENT, "input has an element type smelt does not read");
      goto fail_views;
    }
    if (v->ndim > SMELT_MAX_RANK) {
      got++;
      raise_status(SMELT_ERR_INVALID_ARGUMENT, "input has more than 12 dimensions");
      goto fail_views;
    }
    t->rank = v->ndim;
    for (int d = 0; d < v->ndim; d++) t->dims[d] = v->shape[d];
    t->data = v->buf;
    t->nbytes = (size_t)v->len;
    if (got < 8) self->last_inputs[got] = v->buf;
  }
  res = run_outputs(self, ins, n, 0);
fail_views:
  for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
fail_seq:
  Py_DECREF(seq);
  Py_XDECREF(nseq);
  return res;
}

/* run_arrays(arrays, names=None) -> list of numpy.ndarray, or NotImplemented.
 * The fast path of Session.run: arrays a list or tuple of NumPy arrays, each
 * C-contiguous, aligned, in native byte order and of a dtype smelt reads;
 * their data is read in place, and the outputs come back as NumPy arrays
 * over smelt's buffers.  Anything else answers NotImplemented before
 * running, and the caller takes the general path (run).  Without NumPy's C
 * API at build time, always NotImplemented.  (METH_FASTCALL: a run right
 * after a long one finds the interpreter's caches cold, so every step here
 * counts; bench/py_overhead.py.) */
static PyObject *session_run_arrays(SessionObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "run_arrays(arrays, names=None)");
    return NULL;
  }
  PyObject *arrays = args[0], *names = nargs > 1 ? args[1] : Py_None;
  if (check_open(self)) return NULL;
#ifdef SMELT_PY_NUMPY
  if (!numpy_api || (!PyList_CheckExact(arrays) && !PyTuple_CheckExact(arrays))) Py_RETURN_NOTIMPLEMENTED;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(arrays);
  if (n > 64) Py_RETURN_NOTIMPLEMENTED;
  smelt_tensor ins[64];
  PyObject *held[64]; /* a reference to each array while smelt reads it (the list may change meanwhile) */
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *a = PySequence_Fast_GET_ITEM(arrays, i);
    if (!PyArray_Check(a)) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *arr = (PyArrayObject *)a;
    int flags = PyArray_FLAGS(arr);
    smelt_dtype dt = npy_dtype(arr);
    if (!(flags & NPY_ARRAY_C_CONTIGUOUS) || !(flags & NPY_ARRAY_ALIGNED) || !PyArray_ISNOTSWAPPED(arr) ||
        dt == SMELT_UNDEFINED || PyArray_NDIM(arr) > SMELT_MAX_RANK)
      Py_RETURN_NOTIMPLEMENTED;
    smelt_tensor *t = &ins[i];
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = PyArray_NDIM(arr);
    for (int d = 0; d < t->rank; d++) t->dims[d] = PyArray_DIMS(arr)[d];
    t->data = PyArray_DATA(arr);
    t->nbytes = (size_t)PyArray_NBYTES(arr);
    held[i] = a;
  }
  PyObject *nseq = NULL;
  if (names_seq(names, n, &nseq)) return NULL;
  for (Py_ssize_t i = 0; nseq && i < n; i++)
    if (!(ins[i].name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(nseq, i)))) {
      Py_DECREF(nseq);
      return NULL;
    }
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_INCREF(held[i]);
    if (i < 8) self->last_inputs[i] = ins[i].data;
  }
  PyObject *res = run_outputs(self, ins, n, 1);
  for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(held[i]);
  Py_XDECREF(nseq);
  return res;
#else
  (void)arrays;
  (void)names;
  Py_RETURN_NOTIMPLEMENTED;
#endif
}

static PyObject *session_close(SessionObject *self, PyObject *unused) {
  if (self->active) return raise_status(SMELT_ERR_INVALID_ARGUMENT, "close: the session is running");
  session_close_impl(self);
  Py_RETURN_NONE;
}

static PyObject *dims_tuple(const smelt_value_info *vi) {
  if (vi->rank < 0) Py_RETURN_NONE;
  PyObject *t = PyTuple_New(vi->rank);
  for (int i = 0; t && i < vi->rank; i++) {
    PyObject *d;
    if (vi->dims[i] >= 0)
      d = PyLong_FromLongLong(vi->dims[i]);
    else if (vi->dim_names[i])
      d = PyUnicode_FromString(vi->dim_names[i]);
    else {
      d = Py_None;
      Py_INCREF(d);
    }
    if (!d) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, d);
  }
  return t;
}

/* value_infos(input: bool) -> list of (name, dtype name, shape) */
static PyObject *session_value_infos(SessionObject *self, PyObject *args) {
  int input;
  if (!PyArg_ParseTuple(args, "p", &input)) return NULL;
  if (check_open(self)) return NULL;
  int n = input ? smelt_model_num_inputs(self->model) : smelt_model_num_outputs(self->model);
  PyObject *res = PyList_New(n);
  for (int i = 0; res && i < n; i++) {
    smelt_value_info vi;
    smelt_status st = input ? smelt_model_input(self->model, i, &vi) : smelt_model_output(self->model, i, &vi);
    if (st) {
      Py_DECREF(res);
      return raise_last(st);
    }
    PyObject *shape = dims_tuple(&vi);
    PyObject *item = shape ? Py_BuildValue("(ssN)", vi.name ? vi.name : "", smelt_dtype_name(vi.dtype), shape) : NULL;
    if (!item) {
      Py_DECREF(res);
      return NULL;
    }
    PyList_SET_ITEM(res, i, item);
  }
  return res;
}

static PyObject *session_stats(SessionObject *self, PyObject *unused) {
  if (check_open(self)) return NULL;
  smelt_session_stats s = {.struct_size = sizeof s};
  smelt_status st = smelt_session_get_stats(self->session, &s);
  if (st) return raise_last(st);
  return Py_BuildValue("{s:i,s:i,s:O,s:i,s:i,s:d,s:n,s:n,s:i,s:i}", "compiles", s.compiles,
                       "cache_hits", s.cache_hits, "eager_fallback", s.eager_fallback ? Py_True : Py_False,
                       "graph_breaks", s.graph_breaks, "kernels_generated", s.kernels_generated,
                       "compile_seconds", s.compile_seconds, "arena_bytes", (Py_ssize_t)s.arena_bytes,
                       "eager_peak_bytes", (Py_ssize_t)s.eager_peak_bytes, "prepared_loaded",
                       s.prepared_loaded, "prepared_saved", s.prepared_saved);
}

static PyObject *session_last_run_seconds(SessionObject *self, PyObject *unused) {
  return PyFloat_FromDouble(self->last_run_s);
}

static PyObject *session_last_inputs(SessionObject *self, PyObject *unused) {
  PyObject *t = PyTuple_New(8);
  for (int i = 0; t && i < 8; i++) PyTuple_SET_ITEM(t, i, PyLong_FromVoidPtr(self->last_inputs[i]));
  return t;
}

static PyObject *session_closed(SessionObject *self, void *closure) {
  return PyBool_FromLong(self->session == NULL);
}

static PyObject *session_in_names(SessionObject *self, void *closure) {
  PyObject *t = self->in_names ? self->in_names : Py_None;
  Py_INCREF(t);
  return t;
}

static PyObject *session_out_names(SessionObject *self, void *closure) {
  PyObject *t = self->out_names ? self->out_names : Py_None;
  Py_INCREF(t);
  return t;
}

static PyMethodDef session_methods[] = {
    {"run", (PyCFunction)session_run, METH_VARARGS, "run(arrays, names=None) -> list of Buffer"},
    {"run_arrays", (PyCFunction)(void (*)(void))session_run_arrays, METH_FASTCALL,
     "run_arrays(arrays, names=None) -> list of numpy.ndarray, or NotImplemented (then use run)"},
    {"close", (PyCFunction)session_close, METH_NOARGS, "frees the session and its model"},
    {"value_infos", (PyCFunction)session_value_infos, METH_VARARGS, "value_infos(input) -> [(name, dtype, shape)]"},
    {"stats", (PyCFunction)session_stats, METH_NOARGS, "smelt_session_get_stats as a dict"},
    {"_last_run_seconds", (PyCFunction)session_last_run_seconds, METH_NOARGS,
     "seconds smelt_session_run took in the last run (bench/py_overhead.py: what Session.run adds)"},
    {"_last_input_addresses", (PyCFunction)session_last_inputs, METH_NOARGS,
     "data addresses smelt was given for the last run's first 8 inputs (tests: no copy)"},
    {NULL}};

static PyGetSetDef session_getset[] = {
    {"closed", (getter)session_closed, NULL, "True once close() was called", NULL},
    {"input_names", (getter)session_in_names, NULL, "model input names", NULL},
    {"output_names", (getter)session_out_names, NULL, "model output names", NULL},
    {NULL}};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smelt._smelt.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = (destructor)session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Low-level smelt session (use smelt.Session).",
    .tp_methods = session_methods,
    .tp_getset = session_getset,
    .tp_init = (initproc)session_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Generator: smelt_generator_* over a Session (decoders with a KV cache) ---- */

typedef struct {
  PyObject_HEAD
  SessionObject *sess; /* kept alive; closing it while a generator runs is refused */
  smelt_generator *g;
  int batch;
} GeneratorObject;

static void generator_dealloc(GeneratorObject *self) {
  smelt_generator_free(self->g);
  Py_XDECREF(self->sess);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int generator_init(GeneratorObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"session", "batch", "max_length", "temperature", "top_k", "top_p", "seed",
                           "eos_token_id", "static_cache", NULL};
  PyObject *sess;
  smelt_generator_options o = smelt_generator_options_default();
  long long max_length = 0, eos = -1;
  unsigned long long seed = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|iLfifKLp", kwlist, &SessionType, &sess, &o.batch, &max_length,
                                   &o.temperature, &o.top_k, &o.top_p, &seed, &eos, &o.static_cache))
    return -1;
  SessionObject *so = (SessionObject *)sess;
  if (!so->session) {
    raise_status(SMELT_ERR_INVALID_ARGUMENT, "Generator: the session is closed");
    return -1;
  }
  o.max_length = max_length;
  o.seed = seed;
  o.eos_token_id = eos;
  smelt_generator_free(self->g);
  self->g = NULL;
  smelt_status st = smelt_generator_create(so->session, &o, &self->g);
  if (st) {
    raise_last(st);
    return -1;
  }
  Py_INCREF(sess);
  Py_XSETREF(self->sess, so);
  self->batch = o.batch;
  return 0;
}

static bool generator_ready(GeneratorObject *self) {
  if (!self->g || !self->sess || !self->sess->session) {
    raise_status(SMELT_ERR_INVALID_ARGUMENT, "Generator: not created, or its session is closed");
    return false;
  }
  return true;
}

/* A sequence of ints (batch 1) or of batch sequences of equal length -> ids (PyMem). */
static int64_t *ids_from(PyObject *obj, int batch, Py_ssize_t *n_out) {
  PyObject *seq = PySequence_Fast(obj, "ids must be a sequence of ints (or of sequences for batch > 1)");
  if (!seq) return NULL;
  Py_ssize_t rows = batch > 1 ? PySequence_Fast_GET_SIZE(seq) : 1, n = -1;
  int64_t *ids = NULL;
  if (rows != batch) {
    raise_status(SMELT_ERR_INVALID_ARGUMENT, "ids: one row per sequence of the batch expected");
    goto fail;
  }
  for (Py_ssize_t r = 0; r < rows; r++) {
    PyObject *row = batch > 1 ? PySequence_Fast(PySequence_Fast_GET_ITEM(seq, r), "ids rows must be sequences")
                              : (Py_INCREF(seq), seq);
    if (!row) goto fail;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(row);
    if (n < 0) {
      n = len;
      ids = PyMem_Malloc((size_t)(rows * (n ? n : 1)) * sizeof *ids);
      if (!ids) {
        Py_DECREF(row);
        PyErr_NoMemory();
        goto fail;
      }
    }
    if (len != n) {
      Py_DECREF(row);
      raise_status(SMELT_ERR_INVALID_ARGUMENT, "ids: every row must have the same length");
      goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(row, i));
      if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(row);
        goto fail;
      }
      ids[r * n + i] = v;
    }
    Py_DECREF(row);
  }
  Py_DECREF(seq);
  *n_out = n;
  return ids;
fail:
  PyMem_Free(ids);
  Py_DECREF(seq);
  return NULL;
}

static PyObject *tokens_out(GeneratorObject *self, const int64_t *t) {
  if (self->batch == 1) return PyLong_FromLongLong(t[0]);
  PyObject *l = PyList_New(self->batch);
  for (int b = 0; l && b < self->batch; b++) PyList_SET_ITEM(l, b, PyLong_FromLongLong(t[b]));
  return l;
}

/* Runs fn with the GIL released and the session marked busy (close is refused meanwhile). */
#define GEN_CALL(self, expr)          \
  do {                                \
    self->sess->active++;             \
    Py_BEGIN_ALLOW_THREADS st = expr; \
    Py_END_ALLOW_THREADS              \
    self->sess->active--;             \
  } while (0)

static PyObject *generator_prefill(GeneratorObject *self, PyObject *obj) {
  if (!generator_ready(self)) return NULL;
  Py_ssize_t n = 0;
  int64_t *ids = ids_from(obj, self->batch, &n);
  if (!ids) return NULL;
  smelt_status st;
  GEN_CALL(self, smelt_generator_prefill(self->g, ids, (size_t)n));
  PyMem_Free(ids);
  if (st) return raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *generator_step(GeneratorObject *self, PyObject *obj) {
  if (!generator_ready(self)) return NULL;
  Py_ssize_t n = 0;
  PyObject *rows = obj;
  if (self->batch > 1) { /* [t0, t1, ...] -> [[t0], [t1], ...] */
    PyObject *seq = PySequence_Fast(obj, "tokens must be a sequence of ints");
    if (!seq) return NULL;
    rows = PyList_New(PySequence_Fast_GET_SIZE(seq));
    for (Py_ssize_t i = 0; rows && i < PySequence_Fast_GET_SIZE(seq); i++) {
      PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
      PyList_SET_ITEM(rows, i, PyTuple_Pack(1, item));
    }
    Py_DECREF(seq);
    if (!rows) return NULL;
  } else {
    rows = PyTuple_Pack(1, obj);
    if (!rows) return NULL;
  }
  int64_t *ids = ids_from(rows, self->batch, &n);
  Py_DECREF(rows);
  if (!ids) return NULL;
  smelt_status st;
  GEN_CALL(self, smelt_generator_step(self->g, ids));
  PyMem_Free(ids);
  if (st) return raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *generator_pick(GeneratorObject *self, bool step_first) {
  if (!generator_ready(self)) return NULL;
  int64_t *t = PyMem_Malloc((size_t)self->batch * sizeof *t);
  if (!t) return PyErr_NoMemory();
  smelt_status st;
  if (step_first) GEN_CALL(self, smelt_generator_next(self->g, t));
  else st = smelt_generator_sample(self->g, t);
  PyObject *r = st ? raise_last(st) : tokens_out(self, t);
  PyMem_Free(t);
  return r;
}

static PyObject *generator_next(GeneratorObject *self, PyObject *unused) { return generator_pick(self, true); }
static PyObject *generator_sample(GeneratorObject *self, PyObject *unused) { return generator_pick(self, false); }

static PyObject *generator_reset(GeneratorObject *self, PyObject *unused) {
  if (!generator_ready(self)) return NULL;
  smelt_generator_reset(self->g);
  Py_RETURN_NONE;
}

static PyObject *generator_done(GeneratorObject *self, void *closure) {
  return PyBool_FromLong(self->g ? smelt_generator_done(self->g) : 1);
}
static PyObject *generator_length(GeneratorObject *self, void *closure) {
  return PyLong_FromLongLong(self->g ? smelt_generator_length(self->g) : 0);
}
static PyObject *generator_kv_bytes(GeneratorObject *self, void *closure) {
  return PyLong_FromSize_t(self->g ? smelt_generator_kv_bytes(self->g) : 0);
}

static PyMethodDef generator_methods[] = {
    {"prefill", (PyCFunction)generator_prefill, METH_O, "prefill(ids): runs the prompt (rows of ids for batch > 1)"},
    {"step", (PyCFunction)generator_step, METH_O, "step(tokens): feeds one token per sequence"},
    {"sample", (PyCFunction)generator_sample, METH_NOARGS, "sample() -> the next token(s) from the last logits"},
    {"next", (PyCFunction)generator_next, METH_NOARGS, "next() -> step with the last tokens, then sample"},
    {"reset", (PyCFunction)generator_reset, METH_NOARGS, "drops the cache"},
    {NULL}};

static PyObject *generator_static_cache(GeneratorObject *self, void *closure) {
  return PyBool_FromLong(self->g ? smelt_generator_static_cache(self->g) : 0);
}

static PyGetSetDef generator_getset[] = {
    {"static_cache", (getter)generator_static_cache, NULL, "the static KV cache is used", NULL},
    {"done", (getter)generator_done, NULL, "every sequence reached EOS, or max_length is reached", NULL},
    {"length", (getter)generator_length, NULL, "tokens in the cache per sequence", NULL},
    {"kv_bytes", (getter)generator_kv_bytes, NULL, "bytes the KV cache holds", NULL},
    {NULL}};

static PyTypeObject GeneratorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "smelt._smelt.Generator",
    .tp_basicsize = sizeof(GeneratorObject),
    .tp_dealloc = (destructor)generator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Low-level smelt generator (use smelt.Generator).",
    .tp_methods = generator_methods,
    .tp_getset = generator_getset,
    .tp_init = (initproc)generator_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module ---- */

static PyObject *mod_set_errors(PyObject *mod, PyObject *arg) {
  if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) < 1) {
    PyErr_SetString(PyExc_TypeError, "set_errors takes a non-empty tuple of classes");
    return NULL;
  }
  Py_INCREF(arg);
  Py_XSETREF(error_classes, arg);
  Py_RETURN_NONE;
}

/* model_input_names(bytes) -> tuple of str: the inputs of an ONNX model given
 * as bytes (loaded and checked, no session made). */
static PyObject *mod_model_input_names(PyObject *mod, PyObject *source) {
  Py_buffer view;
  if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0) return NULL;
  smelt_model *m = NULL;
  smelt_status st;
  Py_BEGIN_ALLOW_THREADS
  st = smelt_model_load_bytes(view.buf, (size_t)view.len, &m);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (st) return raise_last(st);
  PyObject *names = names_tuple(m, 1);
  smelt_model_free(m);
  return names;
}

static PyObject *mod_version(PyObject *mod, PyObject *unused) {
  return PyUnicode_FromString(smelt_version());
}

static PyMethodDef mod_methods[] = {
    {"set_errors", mod_set_errors, METH_O, "error classes indexed by smelt_status"},
    {"version", mod_version, METH_NOARGS, "smelt_version()"},
    {"model_input_names", mod_model_input_names, METH_O, "input names of an ONNX model given as bytes"},
    {NULL}};

static struct PyModuleDef smelt_module = {
    PyModuleDef_HEAD_INIT, .m_name = "smelt._smelt", .m_doc = "smelt C API bindings", .m_size = -1,
    .m_methods = mod_methods};

PyMODINIT_FUNC PyInit__smelt(void) {
#ifdef SMELT_PY_NUMPY
  /* NumPy's C API for run_arrays; where it cannot be had (NumPy missing, or
   * an ABI this build does not take) the module still loads and every run
   * takes the buffer path */
  if (_import_array() < 0) PyErr_Clear();
  else numpy_api = true;
#endif
  if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&SessionType) < 0 || PyType_Ready(&GeneratorType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&smelt_module);
  if (!m) return NULL;
  Py_INCREF(&BufferType);
  Py_INCREF(&SessionType);
  Py_INCREF(&GeneratorType);
  if (PyModule_AddObject(m, "Buffer", (PyObject *)&BufferType) < 0 ||
      PyModule_AddObject(m, "Session", (PyObject *)&SessionType) < 0 ||
      PyModule_AddObject(m, "Generator", (PyObject *)&GeneratorType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
