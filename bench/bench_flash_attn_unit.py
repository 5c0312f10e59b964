"""Benchmark (not a test, heavy): flash-attn's own kernel files compiled by nvcc for ONE GPU
architecture against flash-attn's default list, with flash-attn's own compiler flags.

The CUDA stand-in (bench_kernels_cuda.py) has little device code, so its ratio is mostly the
fixed host-side cost. flash-attn's build is 72 files like the ones compiled here, each almost all
device templates (CUTLASS), so their ratio is what a sized build saves on the whole build.

What it does: makes (or reuses, --env) a venv with the cu130 torch and NVIDIA's CUDA 13.0 toolkit
wheels (the heavy profile tests/data/profiles/kernel-stage-cuda), downloads flash-attn's release
sdist from the configured index (pip, in that env, so its setup.py can import torch), and compiles
the files named (default: one forward file, head dim 128, bf16) at the same time, one nvcc each,
as a build with MAX_JOBS set to that many does, with the flags of flash-attn's setup.py and
`--threads $NVCC_THREADS` (default 1, as verl-bootstrap sets it; flash-attn's own default is 4,
which runs that many architecture passes of about 3.4 GB each at once per file): first
`-gencode` for sm_90 alone (what `--cuda-arch 9.0` gives: FLASH_ATTN_CUDA_ARCHS=90), then for
flash-attn's default FLASH_ATTN_CUDA_ARCHS=80;90;100;120.
It prints the set's wall seconds and each file's CPU seconds (its nvcc and children, user + sys).

Run: .venv/bin/python bench/bench_flash_attn_unit.py [--env ENV] [--file NAME.cu ...]
(about 20 minutes for the default file on this project's 2-core machine; mind the memory
when naming several files with NVCC_THREADS above 1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_kernels_cuda import make_env  # noqa: E402

VERSION = "2.8.3"  # the flash-attn the fsdp profile builds
DEFAULT_FILES = ("flash_fwd_hdim128_bf16_sm80.cu",)  # head dim 128, bf16: the common case
ONE = ("90",)  # FLASH_ATTN_CUDA_ARCHS=90, what --cuda-arch 9.0 sets
DEFAULT_LIST = ("80", "90", "100", "120")  # flash-attn's setup.py default (CUDA >= 12.8)
# flash-attn's setup.py: its nvcc flags (then --threads from NVCC_THREADS)
FLAGS = (
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
)
# torch's cpp_extension adds these to every CUDA extension's nvcc line
TORCH_FLAGS = (
    "-DTORCH_EXTENSION_NAME=flash_attn_2_cuda",
    "-DTORCH_API_INCLUDE_EXTENSION_H",
    "-D_GLIBCXX_USE_CXX11_ABI=1",
    "--compiler-options",
    "-fPIC",
)
INCLUDES = (
    "import torch.utils.cpp_extension as e, nvidia, pathlib;"
    "print('\\n'.join(e.include_paths(device_type='cuda')));"
    "print(next(str(pathlib.Path(p) / 'cu13') for p in nvidia.__path__"
    " if (pathlib.Path(p) / 'cu13/bin/nvcc').exists()))"
)


def flash_attn_source(python: Path, work: Path) -> Path:
    """flash-attn's release sdist, unpacked (its metadata step needs torch, hence the env)."""
    env = {**os.environ, "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            f"flash-attn=={VERSION}",
            "--dest",
            str(work),
        ],
        check=True,
        env=env,
    )
    with tarfile.open(work / f"flash_attn-{VERSION}.tar.gz") as tar:
        tar.extractall(work, filter="data")
    return work / f"flash_attn-{VERSION}" / "csrc"


def nvcc_command(python: Path, csrc: Path, archs: tuple[str, ...]) -> list[str]:
    """flash-attn's nvcc line for `archs`, less the file (torch's and the toolkit's headers)."""
    lines = subprocess.run([python, "-c", INCLUDES], check=True, capture_output=True, text=True)
    *torch_includes, cuda = lines.stdout.split()
    includes = [
        *torch_includes,
        f"{cuda}/include",
        str(csrc / "flash_attn"),
        str(csrc / "flash_attn" / "src"),
        str(csrc / "cutlass" / "include"),
    ]
    gencode = [f for a in archs for f in ("-gencode", f"arch=compute_{a},code=sm_{a}")]
    threads = ("--threads", os.environ.get("NVCC_THREADS") or "1")
    return [
        f"{cuda}/bin/nvcc",
        *(f"-I{i}" for i in includes),
        *TORCH_FLAGS,
        *FLAGS,
        *threads,
        *gencode,
    ]


def compile_set(
    python: Path, csrc: Path, names: tuple[str, ...], archs: tuple[str, ...], out: Path
) -> tuple[float, dict[str, float]]:
    """(wall seconds of the set, each file's CPU seconds): one nvcc per file, all at once."""
    cmd = nvcc_command(python, csrc, archs)
    start = time.perf_counter()
    running = {
        subprocess.Popen(
            [
                *cmd,
                "-c",
                str(csrc / "flash_attn" / "src" / name),
                "-o",
                str(out / f"{name}.{len(archs)}.o"),
            ]
        ).pid: name
        for name in names
    }
    cpu: dict[str, float] = {}
    while running:
        pid, status, usage = os.wait4(-1, 0)  # each nvcc's own usage, its children included
        name = running.pop(pid)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"nvcc failed on {name} for {archs}")
        cpu[name] = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, help="reuse a venv made as make_env() makes it")
    parser.add_argument("--file", action="append", help="a file of csrc/flash_attn/src")
    args = parser.parse_args()
    names = tuple(args.file or DEFAULT_FILES)
    work = Path(tempfile.mkdtemp(prefix="vb-bench-fa-"))
    try:
        python = (args.env / "bin" / "python") if args.env else make_env(work / "env")
        csrc = flash_attn_source(python, work)
        one = compile_set(python, csrc, names, ONE, work)
        many = compile_set(python, csrc, names, DEFAULT_LIST, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    threads = os.environ.get("NVCC_THREADS") or "1"
    print(
        f"flash-attn {VERSION}: {len(names)} file(s) of csrc/flash_attn/src compiled at once, "
        f"{os.cpu_count()} cores, NVCC_THREADS={threads}"
    )
    print(f"{'':44} {'FLASH_ATTN_CUDA_ARCHS=90':>26} {'=80;90;100;120':>16} {'ratio':>7}")
    print(f"{'the set, wall seconds':44} {one[0]:26.1f} {many[0]:16.1f} {many[0] / one[0]:6.1f}x")
    for name in names:
        a, b = one[1][name], many[1][name]
        print(f"{name + ', CPU seconds':44} {a:26.1f} {b:16.1f} {b / a:6.1f}x")
    a, b = sum(one[1].values()), sum(many[1].values())
    print(f"{'all files, CPU seconds':44} {a:26.1f} {b:16.1f} {b / a:6.1f}x")


if __name__ == "__main__":
    main()
