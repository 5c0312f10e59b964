// The Python binding of the kernel in scale_add.cu (host code, compiled once by the C++ compiler).
#include <torch/extension.h>

at::Tensor scale_add_cuda(const at::Tensor& x, const at::Tensor& y, double a);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale_add", &scale_add_cuda, "out = a * x + y on the GPU");
}
