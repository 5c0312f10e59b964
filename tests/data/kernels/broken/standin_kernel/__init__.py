"""The stand-in kernel: `device_name()` answers from the compiled module."""

import torch  # noqa: F401 - loads libc10 before the extension

from standin_kernel._C import device_name

__all__ = ["device_name"]
