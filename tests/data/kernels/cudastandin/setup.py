"""A small real CUDA torch extension (the heavy tier's stand-in for flash-attn): one templated
kernel in a .cu file that nvcc compiles once per GPU architecture, bound to Python in a .cpp.

With no CUDA_HOME set, the toolkit comes from NVIDIA's wheels in the env (nvidia-cuda-nvcc,
-runtime, -crt, -cccl): torch's cpp_extension wants CUDA_HOME/{bin,include,lib64}, so a small
folder of links in the build tree gives it that layout.
"""

import os
from pathlib import Path


def cuda_home_from_wheels() -> None:
    if os.environ.get("CUDA_HOME"):
        return
    import nvidia  # noqa: PLC0415 - NVIDIA's wheels' namespace package; only when CUDA_HOME is unset

    tops = [Path(p) / "cu13" for p in nvidia.__path__ if (Path(p) / "cu13/bin/nvcc").exists()]
    if not tops:
        return
    top, home = tops[0], Path(__file__).resolve().parent / "build" / "cuda-home"
    (home / "lib64").mkdir(parents=True, exist_ok=True)
    links = {name: top / name for name in ("bin", "include", "nvvm")}
    links["lib64/libcudart.so"] = top / "lib" / "libcudart.so.13"
    for name, target in links.items():
        if not (home / name).is_symlink():
            (home / name).symlink_to(target)
    os.environ["CUDA_HOME"] = str(home)


cuda_home_from_wheels()

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CUDAExtension  # noqa: E402

setup(
    name="cuda-standin",
    version="0.1.0",
    packages=["cuda_standin"],
    ext_modules=[CUDAExtension("cuda_standin._C", ["csrc/bind.cpp", "csrc/scale_add.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
