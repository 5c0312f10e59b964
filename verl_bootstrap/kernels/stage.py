"""A kernel stage at run time: the env's real key, the first matching source, the install of one
wheel, the wheel published when it was built here, and the compiled modules loaded afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from verl_bootstrap.commands import InstallRequest, install_command
from verl_bootstrap.errors import CommandFailed, StepFailed
from verl_bootstrap.host.indexes import IndexSettings
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.kernels.build import build_wheel, download_wheel
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.probe import check_loads, probe_key
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse
from verl_bootstrap.kernels.sources import KernelChoice, choose_source, pinned_version
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.redact import redact

__all__ = [
    "KernelRun",
    "download_release",
    "house_wheel",
    "kernel_output",
    "publish_built",
    "run_kernel_stage",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class KernelRun:
    """What a kernel stage needs from its step."""

    kernel: KernelSpec
    packages: tuple[str, ...]
    request: InstallRequest
    settings: IndexSettings
    installer: str
    wheelhouse: AnyWheelhouse | None
    work: Path  # the env's state folder for this stage (built wheels, downloads)
    env: Mapping[str, str]
    run: Callable[[list[str]], None]
    note: Callable[[str], None]  # a line for the step's log
    gpu_present: bool
    available_gb: float


def run_kernel_stage(job: KernelRun) -> dict[str, Any]:
    """Install the kernel from its first matching source; the step's outputs."""
    python = job.request.python
    clock = _Phases()
    key = clock.time("key probe", lambda: probe_key(python))
    if _kernel_spec(job) is None:  # e.g. TransformerEngine's compiled part comes as a dependency
        job.note(
            f"kernel {job.kernel.distribution}: the stage pins no {job.kernel.distribution} "
            "itself; installing as the stage says (a sized source build where one is needed)"
        )
        job.run(install_command(job.installer, job.request, job.settings))
        _check_loads(job, python, None, key)
        return {"kernel": {"source": "stage", "key": key.to_json()}}
    version = pinned_version(job.packages, job.kernel.distribution)
    house = job.wheelhouse
    entries = house.entries() if house else ()
    root = house.shown() if house else None
    choice = choose_source(job.kernel, version, key, entries, root)
    job.note(f"kernel {job.kernel.distribution}: env is {key.describe()}; {choice.reason}")
    wheel, source = clock.time("wheel", lambda: _wheel(job, choice, house, key))
    clock.time("install", lambda: _install(job, wheel))
    built_for = choice.built_for if source != "build" else key
    clock.time("load check", lambda: _check_loads(job, python, built_for, key))
    digest = file_sha256(wheel)
    url = choice.wheel if source == "release" else None
    output = kernel_output(source, wheel, digest, choice.built_for or key, url)
    return {"kernel": {**output, "phase_seconds": clock.seconds}}


def kernel_output(
    source: str, wheel: Path, sha256: str, key: BuildKey, url: str | None = None
) -> dict[str, Any]:
    """A kernel stage's outputs: the env's record names the wheel by these."""
    out = {"source": source, "wheel": wheel.name, "sha256": sha256, "key": key.to_json()}
    return {**out, "url": url} if url else out


class _Phases:
    """Seconds per phase of the stage (in its outputs, so `make bench` can show where time goes:
    the load check imports torch, a fixed cost whichever source the wheel came from)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def time(self, name: str, work: Callable[[], _T]) -> _T:
        started = time.monotonic()
        try:
            return work()
        finally:
            self.seconds[name] = round(time.monotonic() - started, 3)


def _wheel(
    job: KernelRun, choice: KernelChoice, house: AnyWheelhouse | None, key: BuildKey
) -> tuple[Path, str]:
    """The wheel to install and the source it came from (a failed download falls to a build)."""
    name = job.kernel.distribution
    if choice.source == "wheelhouse" and choice.wheel and house is not None:
        wheel = house_wheel(house, choice, job.work)
        job.note(f"kernel {name}: no compiler ran (installing {wheel})")
        return wheel, "wheelhouse"
    if choice.source == "release" and choice.wheel:
        fetched = download_release(choice.wheel, job.work / "release", job.note)
        if fetched is not None:
            job.note(f"kernel {name}: no compiler ran (installing {fetched})")
            return fetched, "release"
    if choice.source == "index":
        fetched = _from_index(job)
        if fetched is not None:
            job.note(f"kernel {name}: no compiler ran (installing {fetched})")
            return fetched, "index"
    return _build_and_publish(job, key, house), "build"


def _from_index(job: KernelRun) -> Path | None:
    """The prebuilt wheel from the index the profile states a key for; None falls to a build."""
    prebuilt = job.kernel.prebuilt_index
    url = job.settings.named.get(prebuilt.index) if prebuilt else None
    spec = _kernel_spec(job)
    if url is None or spec is None:
        job.note(f"kernel {job.kernel.distribution}: its prebuilt index is not reachable")
        return None
    try:
        return download_wheel(spec, url, python=job.request.python, dest=job.work / "index",
                              run=job.run)  # fmt: skip
    except (CommandFailed, StepFailed) as failed:
        job.note(f"kernel {job.kernel.distribution}: no wheel from the index ({failed})")
        return None


def house_wheel(house: AnyWheelhouse, choice: KernelChoice, work: Path) -> Path:
    """The wheel the choice names, as a local file whose sha256 is the one the index lists."""
    wheel = house.local_wheel(str(choice.wheel).rsplit("/", 1)[-1], work / "wheelhouse")
    if file_sha256(wheel) != choice.sha256:
        raise StepFailed(
            f"{wheel.name} from {house.shown()} does not have the sha256 the wheelhouse lists",
            hint="run `verl-bootstrap wheelhouse check` and replace the file",
        )
    return wheel


def _build_and_publish(job: KernelRun, key: BuildKey, house: AnyWheelhouse | None) -> Path:
    spec = _kernel_spec(job) or job.kernel.distribution
    shown = ", ".join(f"{k}={v}" for k, v in sorted(job.env.items()))
    job.note(f"kernel {job.kernel.distribution}: building from source ({shown})")
    wheel = build_wheel(
        spec, job.kernel, request=job.request, settings=job.settings, out=job.work / "built",
        env=job.env, run=job.run, available_gb=job.available_gb,
    )  # fmt: skip
    publish_built(house, wheel, key, job.kernel.distribution, job.note)
    return wheel


def publish_built(
    house: AnyWheelhouse | None, wheel: Path, key: BuildKey, name: str, note: Callable[[str], None]
) -> None:
    """Publish a wheel built here, for the next env on any node (a read-only house: said)."""
    if house is None:
        return
    if not house.writable():
        note(f"kernel {name}: wheelhouse {house.shown()} is read-only for you; not published")
        return
    entry = house.publish(wheel, key)
    note(
        f"kernel {name}: published {entry.file} to {house.shown()} "
        f"(sha256 {entry.sha256[:12]}…, {key.describe()})"
    )


def _kernel_spec(job: KernelRun) -> str | None:
    """The stage's requirement of the kernel's distribution, pinned to one version."""
    wanted = canonicalize_name(job.kernel.distribution)
    for spec in job.packages:
        if pinned_version((spec,), wanted) is not None:
            return spec
    return None


def _install(job: KernelRun, wheel: Path) -> None:
    spec = _kernel_spec(job)
    others = tuple(p for p in job.packages if p != spec)
    request = replace(job.request, packages=(str(wheel), *others))
    job.run(install_command(job.installer, request, job.settings))


def _check_loads(job: KernelRun, python: Path, built_for: BuildKey | None, key: BuildKey) -> None:
    check_loads(python, job.kernel.modules, built_for or key, key, gpu_present=job.gpu_present,
                note=job.note)  # fmt: skip


def download_release(url: str, folder: Path, note: Callable[[str], None]) -> Path | None:
    """The release wheel at `url`, or None (said in the log) when it cannot be fetched."""
    filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
    if not filename.endswith(".whl") or filename.startswith("."):
        note(f"release URL {redact(url)} does not name a wheel file; building from source")
        return None
    dest = folder / filename
    try:
        download(url, dest, timeout=600)
    except (OSError, HttpError) as exc:
        note(f"release wheel {redact(url)} not available ({exc}); building from source")
        return None
    return dest
