"""The CUDA libraries NVIDIA's wheels ship, by the name other libraries need them by. An env's
(or a lock's) library that needs one of these must find it among the env's own: a GPU host
carries the driver (libcuda, libnvidia-ml: `verify/links.HOST_LIBRARIES`), not these, so one
that is missing is a library that does not load (a CUDA 12 core beside CUDA 13 wheels needs
`libcublasLt.so.12` where only `libcublasLt.so.13` is installed).

Each name is read from the wheels of the family beside it (`nvidia-cublas` for CUDA 13, its
twin `nvidia-cublas-cu12` for CUDA 12: the same names at other versions; nvToolsExt is CUDA 12's
nvidia-nvtx, nvtx3interop CUDA 13's). Only what a library names as DT_NEEDED is judged: what a
wheel opens by hand at run time (nvrtc's builtins, NVSHMEM's transports) is not a link. cuTENSOR
(`cutensor-cu13`, not an nvidia- wheel) is not listed: cupy's one module that needs it is an
accelerator cupy loads only when asked for, with cuTENSOR installed apart.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["CUDA_LIBRARIES", "cuda_family"]

# the library's name -> the family of NVIDIA wheels that ships it
CUDA_LIBRARIES: dict[str, str] = {
    "libcudart": "nvidia-cuda-runtime",
    "libcublas": "nvidia-cublas",
    "libcublasLt": "nvidia-cublas",
    "libnvblas": "nvidia-cublas",
    "libcupti": "nvidia-cuda-cupti",
    "libcheckpoint": "nvidia-cuda-cupti",
    "libnvperf_host": "nvidia-cuda-cupti",
    "libnvperf_target": "nvidia-cuda-cupti",
    "libpcsamplingutil": "nvidia-cuda-cupti",
    "libnvrtc": "nvidia-cuda-nvrtc",
    "libnvrtc-builtins": "nvidia-cuda-nvrtc",
    "libnvJitLink": "nvidia-nvjitlink",
    "libnvvm": "nvidia-nvvm",
    "libnvfatbin": "nvidia-nvfatbin",
    "libcudnn": "nvidia-cudnn",
    "libcudnn_adv": "nvidia-cudnn",
    "libcudnn_cnn": "nvidia-cudnn",
    "libcudnn_engines_precompiled": "nvidia-cudnn",
    "libcudnn_engines_runtime_compiled": "nvidia-cudnn",
    "libcudnn_graph": "nvidia-cudnn",
    "libcudnn_heuristic": "nvidia-cudnn",
    "libcudnn_ops": "nvidia-cudnn",
    "libcufft": "nvidia-cufft",
    "libcufftw": "nvidia-cufft",
    "libcurand": "nvidia-curand",
    "libcusolver": "nvidia-cusolver",
    "libcusolverMg": "nvidia-cusolver",
    "libcusparse": "nvidia-cusparse",
    "libcusparseLt": "nvidia-cusparselt",
    "libnccl": "nvidia-nccl",
    "libnvshmem_host": "nvidia-nvshmem",
    "libnvToolsExt": "nvidia-nvtx",
    "libnvtx3interop": "nvidia-nvtx",
    "libcufile": "nvidia-cufile",
    "libcufile_rdma": "nvidia-cufile",
    "libnvjpeg": "nvidia-nvjpeg",
    "libnppc": "nvidia-npp",
    "libnppial": "nvidia-npp",
    "libnppicc": "nvidia-npp",
    "libnppidei": "nvidia-npp",
    "libnppif": "nvidia-npp",
    "libnppig": "nvidia-npp",
    "libnppim": "nvidia-npp",
    "libnppist": "nvidia-npp",
    "libnppisu": "nvidia-npp",
    "libnppitc": "nvidia-npp",
    "libnpps": "nvidia-npp",
    "libcudla": "nvidia-cudla",
}

# a library's name: its stem, nvrtc's `.alt` twin, the 8-hex tag a wheel's repair gives the copy
# it bundles (`libcudart.faf08d9a.so.13`, `libcudart-faf08d9a.so.13`), `.so` and its versions
_NAME = re.compile(r"^(?P<stem>lib[\w+-]+?)(\.alt)?([.-][0-9a-f]{8})?\.so(\.\d+)*$")


@cache  # a set's libraries need the same few hundred names over and over
def cuda_family(name: str) -> str | None:
    """The CUDA library a needed name is one of (`libcublasLt.so.12` -> `libcublasLt`), also
    for a wheel's renamed copy; None for any other library."""
    found = _NAME.match(name)
    stem = found["stem"] if found else None
    return stem if stem in CUDA_LIBRARIES else None
