"""A kernel's source build: its sdist (or local source) built into a wheel against the env's torch.

The wheel, not an install, is the product: it is published to the lab wheelhouse so the next env
takes it without a compiler. A build the kernel's OOM killer stops says so and names a MAX_JOBS
that fits.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import CommandFailed, StepFailed
from verl_bootstrap.installer.cmdline import InstallRequest, pip_launcher
from verl_bootstrap.kernels.sizing import device_passes, oom_message
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = ["WheelBuild", "build_wheel", "download_wheel"]


@dataclass(frozen=True)
class WheelBuild:
    """How a stage's source build runs: the env's install request and the index settings, the
    sizing variables, the runner of its commands, and the memory free for it (an OOM's advice)."""

    request: InstallRequest
    settings: IndexSettings
    env: Mapping[str, str]
    run: Callable[[list[str]], None]
    available_gb: float


def build_wheel(spec: str, kernel: KernelSpec, how: WheelBuild, out: Path) -> Path:
    """Build `spec` (a requirement or a local source folder) into one wheel under `out`.

    pip runs under the env's interpreter (`pip --python`), so the build sees the env's torch
    (the stage's --no-build-isolation) and pip itself need not be in the env.
    """
    shutil.rmtree(out, ignore_errors=True)  # the tool's own folder: what an unfinished try left
    out.mkdir(parents=True)
    try:
        how.run(_wheel_command(spec, kernel, how.request, how.settings, out))
    except CommandFailed as failed:
        jobs = int(how.env.get("MAX_JOBS", "0") or 0)
        var = kernel.threads_variable
        threads = (how.env.get(var) or os.environ.get(var)) if var else None  # the build sees both
        per_job = kernel.job_ram_gb * device_passes(threads, 0)
        oom = oom_message(failed.returncode, jobs or 1, per_job, how.available_gb)
        if oom is None:
            raise
        raise StepFailed(oom, hint=f"the build's log: {failed.log_path}") from failed
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed(f"building {kernel.distribution} left {len(wheels)} wheels in {out}")
    return wheels[0]


def _wheel_command(
    spec: str, kernel: KernelSpec, request: InstallRequest, settings: IndexSettings, out: Path
) -> list[str]:
    cmd = [*pip_launcher(), "--python", str(request.python), "wheel", "-v", "--no-deps"]
    # pip's own wheel cache is keyed by the sdist, not by the torch a wheel was compiled
    # against: a wheel it kept from another env could be handed back here. The keyed lab
    # wheelhouse is the cache for kernels, so this build always compiles.
    cmd += ["--no-cache-dir", "--no-binary", kernel.distribution, "--wheel-dir", str(out)]
    if request.no_build_isolation:
        cmd.append("--no-build-isolation")
    if settings.index_url:
        cmd += ["--index-url", settings.index_url]
    for url in settings.extra_index_urls:
        cmd += ["--extra-index-url", url]
    for link in settings.find_links:
        cmd += ["--find-links", link]
    named = settings.named.get(request.index) if request.index else None
    if named:
        cmd += ["--extra-index-url", named]
    return [*cmd, spec]


def download_wheel(
    spec: str, index_url: str, *, python: Path, dest: Path, run: Callable[[list[str]], None]
) -> Path:
    """A wheel (never an sdist: nothing is compiled) of `spec` from `index_url`, for the env's
    interpreter and platform (`pip --python`)."""
    shutil.rmtree(dest, ignore_errors=True)
    cmd = [*pip_launcher(), "--python", str(python), "download", "--no-deps", "--only-binary"]
    run([*cmd, ":all:", "--dest", str(dest), "--index-url", index_url, spec])
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed(f"the index gave {len(wheels)} wheels for {spec!r}")
    return wheels[0]
