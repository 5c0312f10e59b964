"""Benchmark (not a test, heavy): a whole source build of TransformerEngine's torch extension,
`transformer-engine-torch` 2.16.1, as megatron's cu128 stack builds it (the default index has it
only as an sdist, and verl's wheelhouse has no build for torch 2.10): what sets the profile's
`build_minutes` for that stage, and so the plan's estimate on every host.

The extension is 32 C++ files compiled by the host compiler against torch's and CUDA's headers
(a `CppExtension`: no device code, so its work does not grow with the GPU architectures). What
it does: makes (or reuses, --env) a venv of Python 3.12 with torch 2.10.0 (the default index's
CUDA 12.8 build, the stack's) and the CUDA 12.8 headers from NVIDIA's wheels (the nvcc and CCCL
packages besides the libraries torch brings), downloads the sdist from the configured index,
and builds its wheel with MAX_JOBS jobs (default 2: this project's host), no build isolation,
`NVTE_PYTORCH_FORCE_BUILD=TRUE` (no prebuilt wheel is fetched) and the headers taken from the
wheels (`NVTE_BUILD_USE_NVIDIA_WHEELS=1`). It prints the build's wall seconds, the CPU seconds
of every process it ran (user + sys), the largest one's memory, and the minutes those CPU
seconds take on 16 cores: the figure a profile states as `build_minutes`.

Run: .venv/bin/python bench/bench_te_build.py [--env ENV] [--jobs N]
(about 25 CPU minutes of compiling, several GB of wheels for the venv once).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERSION = "2.16.1"  # the TransformerEngine megatron's stacks pin
TORCH = "torch==2.10.0"  # the cu128 stack's torch (the default index's CUDA 12.8 build)
HEADERS = ("nvidia-cuda-nvcc-cu12==12.8.*", "nvidia-cuda-cccl-cu12==12.8.*")
BUILD_TOOLS = ("setuptools", "wheel", "pip", "pybind11")
PYTHON = "3.12"
UV = Path(sys.executable).parent / "uv"


def make_env(env: Path) -> Path:
    """The venv the extension builds in (kept: pass it again with --env)."""
    python = env / "bin" / "python"
    if not python.exists():
        subprocess.run([str(UV), "venv", "-q", "--python", PYTHON, str(env)], check=True)
        wanted = [TORCH, *HEADERS, *BUILD_TOOLS]
        subprocess.run(
            [str(UV), "pip", "install", "-q", "--python", str(python), *wanted], check=True
        )
    return python


def sdist(python: Path, work: Path) -> Path:
    """transformer-engine-torch's sdist from the configured index (its metadata needs torch)."""
    pip = [str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    wanted = ["--no-build-isolation", "-d", str(work), f"transformer-engine-torch=={VERSION}"]
    subprocess.run([*pip, *wanted], check=True)
    return next(work.glob("transformer_engine_torch-*.tar.gz"))


def build(python: Path, archive: Path, work: Path, jobs: int) -> tuple[float, int]:
    """The wheel built from `archive`: its wall seconds and the compiled units ninja counted."""
    env = {k: v for k, v in os.environ.items() if k not in {"CUDA_HOME", "CUDA_PATH"}}
    env.update(
        MAX_JOBS=str(jobs),
        NVTE_FRAMEWORK="pytorch",
        NVTE_PYTORCH_FORCE_BUILD="TRUE",
        NVTE_BUILD_USE_NVIDIA_WHEELS="1",
        PATH=f"{python.parent}:/usr/bin:/bin",  # no toolkit's nvcc: the wheels' headers
    )
    start = time.perf_counter()
    pip = [str(python), "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "-w", str(work / "wheels"), str(archive)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(done.stdout[-4000:] + done.stderr[-4000:])
    said = done.stdout + done.stderr  # pip passes the build's output on either stream
    units = [int(m[1]) for m in re.finditer(r"\[(\d+)/(\d+)\]", said)]
    return seconds, max(units, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, help="a venv made by an earlier run (kept)")
    parser.add_argument("--jobs", type=int, default=2, help="MAX_JOBS (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-te-") as tmp:
        work = Path(tmp)
        python = make_env(args.env or work / "env")
        archive = sdist(python, work)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, units = build(python, archive, work, args.jobs)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"transformer-engine-torch {VERSION}, {TORCH}, MAX_JOBS={args.jobs}, {units} units")
    largest = after.ru_maxrss / 2**20
    print(f"  wall {seconds:.0f} s, CPU {cpu:.0f} s, largest process {largest:.1f} GiB")
    print(f"  on 16 cores: {cpu / 16 / 60:.1f} min (the profile's build_minutes)")


if __name__ == "__main__":
    main()
