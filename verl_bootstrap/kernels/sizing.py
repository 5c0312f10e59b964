"""Source builds sized to the host: the GPU architectures to compile for, and MAX_JOBS.

nvcc compiles every architecture it is told about, and each parallel job can take several GB of
RAM: building only for the GPUs that will run the code, with as many jobs as memory allows, is
the difference between minutes and hours (or an OOM kill).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.profile.kernel import THREADS_VARIABLES

__all__ = [
    "ARCH_VARIABLES",
    "DEFAULT_ARCH_COUNT",
    "THREADS_VARIABLES",
    "BuildSizing",
    "HostResources",
    "arch_variables",
    "choose_archs",
    "choose_max_jobs",
    "device_passes",
    "oom_message",
    "read_resources",
]

# How each project reads the architecture list: "90;100" or torch's "9.0;10.0".
ARCH_VARIABLES = {
    "FLASH_ATTN_CUDA_ARCHS": "digits",
    "NVTE_CUDA_ARCHS": "digits",
    "TORCH_CUDA_ARCH_LIST": "dotted",
}
# THREADS_VARIABLES (the profile's vocabulary) run several of nvcc's per-architecture passes at
# once inside one compile job (flash-attn's setup.py passes `--threads $NVCC_THREADS`, default 4).
# Each pass is a cicc process of its own: measured here, one flash-attn file for four
# architectures ran four of about 3.4 GB each, so a job sized at one pass's memory ran the host
# out of memory.
DEFAULT_ARCH_COUNT = 4  # a project's default list is about four architectures
OOM_EXITS = frozenset({-9, 137})


@dataclass(frozen=True)
class HostResources:
    """What a build may use: CPU cores and available memory."""

    cores: int
    available_gb: float


@dataclass(frozen=True)
class BuildSizing:
    """The decision and why."""

    archs: tuple[str, ...]  # compute capabilities, "9.0"
    arch_reason: str
    max_jobs: int
    jobs_reason: str


def read_resources(meminfo: Path = Path("/proc/meminfo")) -> HostResources:
    """Cores this process may run on, and MemAvailable (0 when the file cannot be read)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    available = 0.0
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        available = 0.0
    return HostResources(cores=cores or 1, available_gb=available)


def choose_archs(
    driver: DriverInfo | None, flag: tuple[str, ...], site_default: tuple[str, ...]
) -> tuple[tuple[str, ...], str]:
    """--cuda-arch wins, then the GPUs the driver reports, then the site's default."""
    if flag:
        return flag, "from --cuda-arch"
    seen = sorted(
        {g.compute_capability for g in (driver.gpus if driver else ()) if g.compute_capability},
        key=lambda cc: tuple(int(p) for p in cc.split(".")),
    )
    if seen:
        return tuple(seen), f"compute capability of this host's GPUs ({len(driver.gpus)} seen)"  # type: ignore[union-attr]
    if site_default:
        return site_default, "the site config's default (no GPU seen here)"
    return (), "no GPU seen and no --cuda-arch: the project's default list (slow)"


def choose_max_jobs(resources: HostResources, job_ram_gb: float) -> tuple[int, str]:
    """As many jobs as cores, but no more than available memory holds at `job_ram_gb` each."""
    by_ram = (
        int(resources.available_gb // job_ram_gb) if resources.available_gb else resources.cores
    )
    jobs = max(1, min(resources.cores, by_ram))
    why = (
        f"{resources.cores} cores, {resources.available_gb:.0f} GB available, "
        f"about {job_ram_gb:g} GB per compile job"
    )
    return jobs, why


def device_passes(threads: str | None, archs: int) -> int:
    """How many per-architecture passes one compile job runs at once: one, unless the user
    exported a threads variable, then that many, but never more than there are architectures."""
    try:
        wanted = int(threads) if threads else 1
    except ValueError:
        wanted = 1
    return max(1, min(wanted, archs or DEFAULT_ARCH_COUNT))


def arch_variables(names: tuple[str, ...], archs: tuple[str, ...]) -> dict[str, str]:
    """Each named variable set to the arch list in the form that project reads."""
    if not archs:
        return {}
    out = {}
    for name in names:
        style = ARCH_VARIABLES.get(name, "dotted")
        out[name] = ";".join(a.replace(".", "") if style == "digits" else a for a in archs)
    return out


def oom_message(
    returncode: int, max_jobs: int, job_ram_gb: float, available_gb: float
) -> str | None:
    """What to say when the build was killed (SIGKILL, as the kernel's OOM killer sends)."""
    if returncode not in OOM_EXITS:
        return None
    fits = max(1, int(available_gb // (job_ram_gb * 1.5))) if available_gb else 1
    fits = min(fits, max(1, max_jobs - 1))
    return (
        f"the build was killed (exit {returncode}), most likely by the kernel's OOM killer: "
        f"MAX_JOBS={max_jobs} needs about {max_jobs * job_ram_gb:g} GB; "
        f"set MAX_JOBS={fits} (e.g. `MAX_JOBS={fits} verl-bootstrap ...`)"
    )
