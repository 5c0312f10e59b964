"""The CUDA toolkit a source build of a CUDA extension needs: an nvcc of torch's CUDA major.

doctor asks for it before a run only where the plan builds from source; a kernel stage whose
prebuilt wheels all fail asks for it at run time, before its fallback build starts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import StepFailed
from verl_bootstrap.machine.gpu.cuda import version_tuple

__all__ = [
    "Nvcc",
    "find_nvcc",
    "require_toolkit",
    "toolkit_fix",
    "toolkit_need",
    "toolkit_problem",
]

_TIMEOUT = 15.0


@dataclass(frozen=True)
class Nvcc:
    """An nvcc found for a build, and the CUDA release it reports."""

    path: str
    release: str


def _exactly(environ: Mapping[str, str]) -> dict[str, str | None]:
    """proc overrides that make nvcc's environment exactly `environ`."""
    overrides: dict[str, str | None] = {k: None for k in os.environ if k not in environ}
    overrides.update(environ)
    return overrides


def find_nvcc(environ: Mapping[str, str]) -> Nvcc | None:
    """The nvcc a build under `environ` runs: $CUDA_HOME/bin/nvcc, else the one on PATH."""
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    candidate = Path(home) / "bin" / "nvcc" if home else None
    nvcc = str(candidate) if candidate and candidate.exists() else None
    nvcc = nvcc or shutil.which("nvcc", path=environ.get("PATH", ""))
    if nvcc is None:
        return None
    try:
        done = proc.capture([nvcc, "--version"], env=_exactly(environ), timeout=_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"release (\d+\.\d+)", done.stdout)
    return Nvcc(nvcc, match[1]) if match else None


def toolkit_fix(cuda: str) -> str:
    """How to get a CUDA toolkit of `cuda` without root."""
    return (
        f"install the CUDA {cuda} toolkit without root (NVIDIA's runfile with `--silent --toolkit "
        f"--installpath=$HOME/cuda-{cuda}`, or conda's cuda-toolkit={cuda}) and set CUDA_HOME to it"
    )


def toolkit_problem(cuda: str, nvcc: Nvcc | None) -> str | None:
    """Why `nvcc` cannot build extensions for torch's CUDA `cuda` (None: it can)."""
    if nvcc is None:
        return f"no nvcc (CUDA_HOME or PATH) for CUDA {cuda} builds"
    if version_tuple(nvcc.release)[:1] != version_tuple(cuda)[:1]:
        major = cuda.partition(".")[0]
        found = f"nvcc {nvcc.release} ({nvcc.path}) is not CUDA {major}.x like the wheels"
        return f"{found}: torch refuses to build extensions across CUDA majors"
    return None


def toolkit_need(cuda: str | None, nvcc: Nvcc | None) -> str:
    """What a plan says of the toolkit its source build of torch's CUDA `cuda` needs, and whether
    this host has it ("" for a CPU torch, which needs none)."""
    if not cuda or cuda == "cpu":
        return ""
    major = cuda.partition(".")[0]
    need = f"it needs a CUDA {major}.x toolkit (nvcc, from CUDA_HOME or PATH)"
    how = "`verl-bootstrap doctor` names a rootless install"
    if nvcc is None:
        return f"{need}: none here ({how})"
    if toolkit_problem(cuda, nvcc) is not None:
        return (
            f"{need}: nvcc {nvcc.release} ({nvcc.path}) is another CUDA major, across which "
            f"torch builds no extension ({how})"
        )
    return f"{need}: nvcc {nvcc.release} ({nvcc.path})"


def require_toolkit(
    stage: str, distribution: str, cuda: str | None, environ: Mapping[str, str]
) -> None:
    """Refuse a kernel's fallback source build that has no toolkit for torch's CUDA `cuda`,
    before it starts (a CPU torch, `cuda` None or 'cpu', needs none)."""
    if not cuda or cuda == "cpu":
        return
    problem = toolkit_problem(cuda, find_nvcc(environ))
    if problem is None:
        return
    raise StepFailed(
        f"stage {stage}: no prebuilt {distribution} wheel was taken, so it falls back to a source "
        f"build, and {problem}",
        hint=f"{toolkit_fix(cuda)}, then re-run; or make a prebuilt source reachable "
        "(`verl-bootstrap kernels coverage` shows which serve this env)",
    )
