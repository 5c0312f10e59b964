"""The CUDA stand-in kernel: `scale_add(x, y, a)` runs `a * x + y` on the GPU."""

import torch  # noqa: F401 - loads libc10 and the CUDA runtime before the extension

from cuda_standin._C import scale_add

__all__ = ["scale_add"]
