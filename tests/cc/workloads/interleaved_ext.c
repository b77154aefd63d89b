/* A C extension of the interleaved-frames test's own (test_e2e_interleaved.cc
 * builds it for each interpreter from that interpreter's headers): Python
 * calls call_back(f, n), whose C frames ext_call_back -> ext_level_two call f
 * back n times; spin(n) is a C loop, a native leaf under Python. Built with
 * -fno-inline -fno-optimize-sibling-calls, so each of these functions keeps a
 * frame of its own. Python 2.7 and 3.x (free-threaded builds too). */
#include <Python.h>

static PyObject *ext_level_two(PyObject *callback, long n) {
  PyObject *result = NULL;
  for (long i = 0; i < n; i++) {
    Py_XDECREF(result);
    result = PyObject_CallObject(callback, NULL);
    if (result == NULL) return NULL;
  }
  if (result == NULL) Py_RETURN_NONE;
  return result;
}

static PyObject *ext_call_back(PyObject *self, PyObject *args) {
  PyObject *callback;
  long n;
  (void)self;
  if (!PyArg_ParseTuple(args, "Ol", &callback, &n)) return NULL;
  PyObject *result = ext_level_two(callback, n);
  __asm__ volatile("" ::: "memory"); /* no tail call: this frame stays */
  return result;
}

static PyObject *ext_spin(PyObject *self, PyObject *args) {
  long n;
  (void)self;
  if (!PyArg_ParseTuple(args, "l", &n)) return NULL;
  volatile unsigned long x = 0;
  for (long i = 0; i < n; i++) x += (unsigned long)i;
  return Py_BuildValue("k", (unsigned long)x);
}

static PyMethodDef kMethods[] = {
    {"call_back", ext_call_back, METH_VARARGS, "call_back(f, n): f() n times, from C"},
    {"spin", ext_spin, METH_VARARGS, "spin(n): a C loop of n steps"},
    {NULL, NULL, 0, NULL},
};

#if PY_MAJOR_VERSION >= 3
#ifdef Py_GIL_DISABLED
static PyModuleDef_Slot kSlots[] = {{Py_mod_gil, Py_MOD_GIL_NOT_USED}, {0, NULL}};
static struct PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "interleaved_ext", NULL, 0, kMethods,
                                     kSlots, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit_interleaved_ext(void) { return PyModuleDef_Init(&kModule); }
#else
static struct PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "interleaved_ext", NULL, -1,
                                     kMethods, NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit_interleaved_ext(void) { return PyModule_Create(&kModule); }
#endif
#else
PyMODINIT_FUNC initinterleaved_ext(void) { Py_InitModule("interleaved_ext", kMethods); }
#endif
