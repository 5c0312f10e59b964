"""A kernel stage at run time: the env's real key, the first matching source, the install of one
wheel, the wheel published when it was built here, and the compiled modules loaded afterwards.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from verl_bootstrap.commands import InstallRequest, install_command, uninstall_command
from verl_bootstrap.errors import CommandFailed, StepFailed
from verl_bootstrap.host.indexes import IndexSettings
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.kernels.build import build_wheel, download_wheel
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.probe import check_loads, probe_key
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse, is_url
from verl_bootstrap.kernels.sources import KernelChoice, candidates, pinned_version
from verl_bootstrap.kernels.toolkit import require_toolkit
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
    record: KernelRecord | None = None  # the sources' recorded wheel lists
    order: tuple[str, ...] | None = None  # the site config's kernel_sources
    stage: str = ""  # the stage's id, for a fallback build's refusal


def run_kernel_stage(job: KernelRun) -> dict[str, Any]:
    """Install the kernel from the first source whose wheel matches the env's real key and can
    be fetched, else build it; the step's outputs."""
    python = job.request.python
    clock = _Phases()
    key = clock.time("key probe", lambda: probe_key(python))
    name = job.kernel.distribution
    version = pinned_version(job.packages, name, key)
    house = job.wheelhouse
    entries = house.entries() if house else ()
    found, why_not = candidates(
        job.kernel,
        version,
        key,
        entries,
        house.shown() if house else None,
        packages=job.packages,
        record=job.record,
        order=job.order,
    )
    taken = _first_loading(job, found, house, key, clock)
    if taken is None and version is None:  # TransformerEngine's compiled part is a dependency
        return _as_the_stage_says(job, key, why_not)
    if taken is None:
        job.note(f"kernel {name}: env is {key.describe()}; source build: {'; '.join(why_not)}")
        require_toolkit(job.stage or name, name, key.cuda, {**os.environ, **job.env})
        built = clock.time("wheel", lambda: _build_and_publish(job, key, house))
        clock.time("install", lambda: _install(job, built, None, key))
        clock.time("load check", lambda: _check_loads(job, python, key, key))
        taken = (built, KernelChoice("build", "built here", built_for=key))
    wheel, choice = taken
    built_for = choice.built_for if choice.source != "build" else key
    url = choice.wheel if choice.wheel and is_url(choice.wheel) else None
    output = kernel_output(choice.source, wheel, file_sha256(wheel), built_for or key, url)
    if choice.origin and choice.source != "wheelhouse":
        output.update(origin=choice.origin, trust=choice.trust)
    if choice.distribution:
        output["distribution"] = choice.distribution
    return {"kernel": {**output, "phase_seconds": clock.seconds}}


def _as_the_stage_says(job: KernelRun, key: BuildKey, why_not: list[str]) -> dict[str, Any]:
    """No prebuilt source: the stage's own install, with a sized build where one is needed."""
    name = job.kernel.distribution
    job.note(
        f"kernel {name}: the stage pins no {name} itself; installing as the stage says "
        f"(a sized source build where one is needed){''.join('; ' + w for w in why_not)}"
    )
    job.run(install_command(job.installer, job.request, job.settings))
    _check_loads(job, job.request.python, None, key)
    return {"kernel": {"source": "stage", "key": key.to_json()}}


def _first_loading(
    job: KernelRun,
    found: list[KernelChoice],
    house: AnyWheelhouse | None,
    key: BuildKey,
    clock: _Phases,
) -> tuple[Path, KernelChoice] | None:
    """The first candidate whose wheel can be had and whose modules load once installed (each
    one's key is the env's: `found` was chosen with it). A source that does not answer passes to
    the next; so does a wheel that does not load (a key its name or source misstates), after it
    is uninstalled."""
    name = job.kernel.distribution
    for choice in found:
        job.note(f"kernel {name}: env is {key.describe()}; {choice.reason}")
        wheel = clock.time("wheel", partial(_prebuilt, job, choice, house, key))
        if wheel is None:
            continue
        job.note(f"kernel {name}: no compiler ran (installing {wheel})")
        clock.time("install", partial(_install, job, wheel, choice.distribution, key))
        failed = clock.time("load check", partial(_load_failure, job, choice.built_for or key, key))
        if failed is None:
            return wheel, choice
        job.note(
            f"kernel {name}: {wheel.name} from {choice.origin or choice.source} fails its load "
            f"check ({failed}); uninstalling it and trying the next source"
        )
        installed = choice.distribution or name
        job.run(uninstall_command(job.installer, job.request.python, (installed,)))
    return None


def _load_failure(job: KernelRun, built_for: BuildKey, key: BuildKey) -> str | None:
    """Why the installed kernel's modules do not load (None: they load)."""
    try:
        _check_loads(job, job.request.python, built_for, key)
    except StepFailed as failed:
        return failed.message
    return None


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
        finally:  # a phase run once per candidate source adds up
            spent = self.seconds.get(name, 0.0) + time.monotonic() - started
            self.seconds[name] = round(spent, 3)


def _prebuilt(
    job: KernelRun, choice: KernelChoice, house: AnyWheelhouse | None, key: BuildKey
) -> Path | None:
    """The candidate's wheel as a local file; None when its source does not have it after all."""
    if choice.source == "wheelhouse" and choice.wheel and house is not None:
        return house_wheel(house, choice, job.work)
    if choice.wheel and is_url(choice.wheel):
        folder = job.work / (choice.origin or choice.source)
        return download_release(choice.wheel, folder, job.note)
    if choice.source == "index":
        return _from_index(job, key)
    return None


def _from_index(job: KernelRun, key: BuildKey) -> Path | None:
    """The prebuilt wheel from the index the profile states a key for; None falls to a build."""
    prebuilt = job.kernel.prebuilt_index
    url = job.settings.named.get(prebuilt.index) if prebuilt else None
    spec = _kernel_spec(job, key)
    if url is None or spec is None:
        job.note(f"kernel {job.kernel.distribution}: its prebuilt index is not reachable")
        return None
    try:
        return download_wheel(
            spec, url, python=job.request.python, dest=job.work / "index", run=job.run
        )
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
    spec = _kernel_spec(job, key) or job.kernel.distribution
    shown = ", ".join(f"{k}={v}" for k, v in sorted(job.env.items()))
    job.note(f"kernel {job.kernel.distribution}: building from source ({shown})")
    wheel = build_wheel(
        spec,
        job.kernel,
        request=job.request,
        settings=job.settings,
        out=job.work / "built",
        env=job.env,
        run=job.run,
        available_gb=job.available_gb,
    )
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


def _kernel_spec(job: KernelRun, key: BuildKey, distribution: str | None = None) -> str | None:
    """The stage's requirement of the kernel's distribution (or `distribution`, the one a
    source's wheel is), pinned to one version."""
    wanted = canonicalize_name(distribution or job.kernel.distribution)
    for spec in job.packages:
        if pinned_version((spec,), wanted, key) is not None:
            return spec
    return None


def _install(job: KernelRun, wheel: Path, distribution: str | None, key: BuildKey) -> None:
    """The wheel in place of the stage's requirement for this env (a line for another machine
    stays: its marker leaves it out)."""
    spec = _kernel_spec(job, key, distribution)
    others = tuple(p for p in job.packages if p != spec)
    request = replace(job.request, packages=(str(wheel), *others))
    job.run(install_command(job.installer, request, job.settings))


def _check_loads(job: KernelRun, python: Path, built_for: BuildKey | None, key: BuildKey) -> None:
    check_loads(
        python,
        job.kernel.modules,
        built_for or key,
        key,
        gpu_present=job.gpu_present,
        note=job.note,
    )


def download_release(url: str, folder: Path, note: Callable[[str], None]) -> Path | None:
    """The release wheel at `url`, or None (said in the log) when it cannot be fetched."""
    filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
    if not filename.endswith(".whl") or filename.startswith("."):
        note(f"release URL {redact(url)} does not name a wheel file")
        return None
    dest = folder / filename
    try:
        download(url, dest, timeout=600)
    except (OSError, HttpError) as exc:
        note(f"prebuilt wheel {redact(url)} not available ({exc}); trying the next source")
        return None
    return dest
