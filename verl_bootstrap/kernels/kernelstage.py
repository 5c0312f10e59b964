"""A kernel stage at run time, on either route: the env's real key, the one candidate list
(`kernels/choices`), and the one loop that takes the first candidate whose wheel can be had,
installs and loads (a wheel that does not load is uninstalled and the next one tried); the route
(`ResolvingRoute` here, `lock/installing/kernelrun.LockedRoute` for --locked) says how a candidate's
wheel is fetched and installed, and what its last resort, the stage's own install, does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from verl_bootstrap.errors import CommandFailed, StepFailed
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.installer.cmdline import install_command, uninstall_command
from verl_bootstrap.kernels.build import WheelBuild, build_wheel, download_wheel
from verl_bootstrap.kernels.kernelchoice import LAST, KernelQuery, candidates
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.probe import check_loads, probe_key
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse, is_url
from verl_bootstrap.kernels.sources import KernelChoice, pinned_version
from verl_bootstrap.kernels.toolkit import require_toolkit
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.redact import redact

__all__ = [
    "KernelJob",
    "KernelRoute",
    "Phases",
    "ResolvingRoute",
    "Taken",
    "check_kernel_loads",
    "download_release",
    "first_loading",
    "house_wheel",
    "kernel_output",
    "publish_built",
    "run_kernel_stage",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class KernelJob:
    """What a kernel stage needs from its step, on either route."""

    kernel: KernelSpec
    python: Path  # the env's interpreter
    installer: str  # uv | pip: the uninstall of a wheel that does not load
    run: Callable[[list[str]], None]  # a command in the env
    note: Callable[[str], None]  # a line for the step's log
    wheelhouse: AnyWheelhouse | None
    work: Path  # the env's state folder for this stage (built wheels, downloads)
    gpu_present: bool
    record: KernelRecord | None = None  # the sources' recorded wheel lists
    order: tuple[str, ...] | None = None  # the site config's kernel_sources
    stage: str = ""  # the stage's id, for a fallback build's refusal


@dataclass(frozen=True)
class Taken:
    """A candidate's wheel, as a local file (`sha256`: checked or computed, None: not yet)."""

    choice: KernelChoice
    wheel: Path
    sha256: str | None = None
    shown: str = ""  # where the notes say it came from (its source, or the bundle's record)
    installs_as: str = ""  # the distribution it installs as (uninstalled if it does not load)


class KernelRoute(Protocol):
    """How one route asks for, fetches and installs a kernel stage's candidates."""

    @property
    def job(self) -> KernelJob: ...

    def query(self, key: BuildKey) -> KernelQuery:
        """What the sources are asked for the env's real key."""

    def fetch(self, choice: KernelChoice, key: BuildKey) -> Taken | None:
        """The candidate's wheel; None when its source does not have it after all."""

    def install(self, taken: Taken, key: BuildKey) -> Mapping[str, Any]:
        """The stage installed with the taken wheel; what it built besides (by name)."""


def first_loading(
    route: KernelRoute,
    choices: Sequence[KernelChoice],
    key: BuildKey,
    clock: Phases,
    passed: list[dict[str, Any]],
) -> tuple[Taken, Mapping[str, Any]] | None:
    """The first candidate whose wheel can be had and whose modules load once installed (each
    one's key is the env's: the list was made with it), with what its install built; None: the
    stage's own install is left (the list's last entry). A source that does not answer passes to
    the next; so does a wheel that does not load (a key its name or source misstates), after it
    is uninstalled. `passed` gets each one passed over (its source; cause: unavailable or
    load-failed), as the stage's `passed_over` output names it."""
    job = route.job
    name = job.kernel.distribution
    for choice in choices:
        if choice.source in LAST:
            return None
        job.note(f"kernel {name}: env is {key.describe()}; {choice.reason}")
        taken = clock.time("wheel", partial(route.fetch, choice, key))
        if taken is None:
            passed.append(_passed(choice, "unavailable"))
            continue
        job.note(f"kernel {name}: no compiler ran (installing {taken.wheel})")
        built = clock.time("install", partial(route.install, taken, key))
        failed = clock.time("load check", partial(_load_failure, job, choice.built_for or key, key))
        if failed is None:
            return taken, built
        job.note(
            f"kernel {name}: {taken.wheel.name} from {taken.shown} fails its load check "
            f"({failed}); uninstalling it and trying the next source"
        )
        job.run(uninstall_command(job.installer, job.python, (taken.installs_as or name,)))
        passed.append(_passed(choice, "load-failed"))
    return None


def _passed(choice: KernelChoice, cause: str) -> dict[str, Any]:
    """A candidate passed over when the stage ran, as a plan's `passed_over` names one."""
    return {"sources": [choice.origin or choice.source], "cause": cause}


def _load_failure(job: KernelJob, built_for: BuildKey, key: BuildKey) -> str | None:
    """Why the installed kernel's modules do not load (None: they load)."""
    try:
        check_kernel_loads(job, built_for, key)
    except StepFailed as failed:
        return failed.message
    return None


def check_kernel_loads(job: KernelJob, built_for: BuildKey | None, key: BuildKey) -> None:
    """The kernel's compiled modules load in the env (a StepFailed says why not)."""
    modules = job.kernel.modules
    check_loads(
        job.python, modules, built_for or key, key, gpu_present=job.gpu_present, note=job.note
    )


@dataclass(frozen=True)
class ResolvingRoute:
    """A kernel stage of a resolving install: the stage's requirements, with the kernel's pinned
    one replaced by the wheel taken; its last resort a source build (or the stage's install)."""

    job: KernelJob
    packages: tuple[str, ...]
    build: WheelBuild  # the env's install request, index settings, variables and runner

    def query(self, key: BuildKey) -> KernelQuery:
        house, job = self.job.wheelhouse, self.job
        version = pinned_version(self.packages, job.kernel.distribution, key)
        return KernelQuery(
            job.kernel,
            version,
            key,
            self.packages,
            entries=house.entries() if house else (),
            root=house.shown() if house else None,
            record=job.record,
            order=job.order,
        )

    def fetch(self, choice: KernelChoice, key: BuildKey) -> Taken | None:
        wheel = _prebuilt(self, choice, key)
        if wheel is None:
            return None
        shown = choice.origin or choice.source
        return Taken(choice, wheel, shown=shown, installs_as=choice.distribution or "")

    def install(self, taken: Taken, key: BuildKey) -> Mapping[str, Any]:
        _install(self, taken.wheel, taken.choice.distribution, key)
        return {}


def run_kernel_stage(route: ResolvingRoute) -> dict[str, Any]:
    """Install the kernel from the first source whose wheel matches the env's real key, can be
    fetched and loads, else build it; the stage's `kernel` output (the wheel taken, its source)."""
    job = route.job
    clock = Phases()
    key = clock.time("key probe", lambda: probe_key(job.python))
    listed = candidates(route.query(key))
    passed = [p.to_json() for p in listed.passed]  # those with none, then those tried
    got = first_loading(route, listed.choices, key, clock, passed)
    if got is None and listed.choices[-1].source == "stage":  # TransformerEngine's compiled part
        return {**_as_the_stage_says(route, key, listed.why_not), "passed_over": passed}
    if got is None:
        name = job.kernel.distribution
        job.note(
            f"kernel {name}: env is {key.describe()}; source build: {'; '.join(listed.why_not)}"
        )
        require_toolkit(job.stage or name, name, key.cuda, {**os.environ, **route.build.env})
        built = clock.time("wheel", lambda: _build_and_publish(route, key))
        clock.time("install", lambda: _install(route, built, None, key))
        clock.time("load check", lambda: check_kernel_loads(job, key, key))
        got = (Taken(KernelChoice("build", "built here", built_for=key), built), {})
    output = _resolved_output(got[0], key)
    return {**output, "passed_over": passed, "phase_seconds": clock.seconds}


def _resolved_output(taken: Taken, key: BuildKey) -> dict[str, Any]:
    """The outputs of a resolving kernel stage: the wheel, its source and the key it is for."""
    choice, wheel = taken.choice, taken.wheel
    built_for = choice.built_for if choice.source != "build" else key
    url = choice.wheel if choice.wheel and is_url(choice.wheel) else None
    output = kernel_output(choice.source, wheel, file_sha256(wheel), built_for or key, url)
    if choice.origin and choice.source != "wheelhouse":
        output.update(origin=choice.origin, trust=choice.trust)
    if choice.distribution:
        output["distribution"] = choice.distribution
    return output


def _as_the_stage_says(
    route: ResolvingRoute, key: BuildKey, why_not: Sequence[str]
) -> dict[str, Any]:
    """No prebuilt source: the stage's own install, with a sized build where one is needed."""
    job, how = route.job, route.build
    name = job.kernel.distribution
    job.note(
        f"kernel {name}: the stage pins no {name} itself; installing as the stage says "
        f"(a sized source build where one is needed){''.join('; ' + w for w in why_not)}"
    )
    job.run(install_command(job.installer, how.request, how.settings))
    check_kernel_loads(job, None, key)
    return {"source": "stage", "key": key.to_json()}


def kernel_output(
    source: str, wheel: Path, sha256: str, key: BuildKey, url: str | None = None
) -> dict[str, Any]:
    """A kernel stage's outputs: the env's record names the wheel by these."""
    out = {"source": source, "wheel": wheel.name, "sha256": sha256, "key": key.to_json()}
    return {**out, "url": url} if url else out


class Phases:
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


def _prebuilt(route: ResolvingRoute, choice: KernelChoice, key: BuildKey) -> Path | None:
    """The candidate's wheel as a local file; None when its source does not have it after all."""
    job, house = route.job, route.job.wheelhouse
    if choice.source == "wheelhouse" and choice.wheel and house is not None:
        return house_wheel(house, choice, job.work)
    if choice.wheel and is_url(choice.wheel):
        folder = job.work / (choice.origin or choice.source)
        return download_release(choice.wheel, folder, job.note)
    if choice.source == "index":
        return _from_index(route, key)
    return None


def _from_index(route: ResolvingRoute, key: BuildKey) -> Path | None:
    """The prebuilt wheel from the index the profile states a key for; None falls to a build."""
    job, how = route.job, route.build
    prebuilt = job.kernel.prebuilt_index
    url = how.settings.named.get(prebuilt.index) if prebuilt else None
    spec = _kernel_spec(route, key)
    if url is None or spec is None:
        job.note(f"kernel {job.kernel.distribution}: its prebuilt index is not reachable")
        return None
    try:
        return download_wheel(spec, url, python=job.python, dest=job.work / "index", run=how.run)
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


def _build_and_publish(route: ResolvingRoute, key: BuildKey) -> Path:
    job, how = route.job, route.build
    spec = _kernel_spec(route, key) or job.kernel.distribution
    shown = ", ".join(f"{k}={v}" for k, v in sorted(how.env.items()))
    job.note(f"kernel {job.kernel.distribution}: building from source ({shown})")
    wheel = build_wheel(spec, job.kernel, how, job.work / "built")
    publish_built(job, wheel, key)
    return wheel


def publish_built(job: KernelJob, wheel: Path, key: BuildKey) -> None:
    """Publish a wheel built here, for the next env on any node (a read-only house: said)."""
    house, name = job.wheelhouse, job.kernel.distribution
    if house is None:
        return
    if not house.writable():
        job.note(f"kernel {name}: wheelhouse {house.shown()} is read-only for you; not published")
        return
    entry = house.publish(wheel, key)
    job.note(
        f"kernel {name}: published {entry.file} to {house.shown()} "
        f"(sha256 {entry.sha256[:12]}…, {key.describe()})"
    )


def _kernel_spec(
    route: ResolvingRoute, key: BuildKey, distribution: str | None = None
) -> str | None:
    """The stage's requirement of the kernel's distribution (or `distribution`, the one a
    source's wheel is), pinned to one version."""
    wanted = canonicalize_name(distribution or route.job.kernel.distribution)
    for spec in route.packages:
        if pinned_version((spec,), wanted, key) is not None:
            return spec
    return None


def _install(route: ResolvingRoute, wheel: Path, distribution: str | None, key: BuildKey) -> None:
    """The wheel in place of the stage's requirement for this env (a line for another machine
    stays: its marker leaves it out)."""
    spec = _kernel_spec(route, key, distribution)
    others = tuple(p for p in route.packages if p != spec)
    request = replace(route.build.request, packages=(str(wheel), *others))
    route.job.run(install_command(route.job.installer, request, route.build.settings))


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
