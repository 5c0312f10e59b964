"""What the plan needs to decide a kernel stage, gathered once before it is compiled: the lab
wheelhouse's listing (and that of the kernel wheels of a bundle installed from), this host's
cores and memory, its CUDA toolkit, the Python tag the env will have, and the sizing variables
the user already set (which are kept)."""

from __future__ import annotations

import os
import re
import shutil
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse, RemoteWheelhouse, is_url
from verl_bootstrap.kernels.sizing import (
    ARCH_VARIABLES,
    THREADS_VARIABLES,
    HostResources,
    read_resources,
)
from verl_bootstrap.kernels.toolkit import Nvcc
from verl_bootstrap.kernels.wheelhouse import Entry, Wheelhouse
from verl_bootstrap.options import SiteOptions
from verl_bootstrap.paths import default_wheelhouse
from verl_bootstrap.redact import redact

__all__ = [
    "Bundled",
    "KernelHost",
    "gather_kernel_host",
    "open_bundled",
    "open_wheelhouse",
    "wheelhouse_root",
]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # any URL: only http(s) and file are read


@dataclass(frozen=True)
class Bundled:
    """The kernel wheels a bundle carries: the read-only wheelhouse they were unpacked into."""

    root: Path
    entries: tuple[Entry, ...]

    def find(self, sha256: str) -> Entry | None:
        """The wheel with `sha256`, if the bundle carries it."""
        return next((e for e in self.entries if e.sha256 == sha256), None)


def open_bundled(root: Path) -> Bundled:
    """The bundle's kernel wheels at `root`, as its index lists them."""
    return Bundled(root, Wheelhouse(root).entries())


@dataclass(frozen=True)
class KernelHost:
    """The facts; `entries` is the wheelhouse's index as read when the plan was made."""

    wheelhouse: Path | str  # a folder, or an index URL (as shown: credentials redacted)
    entries: tuple[Entry, ...]
    writable: bool
    resources: HostResources
    python: str | None  # "cp312"
    platform: str  # "linux_x86_64"
    site_archs: tuple[str, ...] = ()
    preset: Mapping[str, str] | None = None  # MAX_JOBS / arch variables already in the environment
    ninja: bool = True  # ninja is on PATH (torch's extension builds run serially without it)
    record: KernelRecord | None = None  # the sources' recorded wheel lists (None: none)
    order: tuple[str, ...] | None = None  # the site config's kernel_sources (None: declared)
    bundled: Bundled | None = None  # the kernel wheels of the bundle installed from
    nvcc: Nvcc | None = None  # the toolkit a source build here would use (None: none found)
    # the wheelhouse is the site config's (a lab's), not the tool home's own per-user one
    configured: bool = False


def wheelhouse_root(configured: str | None, environ: Mapping[str, str]) -> Path:
    """The site config's wheelhouse, else $VERL_BOOTSTRAP_HOME/wheelhouse (~/.verl-bootstrap)."""
    if configured:
        return Path(os.path.expandvars(configured.removeprefix("file://"))).expanduser().absolute()
    return default_wheelhouse(environ)


def open_wheelhouse(configured: str | None, environ: Mapping[str, str]) -> AnyWheelhouse:
    """The lab wheelhouse: the site config's folder or index URL, else the tool home's."""
    if configured and is_url(configured):
        return RemoteWheelhouse(configured)
    if configured and _SCHEME.match(configured) and not configured.startswith("file://"):
        raise InputError(
            f"wheelhouse {redact(configured)!r} is a URL the tool cannot read",
            hint="name a folder, a file:// URL, or an http(s):// index URL",
        )
    return Wheelhouse(wheelhouse_root(configured, environ))


def gather_kernel_host(
    site: SiteOptions,
    *,
    interpreter: Path | None,
    python_prefer: str,
    environ: Mapping[str, str],
    record: KernelRecord | None = None,
    nvcc: Nvcc | None = None,
) -> KernelHost:
    """Read the wheelhouse and the host (an unreadable index is an InputError naming it);
    `site`: the site config's wheelhouse, archs, kernel_sources and a bundle's kernel wheels;
    `record`: the recorded lists beside the profile; `nvcc`: the toolkit found here."""
    house = open_wheelhouse(site.wheelhouse, environ)
    watched = ("MAX_JOBS", *ARCH_VARIABLES, *THREADS_VARIABLES)
    bundled = site.bundle_kernels
    return KernelHost(
        wheelhouse=house.root if isinstance(house, Wheelhouse) else house.shown(),
        entries=house.entries(),
        writable=house.writable(),
        resources=read_resources(),
        python=_python_tag(interpreter) or "cp" + "".join(python_prefer.split(".")[:2]),
        platform=sysconfig.get_platform().replace("-", "_").replace(".", "_"),
        site_archs=site.cuda_arch,
        preset={k: environ[k] for k in watched if environ.get(k)},
        ninja=shutil.which("ninja", path=environ.get("PATH")) is not None,
        record=record,
        order=site.kernel_sources,
        bundled=open_bundled(bundled) if bundled else None,
        nvcc=nvcc,
        configured=bool(site.wheelhouse),
    )


def _python_tag(interpreter: Path | None) -> str | None:
    """The tag of the interpreter a venv will be made from."""
    if interpreter is None:
        return None
    code = "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"
    done = proc.capture([str(interpreter), "-I", "-S", "-c", code], timeout=30)
    return done.stdout.strip() or None if done.returncode == 0 else None
