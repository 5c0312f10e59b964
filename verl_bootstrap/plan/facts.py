"""Facts about this host that the plan depends on, gathered once before the plan is compiled."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.kernels.host import KernelHost, gather_kernel_host
from verl_bootstrap.kernels.record import record_for_profile
from verl_bootstrap.kernels.toolkit import Nvcc, find_nvcc
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.host.filesystems import storage_notes
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.machine.host.interpreters import find_interpreter
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.siteconfig.apply import index_settings

__all__ = ["HostFacts", "gather_host"]


@dataclass(frozen=True)
class HostFacts:
    """What the plan needs to know about the machine, and the env it gets here (each choice made
    once: the flag, else the profile's default)."""

    variant: str
    variant_reason: str
    interpreter: Path | None
    settings: IndexSettings
    backend: str  # conda | venv
    channels: tuple[str, ...] = ()  # the conda channels the env solves against
    driver: DriverInfo | None = None
    notes: tuple[str, ...] = ()
    kernels: KernelHost | None = None  # only when a stage compiles a kernel
    # the CUDA toolkit a build here would use, looked for only where a stage may compile (a
    # kernel stage, or verl's script); None: none found, or none looked for
    nvcc: Nvcc | None = None


def gather_host(
    profile: Profile,
    options: RunOptions,
    *,
    driver: DriverInfo | None,
    variant: tuple[str, str],
    indexes: tuple[IndexSettings, list[str]] | None = None,
    environ: Mapping[str, str] | None = None,
    check_optional: bool = True,
) -> HostFacts:
    """The interpreter, the indexes and the kernel sources for this run of `variant` (the plan's
    choice, and why); `indexes`: the index settings and their notes, when already read."""
    settings, notes = indexes or index_settings(
        profile, options, environ=environ, check_optional=check_optional
    )
    backend = options.backend_for(profile.env)
    interpreter = None
    if backend == "venv":
        interpreter = options.python or find_interpreter(
            profile.python.requires, profile.python.prefer
        )
    kernels, nvcc = None, None
    env = dict(os.environ) if environ is None else environ
    if any(stage.kernel or stage.kind == "script" for stage in profile.stages):
        nvcc = find_nvcc(env)
    if any(stage.kernel for stage in profile.stages):
        kernels = gather_kernel_host(
            options.site,
            interpreter=interpreter,
            python_prefer=profile.python.prefer,
            environ=env,
            record=record_for_profile(options.profile),
            nvcc=nvcc,
        )
    return HostFacts(
        variant=variant[0],
        variant_reason=variant[1],
        interpreter=interpreter,
        settings=settings,
        backend=backend,
        channels=options.channels_for(profile.env),
        driver=driver,
        notes=(*options.site.notes, *notes, *storage_notes(options.prefix, environ)),
        kernels=kernels,
        nvcc=nvcc,
    )
