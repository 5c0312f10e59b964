"""The stand-in kernel as a wheel built for another torch: its module needs a c10 symbol that
this torch does not have, so loading it fails with `undefined symbol` (no torch needed to build)."""

from setuptools import Extension, setup

setup(
    name="standin-kernel",
    version="0.1.0",
    packages=["standin_kernel"],
    ext_modules=[Extension("standin_kernel._C", ["csrc/broken.cpp"], language="c++")],
)
