"""A kernel's source build: its sdist (or local source) built into a wheel with the env's torch.

The wheel, not an install, is the product: it is published to the lab wheelhouse so the next env
takes it without a compiler. A build the kernel's OOM killer stops says so and names a MAX_JOBS
that fits.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.requirements import Requirement

from installer.errors import CommandFailed, StepFailed
from installer.indexes import IndexSettings
from installer.installers import InstallRequest, build_command
from installer.kernels.sizing import oom_message
from installer.profile.kernel import KernelSpec

__all__ = ["build_wheel"]


def build_wheel(
    spec: str,
    kernel: KernelSpec,
    *,
    request: InstallRequest,
    settings: IndexSettings,
    out: Path,
    env: Mapping[str, str],
    run: Callable[[list[str]], None],
    available_gb: float,
) -> Path:
    """Build `spec` (a requirement or a local source folder) into one wheel under `out`."""
    shutil.rmtree(out, ignore_errors=True)  # the tool's own folder: what an unfinished try left
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="verl-kernel-sdist-") as tmp:
        source = _local_source(spec) or _download_sdist(spec, kernel, settings, Path(tmp), run)
        try:
            run(build_command(request, settings, source, out))
        except CommandFailed as failed:
            jobs = int(env.get("MAX_JOBS", "0") or 0)
            oom = oom_message(failed.returncode, jobs or 1, kernel.job_ram_gb, available_gb)
            if oom is None:
                raise
            raise StepFailed(oom, hint=f"the build's log: {failed.log_path}") from failed
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed(f"building {kernel.distribution} left {len(wheels)} wheels in {out}")
    return wheels[0]


def _local_source(spec: str) -> Path | None:
    path = Path(spec)
    return path if spec.startswith(("/", "./")) and path.exists() else None


def _download_sdist(
    spec: str, kernel: KernelSpec, settings: IndexSettings, dest: Path,
    run: Callable[[list[str]], None],
) -> Path:  # fmt: skip
    from installer.source import pip_launcher  # noqa: PLC0415

    name = Requirement(spec).name
    cmd = [*pip_launcher(), "download", "--no-deps", "--no-binary", name, spec, "--dest", str(dest)]
    if settings.index_url:
        cmd += ["--index-url", settings.index_url]
    for url in settings.extra_index_urls:
        cmd += ["--extra-index-url", url]
    for link in settings.find_links:
        cmd += ["--find-links", link]
    run(cmd)
    found = sorted(dest.iterdir())
    if len(found) != 1:
        raise StepFailed(f"the index gave no single sdist of {kernel.distribution} for {spec!r}")
    return found[0]
