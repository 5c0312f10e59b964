"""A stand-in for flash-attn: a C++ extension compiled against the installed torch (no build
isolation), whose module links torch's c10 and so carries torch's C++ ABI in its symbols."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(  # name and version: pyproject.toml
    packages=["standin_kernel"],
    ext_modules=[CppExtension("standin_kernel._C", ["csrc/standin.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
