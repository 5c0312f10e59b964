"""doctor's checks, each named once, in the order they run and report (docs/doctor.md lists them
so), with whether an install's preflight runs it and whether it needs the host's NVIDIA driver
detected first."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from verl_bootstrap.errors import InputError
from verl_bootstrap.plan.doctor.checks_build import check_build_tools, check_python
from verl_bootstrap.plan.doctor.checks_env import (
    check_pip_check,
    check_protected_versions,
    check_verl_source,
)
from verl_bootstrap.plan.doctor.checks_gpu import (
    check_driver,
    check_driver_vs_plan,
    check_gpu_vs_build,
    check_visibility,
)
from verl_bootstrap.plan.doctor.checks_libs import check_shadowing_loaded, check_shadowing_paths
from verl_bootstrap.plan.doctor.checks_machine import (
    check_disk,
    check_glibc,
    check_platform,
    check_ram,
    check_root,
)
from verl_bootstrap.plan.doctor.checks_network import check_network
from verl_bootstrap.plan.doctor.checks_torch import check_cpu_torch
from verl_bootstrap.plan.doctor.inputs import Context
from verl_bootstrap.plan.doctor.results import CheckResult

__all__ = [
    "ALL_CHECKS",
    "CHECKS",
    "NEEDS_DRIVER",
    "PREFLIGHT_CHECKS",
    "REGISTRY",
    "Registered",
    "known_checks",
]

Check = Callable[[Context], CheckResult]


@dataclass(frozen=True)
class Registered:
    """One check: its name (for --only and --skip-check), what runs, and where it applies."""

    name: str
    run: Check
    # run before an install, before anything is downloaded; a failure refuses the install
    preflight: bool = False
    needs_driver: bool = False  # the driver is detected only when a check that reads it runs


REGISTRY: tuple[Registered, ...] = (
    Registered("driver", check_driver, preflight=True, needs_driver=True),
    Registered("driver-vs-plan", check_driver_vs_plan, preflight=True, needs_driver=True),
    Registered("gpu-vs-build", check_gpu_vs_build, preflight=True, needs_driver=True),
    Registered("shadowing-paths", check_shadowing_paths, preflight=True),
    Registered("shadowing-loaded", check_shadowing_loaded),
    Registered("visibility", check_visibility, preflight=True, needs_driver=True),
    Registered("verl-source", check_verl_source),
    Registered("protected-versions", check_protected_versions),
    Registered("pip-check", check_pip_check),
    Registered("disk", check_disk, preflight=True),
    Registered("ram", check_ram, preflight=True),
    Registered("build-tools", check_build_tools, preflight=True),
    Registered("glibc", check_glibc, preflight=True),
    Registered("platform", check_platform, preflight=True),
    Registered("python", check_python, preflight=True),
    Registered("root", check_root, preflight=True),
    Registered("network", check_network, preflight=True),
    Registered("cpu-torch", check_cpu_torch, preflight=True),
)
CHECKS: dict[str, Check] = {check.name: check.run for check in REGISTRY}
ALL_CHECKS: tuple[str, ...] = tuple(CHECKS)
PREFLIGHT_CHECKS: tuple[str, ...] = tuple(c.name for c in REGISTRY if c.preflight)
NEEDS_DRIVER: frozenset[str] = frozenset(c.name for c in REGISTRY if c.needs_driver)


def known_checks(names: Iterable[str]) -> None:
    """Refuse a `--skip-check NAME` no check has: a typo would otherwise skip nothing, silently."""
    for name in names:
        if name not in CHECKS:
            close = difflib.get_close_matches(name, ALL_CHECKS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(
                f"--skip-check {name!r}: no check has that name",
                hint=f"{hint}the checks are {', '.join(ALL_CHECKS)}",
            )
