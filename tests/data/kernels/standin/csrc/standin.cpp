// One function that calls into torch's c10 library: its mangled name (std::string) depends on
// torch's C++ ABI, as flash_attn_2_cuda's symbols do.
#include <Python.h>
#include <c10/core/DeviceType.h>
#include <string>

static PyObject* device_name(PyObject*, PyObject*) {
  std::string name = c10::DeviceTypeName(c10::DeviceType::CPU, false);
  return PyUnicode_FromString(name.c_str());
}

static PyMethodDef methods[] = {
    {"device_name", device_name, METH_NOARGS, "torch's name of the CPU device"},
    {nullptr, nullptr, 0, nullptr}};

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
