"""A kernel stage of a `--locked` install, at run time: the one kernel flow (`kernels/stage`)
with the lockfile's route. A candidate's wheel stands in for the locked sdist (hash-checked; a
declared source's wheel the lockfile does not pin: key-checked, its sha256 computed and
recorded), the stage's other locked sdists are built, and the stage is installed from its hashed
requirements; the last resort builds the locked sdist and publishes its wheel to the lab
wheelhouse. The stage's outputs name the wheel for the env's record.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.kernels.host import Bundled
from verl_bootstrap.kernels.kernelchoice import KernelQuery, LockPins, candidates
from verl_bootstrap.kernels.kernelstage import (
    KernelJob,
    Phases,
    Taken,
    check_kernel_loads,
    download_release,
    first_loading,
    house_wheel,
    kernel_output,
    publish_built,
)
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.probe import probe_key
from verl_bootstrap.kernels.sources import KernelChoice
from verl_bootstrap.kernels.toolkit import require_toolkit
from verl_bootstrap.lock.format import KernelWheel, LockedDist, LockedStage
from verl_bootstrap.paths import file_sha256

__all__ = ["Build", "Install", "LockedRoute", "Wheels", "run_locked_kernel"]

Wheels = dict[str, Artifact]
# builds the locked sdists among the artifacts it is given (the stage's other sdists as before)
Build = Callable[[Mapping[str, Artifact]], Wheels]
# writes the stage's hashed requirements with these wheels (leaving out what a whole wheel
# holds) and installs the stage from them
Install = Callable[[Wheels, tuple[str, ...]], None]


@dataclass(frozen=True)
class LockedRoute:
    """A locked kernel stage: the lockfile's stage, the precheck's files, and how the stage's
    sdists are built and its requirements installed."""

    job: KernelJob
    stage: LockedStage
    dist: LockedDist | None  # the kernel's locked distribution (None: the stage locks none)
    artifacts: Mapping[str, Artifact]  # the precheck's files, by name
    build: Build
    install_stage: Install
    online: bool = True  # False (--offline, a bundle): no declared source is asked
    bundled: Bundled | None = None  # the kernel wheels of the bundle installed from

    def locked(self) -> LockedDist:
        """The kernel's locked distribution (asked only where the stage locks one)."""
        assert self.dist is not None
        return self.dist

    def query(self, key: BuildKey) -> KernelQuery:
        house, job, dist = self.job.wheelhouse, self.job, self.locked()
        return KernelQuery(
            job.kernel,
            dist.version,
            key,
            entries=house.entries() if house else (),
            root=house.shown() if house else None,
            record=job.record,
            order=job.order,
            lock=LockPins(dist, self.stage, self.bundled, self.online),
        )

    def fetch(self, choice: KernelChoice, key: BuildKey) -> Taken | None:
        target = _stands_for(self.stage, choice, self.locked())
        got = _taken(self, choice, target, key)
        if got is None:
            return None
        wheel, sha256 = got
        recorded = self.locked().kernel_wheel if choice.source == "bundle" else None
        shown = (recorded.origin or recorded.source) if recorded else None
        installs_as = choice.distribution or ""
        return Taken(choice, wheel, sha256, shown or choice.origin or choice.source, installs_as)

    def install(self, taken: Taken, key: BuildKey) -> Mapping[str, Any]:
        choice = taken.choice
        dist = self.locked()
        target = _stands_for(self.stage, choice, dist)
        left_out = {dist.name, target.name, *choice.replaces}
        built = self.build({n: a for n, a in self.artifacts.items() if n not in left_out})
        artifact = Artifact(url=taken.wheel.as_uri(), sha256=str(taken.sha256), kind="wheel")
        held = choice.replaces if target is not dist else ()
        self.install_stage({**built, target.name: artifact}, held)
        return built


def run_locked_kernel(route: LockedRoute) -> tuple[Wheels, dict[str, Any]]:
    """The stage installed with the first candidate that loads, else from its locked sdist
    built here (or its locked wheel); (the wheels built here by name, the stage's `kernel`
    output)."""
    clock = Phases()
    key = clock.time("key probe", lambda: probe_key(route.job.python))
    got = None
    passed: list[dict[str, Any]] = []  # the candidates passed over, as the output names them
    if route.dist is not None:
        listed = candidates(route.query(key))
        choices = listed.choices
        passed.extend(p.to_json() for p in listed.passed)
        got = first_loading(route, choices, key, clock, passed)
        if got is None:  # the last resort: the locked sdist built, or the locked wheel
            route.job.note(
                f"kernel {route.dist.name}: env is {key.describe()}; {choices[-1].reason}"
            )
    if got is not None:
        taken, built = got
        return dict(built), {**_taken_output(route, taken, key), "passed_over": passed}
    _toolkit_for_build(route, key)
    built = route.build(route.artifacts)
    output = _built_output(route, built, key)
    route.install_stage(built, ())
    made_for = BuildKey.from_mapping(output["key"]) if output.get("key") else key
    check_kernel_loads(route.job, made_for, key)
    return built, {**output, "passed_over": passed} if output else output


def _taken_output(route: LockedRoute, taken: Taken, key: BuildKey) -> dict[str, Any]:
    """The outputs of a candidate's wheel, as the env's record names it."""
    choice, dist = taken.choice, route.locked()
    url = choice.wheel if choice.source in {"release", "index"} else None
    out = kernel_output(choice.source, taken.wheel, str(taken.sha256), choice.built_for or key, url)
    if choice.origin and choice.source != "wheelhouse":
        out.update(origin=choice.origin, trust=choice.trust)
    if choice.source == "bundle" and dist.kernel_wheel is not None:
        out.update(_recorded_source(dist.kernel_wheel))
    if choice.unpinned:  # the lockfile pins the sdist only: this sha256 is the env's record
        out["unpinned"] = True
    target = _stands_for(route.stage, choice, dist)
    if target is not dist:  # a whole wheel: the parts it holds are not installed
        out.update(distribution=target.name, replaces=list(choice.replaces))
    return out


def _built_output(route: LockedRoute, built: Wheels, key: BuildKey) -> dict[str, Any]:
    """The outputs of the locked sdist built here, once published (none: a locked wheel)."""
    name = route.dist.name if route.dist else None
    made = built.get(name) if name else None
    if name is None or made is None:  # a locked wheel: installed hash-checked as any other
        return {}
    wheel = Path(unquote(urlparse(made.url).path))
    route.job.note(f"kernel {name}: built {wheel.name} from the locked sdist")
    publish_built(route.job, wheel, key)
    return kernel_output("build", wheel, made.sha256, key)


def _toolkit_for_build(route: LockedRoute, key: BuildKey) -> None:
    """Before the kernel's locked sdist is built: refused early where no nvcc can build it."""
    name = route.dist.name if route.dist else None
    artifact = route.artifacts.get(name) if name else None
    if name is not None and artifact is not None and artifact.kind == "sdist":
        require_toolkit(route.stage.id, name, key.cuda, os.environ)


def _stands_for(stage: LockedStage, choice: KernelChoice, dist: LockedDist) -> LockedDist:
    """The locked distribution the chosen wheel installs as: the kernel's own, or the one a
    source's whole wheel is (TransformerEngine for its torch extension)."""
    whole = stage.find(choice.distribution) if choice.distribution else None
    return whole or dist


def _taken(
    route: LockedRoute, choice: KernelChoice, dist: LockedDist, key: BuildKey
) -> tuple[Path, str] | None:
    """The prebuilt wheel the choice names and its sha256 (checked against the lockfile or the
    wheelhouse where they name one); None: the next choice, or a build of the sdist."""
    job, house = route.job, route.job.wheelhouse
    if choice.source == "wheelhouse" and choice.wheel and house is not None and choice.sha256:
        return house_wheel(house, choice, job.work), choice.sha256
    if choice.source == "bundle" and choice.wheel and choice.sha256:  # checked when unpacked too
        again = "install from the bundle again: it is checked while it is unpacked"
        return _checked(Path(choice.wheel), choice.sha256, "the lockfile records", again), (
            choice.sha256
        )
    if not choice.wheel or choice.source not in {"release", "index"}:
        return None
    if choice.unpinned:
        return _unpinned(job, choice, dist, key)
    fetched = download_release(choice.wheel, job.work / "release", job.note)
    if fetched is None or choice.sha256 is None:
        return None
    return _checked(fetched, choice.sha256, "the lockfile names"), choice.sha256


def _unpinned(
    job: KernelJob, choice: KernelChoice, dist: LockedDist, key: BuildKey
) -> tuple[Path, str] | None:
    """A declared source's wheel the lockfile does not pin: fetched, its key (from its name and
    the source's stated key) checked against the env's real one, its distribution and version
    against the locked ones; its sha256 is computed here, for the env's record."""
    assert choice.wheel is not None
    stated = choice.built_for
    if stated is None or stated.mismatches(key):
        said = stated.describe() if stated else "no stated key"
        job.note(f"kernel {dist.name}: {choice.wheel} is built for {said}, not this env")
        return None
    fetched = download_release(choice.wheel, job.work / (choice.origin or choice.source), job.note)
    if fetched is None:
        return None
    problem = _not_the_locked(fetched.name, dist)
    if problem:
        job.note(f"kernel {dist.name}: {fetched.name} {problem}; not taken")
        return None
    sha256 = file_sha256(fetched)
    job.note(
        f"kernel {dist.name}: {fetched.name} from {choice.origin} has sha256 {sha256} (the "
        "lockfile pins the sdist only: recorded in the env's lock)"
    )
    return fetched, sha256


def _not_the_locked(filename: str, dist: LockedDist) -> str | None:
    """Why the wheel file is not of the locked distribution and version (None: it is)."""
    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return "is not a wheel file name"
    if canonicalize_name(name) != canonicalize_name(dist.name):
        return f"is a wheel of {name}, not {dist.name}"
    if version.public != Version(dist.version).public:
        return f"is version {version}, the lockfile pins {dist.version}"
    return None


def _recorded_source(wheel: KernelWheel) -> dict[str, Any]:
    """Where a wheel taken from a bundle comes from, as the lockfile records it: the env's record
    names the same bytes' source, not the bundle's copy."""
    found = {"source": wheel.source, "url": wheel.url, "origin": wheel.origin, "trust": wheel.trust}
    return {k: v for k, v in found.items() if v is not None}


def _checked(
    wheel: Path,
    sha256: str | None,
    whose: str,
    hint: str = "run `verl-bootstrap wheelhouse check` and replace the file",
) -> Path:
    if file_sha256(wheel) != sha256:
        raise StepFailed(f"{wheel} does not have the sha256 {whose} ({sha256})", hint=hint)
    return wheel
