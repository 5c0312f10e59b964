// Declares a c10 function no torch defines: the module builds, and fails to load.
#include <Python.h>

namespace c10 {
const char* symbol_of_another_torch(int);
}

static PyObject* device_name(PyObject*, PyObject*) {
  return PyUnicode_FromString(c10::symbol_of_another_torch(0));
}

static PyMethodDef methods[] = {
    {"device_name", device_name, METH_NOARGS, "never callable"},
    {nullptr, nullptr, 0, nullptr}};

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
