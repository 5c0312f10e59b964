"""Benchmark (not a test, heavy: a cu130 torch env of several GB, uv hardlinks it from its cache):
the real CUDA stand-in extension (tests/data/kernels/cudastandin) built by nvcc for ONE GPU
architecture against the same build for the default list, the architectures the torch wheel
itself was built for. No GPU is needed: the CUDA 13.0 toolkit comes as NVIDIA's wheels.

With no TORCH_CUDA_ARCH_LIST and no GPU, torch's cpp_extension has no list at all (it asks the
GPUs), so a build meant for other machines carries torch's own list, as prebuilt kernels do.

Run: .venv/bin/python bench/bench_kernels_cuda.py, or `make bench-heavy` (1 to 2 minutes per
build on this project's quiet 2-core machine, once the env's wheels are in uv's cache). Target
(issue 10): the one-architecture build at least 3x faster. This stand-in has little device code,
so its ratio is mostly the host-side cost paid once; bench_flash_attn_unit.py measures one of
flash-attn's own files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from verl_bootstrap.installer.cmdline import pip_launcher, uv_binary  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "kernels" / "cudastandin"
PROFILE = ROOT / "tests" / "data" / "profiles" / "kernel-stage-cuda" / "profile.yaml"
ONE_ARCH = "9.0"
# torch's own arch flags, as "sm_75 sm_80 ...", read without a GPU
TORCH_ARCHS = "import torch; print(torch._C._cuda_getArchFlags())"


def make_env(env: Path) -> Path:
    """A venv with the profile's torch stage: cu130 torch and the CUDA 13.0 toolkit wheels."""
    profile = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    packages = profile["stages"][0]["packages"]
    subprocess.run([uv_binary(), "venv", "-q", "--python", "3.11", str(env)], check=True)
    python = env / "bin" / "python"
    subprocess.run(
        [uv_binary(), "pip", "install", "-q", "--python", str(python), *packages], check=True
    )
    return python


def default_list(python: Path) -> str:
    """torch's build list in TORCH_CUDA_ARCH_LIST's form, PTX for the newest (as torch does)."""
    flags = subprocess.run([python, "-c", TORCH_ARCHS], check=True, capture_output=True, text=True)
    archs = [f"{a[3:-1]}.{a[-1]}" for a in flags.stdout.split() if a.startswith("sm_")]
    return ";".join(archs) + "+PTX"


def build(python: Path, work: Path, archs: str) -> float:
    """Seconds of `pip wheel` of the extension against the env's torch, for `archs`."""
    source = Path(shutil.copytree(SOURCE, work / f"src-{len(archs)}"))
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": archs, "MAX_JOBS": str(os.cpu_count() or 1)}
    cmd = [*pip_launcher(), "--python", str(python), "wheel", "--no-deps", "--no-build-isolation"]
    start = time.perf_counter()
    subprocess.run(
        [*cmd, "--wheel-dir", str(work / "wheels"), str(source)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="vb-bench-cuda-"))
    try:
        python = make_env(work / "env")
        default = default_list(python)
        one, many = build(python, work, ONE_ARCH), build(python, work, default)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'CUDA stand-in extension, nvcc build':66} {'seconds':>8} {'x faster':>10}")
    print(
        f"{f'TORCH_CUDA_ARCH_LIST={ONE_ARCH} (one architecture)':66} {one:8.1f} {many / one:9.1f}x"
    )
    print(f"{f'TORCH_CUDA_ARCH_LIST={default} (torch build list)':66} {many:8.1f}")


if __name__ == "__main__":
    main()
