"""The one platform table: lockfile platform names, machines, and uv's platform strings."""

from __future__ import annotations

import platform as _platform
from collections.abc import Mapping

__all__ = ["DEFAULT_GLIBC", "MACHINES", "host_platform", "locked_glibc", "uv_platform"]

# lockfile platform (conda's subdir name) -> the machine that `uname -m` prints
MACHINES: Mapping[str, str] = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
DEFAULT_GLIBC = "2.28"  # what pixi and conda-lock assume for linux-64 too


def host_platform(machine: str | None = None) -> str:
    """This machine's platform in lockfile terms ('linux-64', 'linux-aarch64')."""
    machine = machine or _platform.machine()
    by_machine = {m: name for name, m in MACHINES.items()}
    return by_machine.get(machine, f"linux-{machine}")


def locked_glibc(virtual_packages: Mapping[str, str]) -> str:
    """The oldest glibc a lockfile's machines have: its `__glibc`, else the default it was made
    for (a lockfile from before `--glibc`). The one rule `lock` and every reader of a lock share."""
    return virtual_packages.get("__glibc", DEFAULT_GLIBC)


def uv_platform(platform: str, glibc: str) -> str:
    """uv's --python-platform: the machine and the manylinux level ('x86_64-manylinux_2_28')."""
    return f"{MACHINES[platform]}-manylinux_{glibc.replace('.', '_')}"
