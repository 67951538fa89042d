/* offlink._ctable: the C table core (table.c) as a CPython extension.
 *
 * Class `Core` has exactly the interface, answers and errors of offlink/_pytable.py `Core`;
 * tests/test_differential.py holds the two to each other. Built against the limited API
 * (abi3, CPython >= 3.9) so that one wheel serves every CPython 3. The 3.9 limited API has no
 * buffer protocol, so a buffer that is not `bytes` is copied once into a bytes object that the
 * Core keeps; `bytes` (what Table.open reads) is used in place. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "table.h"

typedef struct {
  PyObject_HEAD
  PyObject *owner; /* bytes holding the table; `t` points into it */
  ofl_table t;
  /* Set by bind(): find_symbol and lookup_symbol return make(...) for a row, made once. */
  PyObject *base; /* the table's address (a Python int) */
  PyObject *make;
  PyObject *made; /* list of made objects, None where not made yet */
  long long base_ll;
  int base_fits; /* base fits in a long long: find_symbol's fast path */
} CoreObject;

static PyObject *array_type; /* array.array, the type of find_many's result */

/* ---- helpers ----------------------------------------------------------------------------- */

/* A buffer's bytes: `bytes` itself, else a copy. A non-buffer raises TypeError, as
 * memoryview() does in the pure core. */
static PyObject *as_bytes(PyObject *obj) {
  if (PyBytes_CheckExact(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  PyObject *view = PyMemoryView_FromObject(obj);
  if (view == NULL)
    return NULL;
  PyObject *flat = PyObject_CallMethod(view, "cast", "s", "B");
  Py_DECREF(view);
  if (flat == NULL)
    return NULL;
  PyObject *bytes = PyBytes_FromObject(flat);
  Py_DECREF(flat);
  return bytes;
}

/* Raise ValueError(code, message) with the pure core's wording; `detail` may be NULL. */
static PyObject *table_error(int status, PyObject *detail) {
  PyObject *msg = detail == NULL
                      ? PyUnicode_FromString(ofl_status_message(status))
                      : PyUnicode_FromFormat("%s (%U)", ofl_status_message(status), detail);
  Py_XDECREF(detail);
  if (msg == NULL)
    return NULL;
  PyObject *args = Py_BuildValue("(sN)", ofl_status_code(status), msg);
  if (args != NULL) {
    PyErr_SetObject(PyExc_ValueError, args);
    Py_DECREF(args);
  }
  return NULL;
}

/* The detail the pure core adds to an open error, rebuilt from the header. Only called after
 * ofl_table_open failed with `status`, so the steps before that status passed: for bad-kind
 * the regions are valid and the first entry with an unknown kind is the one that failed. */
static PyObject *open_detail(int status, const unsigned char *p, Py_ssize_t size) {
  switch (status) {
  case OFL_TRUNCATED:
    if (size < OFL_HEADER_SIZE)
      return PyUnicode_FromFormat("%zd bytes", size);
    return PyUnicode_FromFormat("%zd of %llu bytes", size,
                                (unsigned long long)ofl_le(p + OFL_HDR_TOTAL_SIZE, 8));
  case OFL_BAD_VERSION:
    return PyUnicode_FromFormat("version %u", (unsigned)ofl_le(p + OFL_HDR_VERSION, 2));
  case OFL_BAD_KIND: {
    const uint64_t n_targets = ofl_le(p + OFL_HDR_N_TARGETS, 4), n_symbols = ofl_le(p + OFL_HDR_N_SYMBOLS, 4);
    const unsigned char *targets = p + ofl_le(p + OFL_HDR_TARGETS_OFF, 8);
    const unsigned char *rows = p + ofl_le(p + OFL_HDR_SYMBOLS_OFF, 8);
    for (uint64_t i = 0; i < n_targets; i++) {
      unsigned kind = (unsigned)ofl_le(targets + i * OFL_TARGET_SIZE + OFL_TGT_KIND, 2);
      if (kind < OFL_IMAGE_SHARED_OBJECT || kind > OFL_IMAGE_AMDGCN_AMDHSA)
        return PyUnicode_FromFormat("image kind %u", kind);
    }
    for (uint64_t i = 0; i < n_symbols; i++) {
      unsigned kind = (unsigned)ofl_le(rows + i * OFL_SYMBOL_SIZE + OFL_ROW_KIND, 2);
      if (kind < OFL_SYM_FUNCTION || kind > OFL_SYM_LINK_VARIABLE)
        return PyUnicode_FromFormat("symbol kind %u", kind);
    }
    return NULL;
  }
  default:
    return NULL;
  }
}

/* TypeError("lookup() needs bytes, not T"), worded as the pure core. */
static PyObject *needs_bytes(PyObject *obj) {
  PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
  if (name != NULL) {
    PyErr_Format(PyExc_TypeError, "lookup() needs bytes, not %U", name);
    Py_DECREF(name);
  }
  return NULL;
}

/* An index argument in [0, limit): TypeError for a non-integer, IndexError otherwise. */
static int get_index(PyObject *obj, uint32_t limit, const char *what, uint32_t *out) {
  PyObject *idx = PyNumber_Index(obj);
  if (idx == NULL)
    return -1;
  int overflow;
  long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (v == -1 && PyErr_Occurred())
    return -1;
  if (overflow || v < 0 || v >= (long long)limit) {
    PyErr_Format(PyExc_IndexError, "%s out of range", what);
    return -1;
  }
  *out = (uint32_t)v;
  return 0;
}

/* Row containing `obj` (any Python int, not only int64), as the pure core's find. */
static int find_row(CoreObject *self, PyObject *obj, int64_t *row) {
  int overflow;
  if (PyLong_Check(obj)) { /* the common case: no new reference, no Python arithmetic */
    long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (x == -1 && PyErr_Occurred())
      return -1;
    if (!overflow) {
      *row = ofl_table_find(&self->t, x);
      return 0;
    }
  }
  PyObject *idx = PyNumber_Index(obj);
  if (idx == NULL)
    return -1;
  long long x = PyLong_AsLongLongAndOverflow(idx, &overflow);
  if (x == -1 && PyErr_Occurred()) {
    Py_DECREF(idx);
    return -1;
  }
  if (!overflow) {
    Py_DECREF(idx);
    *row = ofl_table_find(&self->t, x);
    return 0;
  }
  /* Below every key: nothing. Above every int64: only the highest key can contain it, and
   * the comparison needs Python's unbounded ints. */
  int64_t r = overflow < 0 ? -1 : ofl_table_floor(&self->t, INT64_MAX);
  *row = -1;
  if (r < 0) {
    Py_DECREF(idx);
    return 0;
  }
  ofl_symbol s;
  ofl_table_symbol(&self->t, (uint32_t)r, &s);
  PyObject *start = PyLong_FromLongLong(s.host_offset);
  PyObject *size = PyLong_FromUnsignedLongLong(s.size);
  PyObject *diff = start == NULL ? NULL : PyNumber_Subtract(idx, start);
  int lt = diff == NULL || size == NULL ? -1 : PyObject_RichCompareBool(diff, size, Py_LT);
  Py_DECREF(idx);
  Py_XDECREF(start);
  Py_XDECREF(size);
  Py_XDECREF(diff);
  if (lt < 0)
    return -1;
  if (lt)
    *row = r;
  return 0;
}

/* ---- Core -------------------------------------------------------------------------------- */

static PyObject *Core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"buf", NULL};
  PyObject *buf;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Core", kwlist, &buf))
    return NULL;
  PyObject *owner = as_bytes(buf);
  if (owner == NULL)
    return NULL;
  const unsigned char *p = (const unsigned char *)PyBytes_AsString(owner);
  const Py_ssize_t size = PyBytes_Size(owner);
  ofl_table t;
  int status = ofl_table_open(&t, p, (uint64_t)size);
  if (status != OFL_OK) {
    PyObject *detail = open_detail(status, p, size);
    if (detail == NULL && PyErr_Occurred()) {
      Py_DECREF(owner);
      return NULL;
    }
    Py_DECREF(owner);
    return table_error(status, detail);
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  CoreObject *self = (CoreObject *)alloc(type, 0);
  if (self == NULL) {
    Py_DECREF(owner);
    return NULL;
  }
  self->owner = owner;
  self->t = t;
  return (PyObject *)self;
}

static int Core_traverse(CoreObject *self, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(self)); /* heap type: instances own a reference to it */
  Py_VISIT(self->owner);
  Py_VISIT(self->base);
  Py_VISIT(self->make);
  Py_VISIT(self->made);
  return 0;
}

static int Core_clear(CoreObject *self) {
  Py_CLEAR(self->base);
  Py_CLEAR(self->make);
  Py_CLEAR(self->made);
  /* `owner` stays until dealloc: `t` points into it and it holds no references. */
  return 0;
}

static void Core_dealloc(CoreObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Core_clear(self);
  Py_CLEAR(self->owner);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

static PyObject *Core_symbol(CoreObject *self, PyObject *arg) {
  uint32_t row;
  if (get_index(arg, self->t.n_symbols, "symbol row", &row) < 0)
    return NULL;
  ofl_symbol s;
  ofl_table_symbol(&self->t, row, &s);
  return Py_BuildValue("(y#LKi)", s.name, (Py_ssize_t)s.name_len, (long long)s.host_offset,
                       (unsigned long long)s.size, (int)s.kind);
}

static PyObject *Core_target(CoreObject *self, PyObject *arg) {
  uint32_t index;
  if (get_index(arg, self->t.n_targets, "target index", &index) < 0)
    return NULL;
  ofl_target g;
  ofl_table_target(&self->t, index, &g);
  return Py_BuildValue("(y#iKKk)", g.name, (Py_ssize_t)g.name_len, (int)g.kind,
                       (unsigned long long)(g.image - self->t.base),
                       (unsigned long long)g.image_size, (unsigned long)g.image_crc32);
}

static PyObject *Core_lookup(CoreObject *self, PyObject *name) {
  if (!PyBytes_Check(name)) {
    return needs_bytes(name);
  }
  return PyLong_FromLongLong(
      ofl_table_lookup(&self->t, PyBytes_AsString(name), (size_t)PyBytes_Size(name)));
}

static PyObject *Core_find(CoreObject *self, PyObject *offset) {
  int64_t row;
  if (find_row(self, offset, &row) < 0)
    return NULL;
  return PyLong_FromLongLong(row);
}

static PyObject *Core_find_many(CoreObject *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"offsets", "base", NULL};
  PyObject *offsets, *base = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:find_many", kwlist, &offsets, &base))
    return NULL;
  uint64_t bias = 0;
  if (base != NULL) {
    PyObject *idx = PyNumber_Index(base);
    if (idx == NULL)
      return NULL;
    bias = PyLong_AsUnsignedLongLongMask(idx); /* modulo 2^64, as the pure core wraps */
    Py_DECREF(idx);
    if (bias == (uint64_t)-1 && PyErr_Occurred())
      return NULL;
  }
  PyObject *in = as_bytes(offsets);
  if (in == NULL)
    return NULL;
  const Py_ssize_t len = PyBytes_Size(in);
  if (len % 8 != 0) {
    Py_DECREF(in);
    PyErr_SetString(PyExc_TypeError, "memoryview: length is not a multiple of itemsize");
    return NULL;
  }
  PyObject *out = PyBytes_FromStringAndSize(NULL, len);
  if (out == NULL) {
    Py_DECREF(in);
    return NULL;
  }
  const char *src = PyBytes_AsString(in);
  char *dst = PyBytes_AsString(out);
  /* Both buffers are private to this call and the table is immutable bytes: no GIL needed. */
  Py_BEGIN_ALLOW_THREADS
  ofl_table_find_many(&self->t, src, (size_t)len / 8, bias, dst);
  Py_END_ALLOW_THREADS
  Py_DECREF(in);
  PyObject *result = PyObject_CallFunction(array_type, "sO", "q", out);
  Py_DECREF(out);
  return result;
}

static PyObject *Core_check_image(CoreObject *self, PyObject *arg) {
  uint32_t index;
  if (get_index(arg, self->t.n_targets, "target index", &index) < 0)
    return NULL;
  if (ofl_table_check_image(&self->t, index) != OFL_OK)
    return table_error(OFL_BAD_IMAGE_CHECKSUM, PyUnicode_FromFormat("target %u", index));
  Py_RETURN_NONE;
}

static PyObject *Core_bind(CoreObject *self, PyObject *args) {
  PyObject *base, *make;
  if (!PyArg_ParseTuple(args, "OO:bind", &base, &make))
    return NULL;
  PyObject *idx = PyNumber_Index(base);
  if (idx == NULL)
    return NULL;
  PyObject *made = PyList_New((Py_ssize_t)self->t.n_symbols);
  if (made == NULL) {
    Py_DECREF(idx);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < (Py_ssize_t)self->t.n_symbols; i++) {
    Py_INCREF(Py_None);
    PyList_SetItem(made, i, Py_None);
  }
  int overflow;
  long long b = PyLong_AsLongLongAndOverflow(idx, &overflow);
  if (b == -1 && PyErr_Occurred()) {
    Py_DECREF(idx);
    Py_DECREF(made);
    return NULL;
  }
  Py_INCREF(make);
  PyObject *old_base = self->base, *old_make = self->make, *old_made = self->made;
  self->base = idx;
  self->make = make;
  self->made = made;
  Py_XDECREF(old_base);
  Py_XDECREF(old_make);
  Py_XDECREF(old_made);
  self->base_ll = b;
  self->base_fits = !overflow;
  Py_RETURN_NONE;
}

/* make(name, address, size, kind, host_offset) for `row`, made on first use. */
static PyObject *made_object(CoreObject *self, int64_t row) {
  PyObject *made = self->made;
  PyObject *obj = PyList_GetItem(made, (Py_ssize_t)row); /* borrowed */
  if (obj == NULL)
    return NULL;
  if (obj != Py_None) {
    Py_INCREF(obj);
    return obj;
  }
  ofl_symbol s;
  ofl_table_symbol(&self->t, (uint32_t)row, &s);
  PyObject *address;
  long long sum;
  if (self->base_fits && !__builtin_add_overflow(self->base_ll, (long long)s.host_offset, &sum)) {
    address = PyLong_FromLongLong(sum);
  } else {
    PyObject *host_offset = PyLong_FromLongLong(s.host_offset);
    address = host_offset == NULL ? NULL : PyNumber_Add(self->base, host_offset);
    Py_XDECREF(host_offset);
  }
  if (address == NULL)
    return NULL;
  Py_INCREF(made); /* make() may call bind() and replace self->made */
  obj = PyObject_CallFunction(self->make, "y#NKiL", s.name, (Py_ssize_t)s.name_len, address,
                              (unsigned long long)s.size, (int)s.kind, (long long)s.host_offset);
  if (obj != NULL) {
    Py_INCREF(obj);
    if (PyList_SetItem(made, (Py_ssize_t)row, obj) < 0) {
      Py_DECREF(obj);
      obj = NULL;
    }
  }
  Py_DECREF(made);
  return obj;
}

static int check_bound(CoreObject *self) {
  if (self->make != NULL)
    return 0;
  PyErr_SetString(PyExc_RuntimeError, "Core.bind() has not been called");
  return -1;
}

static PyObject *Core_find_symbol(CoreObject *self, PyObject *address) {
  if (check_bound(self) < 0)
    return NULL;
  int64_t row;
  int overflow = 1;
  long long a = 0, offset;
  if (PyLong_Check(address)) {
    a = PyLong_AsLongLongAndOverflow(address, &overflow);
    if (a == -1 && PyErr_Occurred())
      return NULL;
  }
  if (!overflow && self->base_fits && !__builtin_sub_overflow(a, self->base_ll, &offset)) {
    row = ofl_table_find(&self->t, offset); /* the common case: one C call, no Python ints */
  } else {
    PyObject *idx = PyNumber_Index(address);
    if (idx == NULL)
      return NULL;
    PyObject *off = PyNumber_Subtract(idx, self->base);
    Py_DECREF(idx);
    if (off == NULL)
      return NULL;
    int err = find_row(self, off, &row);
    Py_DECREF(off);
    if (err < 0)
      return NULL;
  }
  if (row < 0)
    Py_RETURN_NONE;
  return made_object(self, row);
}

static PyObject *Core_lookup_symbol(CoreObject *self, PyObject *name) {
  if (check_bound(self) < 0)
    return NULL;
  PyObject *raw;
  if (PyUnicode_Check(name)) {
    raw = PyUnicode_AsUTF8String(name);
    if (raw == NULL)
      return NULL;
  } else if (PyBytes_Check(name)) {
    raw = name;
    Py_INCREF(raw);
  } else {
    return needs_bytes(name);
  }
  const char *s = PyBytes_AsString(raw);
  size_t n = (size_t)PyBytes_Size(raw);
  int64_t row = ofl_table_lookup(&self->t, s, n);
  if (row < 0 && memchr(s, '.', n) != NULL) {
    /* GCC's nvptx rows are spelled as in the PTX ('.' became '$': run_a$_omp_fn$0); the
     * host's own spelling (run_a._omp_fn.0, what nm shows) finds them too. Misses only. */
    char *ptx = PyMem_Malloc(n ? n : 1);
    if (ptx == NULL) {
      Py_DECREF(raw);
      return PyErr_NoMemory();
    }
    for (size_t i = 0; i < n; i++)
      ptx[i] = s[i] == '.' ? '$' : s[i];
    row = ofl_table_lookup(&self->t, ptx, n);
    PyMem_Free(ptx);
  }
  Py_DECREF(raw);
  if (row < 0)
    Py_RETURN_NONE;
  return made_object(self, row);
}

static PyObject *Core_get_total_size(CoreObject *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->t.total_size);
}

static PyObject *Core_get_meta_size(CoreObject *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->t.meta_size);
}

static PyObject *Core_get_n_targets(CoreObject *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLong(self->t.n_targets);
}

static PyObject *Core_get_n_symbols(CoreObject *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLong(self->t.n_symbols);
}

static PyMethodDef Core_methods[] = {
    {"symbol", (PyCFunction)Core_symbol, METH_O,
     "symbol(row) -> (name, host_offset, size, kind)"},
    {"target", (PyCFunction)Core_target, METH_O,
     "target(index) -> (name, kind, image offset, image size, image crc32)"},
    {"lookup", (PyCFunction)Core_lookup, METH_O, "lookup(name: bytes) -> row or -1"},
    {"find", (PyCFunction)Core_find, METH_O,
     "find(offset) -> row containing the table-relative offset, or -1"},
    {"find_many", (PyCFunction)(void (*)(void))Core_find_many, METH_VARARGS | METH_KEYWORDS,
     "find_many(offsets, base=0) -> array('q') of rows (-1: miss) for a buffer of 64-bit\n"
     "addresses; each is taken as (address - base) wrapped to int64"},
    {"check_image", (PyCFunction)Core_check_image, METH_O,
     "check_image(index): raise ValueError('bad-image-checksum', ...) on a CRC mismatch"},
    {"bind", (PyCFunction)Core_bind, METH_VARARGS,
     "bind(base, make): find_symbol/lookup_symbol return make(name, base + host_offset,\n"
     "size, kind, host_offset) for a row, made once and cached"},
    {"find_symbol", (PyCFunction)Core_find_symbol, METH_O,
     "find_symbol(address) -> made object of the row containing address - base, or None"},
    {"lookup_symbol", (PyCFunction)Core_lookup_symbol, METH_O,
     "lookup_symbol(name: str | bytes) -> made object of the row, or None (a name with '.' also\n"
     "as GCC's PTX spells it, with '$')"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Core_getset[] = {
    {"total_size", (getter)Core_get_total_size, NULL, "size of the table, images included", NULL},
    {"meta_size", (getter)Core_get_meta_size, NULL, "size of the checksummed metadata", NULL},
    {"n_targets", (getter)Core_get_n_targets, NULL, "number of targets", NULL},
    {"n_symbols", (getter)Core_get_n_symbols, NULL, "number of symbol rows", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Core_slots[] = {
    {Py_tp_doc, (void *)"A validated table over a bytes-like buffer (kept; copied unless bytes)."},
    {Py_tp_new, (void *)Core_new},
    {Py_tp_dealloc, (void *)Core_dealloc},
    {Py_tp_traverse, (void *)Core_traverse},
    {Py_tp_clear, (void *)Core_clear},
    {Py_tp_methods, Core_methods},
    {Py_tp_getset, Core_getset},
    {0, NULL},
};

static PyType_Spec Core_spec = {
    "offlink._ctable.Core",
    sizeof(CoreObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    Core_slots,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "offlink._ctable",
    "The C table core (offlink/runtime/table.c) for offlink.table; see offlink/_pytable.py.",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__ctable(void) {
  PyObject *array_mod = PyImport_ImportModule("array");
  if (array_mod == NULL)
    return NULL;
  Py_XDECREF(array_type);
  array_type = PyObject_GetAttrString(array_mod, "array");
  Py_DECREF(array_mod);
  if (array_type == NULL)
    return NULL;
  PyObject *module = PyModule_Create(&module_def);
  if (module == NULL)
    return NULL;
  PyObject *type = PyType_FromSpec(&Core_spec);
  PyObject *backend = PyUnicode_FromString("c");
  int err = type == NULL || backend == NULL ||
            PyObject_SetAttrString(type, "backend", backend) < 0 ||
            PyModule_AddObject(module, "Core", type) < 0; /* steals `type` on success */
  Py_XDECREF(backend);
  if (err) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
