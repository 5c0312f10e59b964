"""Find the NVIDIA driver: overrides, then NVML, then /proc, then `nvidia-smi`.

Never from `nvcc` or /usr/local/cuda: a CUDA toolkit says nothing about the driver, and hosts
with a toolkit and no driver are common (build nodes, CI). No source answering means no driver.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.machine.gpu.cuda import (
    cuda_for_driver,
    driver_for_cuda,
    known_compute_capability,
    version_tuple,
)
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.nvml import read_nvml
from verl_bootstrap.machine.gpu.query import parse_query_gpus
from verl_bootstrap.machine.gpu.smiparse import parse_proc_version, parse_smi_xml

__all__ = [
    "CONDA_OVERRIDE",
    "DRIVER_OVERRIDE",
    "PROC_VERSION",
    "detect_driver",
    "gpu_present",
    "host_driver",
]

DRIVER_OVERRIDE = "VERL_BOOTSTRAP_CUDA_DRIVER"
CONDA_OVERRIDE = "CONDA_OVERRIDE_CUDA"
PROC_VERSION = Path("proc/driver/nvidia/version")
_SMI_TIMEOUT = 10.0
_DRIVER_SHAPE = re.compile(r"^\d{3}(?:\.\d+){0,2}$")
_CUDA_SHAPE = re.compile(r"^\d{2}(?:\.\d+)?$")


def _from_driver_override(environ: Mapping[str, str]) -> DriverInfo | None:
    value = environ.get(DRIVER_OVERRIDE, "").strip()
    if not value:
        return None
    if not _DRIVER_SHAPE.match(value):
        raise InputError(
            f"{DRIVER_OVERRIDE}={value!r} is not a driver version",
            hint=f"write it like {DRIVER_OVERRIDE}=580.65.06 or {DRIVER_OVERRIDE}=580",
        )
    return DriverInfo(version=value, cuda=cuda_for_driver(value), source=DRIVER_OVERRIDE)


def _from_conda_override(environ: Mapping[str, str]) -> DriverInfo | None:
    # conda's own rule: an empty CONDA_OVERRIDE_CUDA means "no CUDA", so it names no driver.
    value = environ.get(CONDA_OVERRIDE, "").strip()
    if not value:
        return None
    branch = driver_for_cuda(value) if _CUDA_SHAPE.match(value) else None
    if branch is None:
        raise InputError(
            f"{CONDA_OVERRIDE}={value!r} is not a CUDA version a driver reports",
            hint=f"write it like {CONDA_OVERRIDE}=12.8",
        )
    # The driver stands for the first branch that reports this CUDA, the least it implies.
    cuda = ".".join(str(n) for n in version_tuple(value)[:2])
    return DriverInfo(version=branch, cuda=cuda, source=CONDA_OVERRIDE)


def _from_proc(root: Path) -> DriverInfo | None:
    try:
        text = (root / PROC_VERSION).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    version = parse_proc_version(text)
    if version is None:
        return None
    return DriverInfo(version=version, cuda=cuda_for_driver(version), source=f"/{PROC_VERSION}")


def _smi_output(smi: str, *args: str) -> str | None:
    try:
        done = proc.capture([smi, *args], timeout=_SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _with_compute_capability(smi: str, info: DriverInfo) -> DriverInfo:
    # `-q -x` does not report compute capability; the CSV query does (drivers 510 and newer).
    text = _smi_output(smi, "--query-gpu=index,uuid,compute_cap", "--format=csv")
    caps = {g.uuid: g.compute_capability for g in parse_query_gpus(text or "")}
    gpus = tuple(
        replace(g, compute_capability=caps.get(g.uuid) or known_compute_capability(g.name))
        for g in info.gpus
    )
    return replace(info, gpus=gpus)


def _from_smi(nvidia_smi: str | None, environ: Mapping[str, str]) -> DriverInfo | None:
    smi = shutil.which(nvidia_smi, path=environ.get("PATH")) if nvidia_smi else None
    if smi is None:
        return None
    info = parse_smi_xml(_smi_output(smi, "-q", "-x") or "")
    return _with_compute_capability(smi, info) if info else None


def _merge(base: DriverInfo, smi: DriverInfo | None) -> DriverInfo:
    """Keep the version's own source; take GPUs and the driver's CUDA from nvidia-smi."""
    if smi is None:
        return base
    return replace(base, cuda=smi.cuda or base.cuda, gpus=smi.gpus, attached=smi.attached)


def detect_driver(
    *,
    root: Path = Path("/"),
    environ: Mapping[str, str] | None = None,
    use_nvml: bool = True,
    nvidia_smi: str | None = "nvidia-smi",
) -> DriverInfo | None:
    """The NVIDIA driver this host runs, or None when it has none.

    `VERL_BOOTSTRAP_CUDA_DRIVER` overrides detection (making locks on CPU hosts);
    `CONDA_OVERRIDE_CUDA` stands in for the driver's CUDA only when no real driver answers.
    """
    env = os.environ if environ is None else environ
    override = _from_driver_override(env)
    if override is not None:
        return override
    found = read_nvml() if use_nvml else None
    if found is not None:
        return found
    from_proc = _from_proc(root)
    if from_proc is not None:
        return _merge(from_proc, _from_smi(nvidia_smi, env))
    return _from_smi(nvidia_smi, env) or _from_conda_override(env)


def host_driver() -> DriverInfo | None:
    """This host's driver as a run goes by it: install, plan and bundle (run.installrun),
    `verify --prefix` and `verify --train` all ask here, so "which driver" and "is there a GPU"
    cannot differ between them. Doctor alone calls detect_driver itself, with its own sources
    (a report recorded on another node, tests)."""
    return detect_driver()


def gpu_present() -> bool:
    """Whether this host has an NVIDIA driver (either override standing in for one counts)."""
    return host_driver() is not None
