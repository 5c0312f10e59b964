"""A kernel stage of a `--locked` install, at run time: with the env's real key, take the wheel
the plan chose in place of the locked sdist (hash-checked; a declared source's wheel the lockfile
does not pin: key-checked, its sha256 computed and recorded), or build the sdist and publish its
wheel to the lab wheelhouse; the stage's outputs name the wheel for the env's record.
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
from verl_bootstrap.kernels.host import Bundled
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.probe import check_loads, probe_key
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse
from verl_bootstrap.kernels.sources import KernelChoice
from verl_bootstrap.kernels.stage import download_release, house_wheel, kernel_output, publish_built
from verl_bootstrap.kernels.toolkit import require_toolkit
from verl_bootstrap.locked.kernels import kernel_dist, locked_choices
from verl_bootstrap.lockfile.lookup import Artifact
from verl_bootstrap.lockfile.model import KernelWheel, LockedDist, LockedStage
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = ["LockedKernel", "check_locked_loads", "locked_kernel_wheels"]

Build = Callable[[Mapping[str, Artifact]], dict[str, Artifact]]


@dataclass(frozen=True)
class LockedKernel:
    """What a locked kernel stage needs from its step."""

    kernel: KernelSpec
    stage: LockedStage
    artifacts: Mapping[str, Artifact]  # the precheck's files, by name
    python: Path
    wheelhouse: AnyWheelhouse | None
    work: Path  # the env's state folder for this stage
    note: Callable[[str], None]
    record: KernelRecord | None = None  # the declared sources' recorded wheel lists
    order: tuple[str, ...] | None = None  # the site config's kernel_sources
    online: bool = True  # False (--offline, a bundle): no declared source is asked
    bundled: Bundled | None = None  # the kernel wheels of the bundle installed from
    passed: frozenset[str] = frozenset()  # file names of wheels that failed their load check


Wheels = dict[str, Artifact]


def locked_kernel_wheels(job: LockedKernel, build: Build) -> tuple[Wheels, Wheels, dict[str, Any]]:
    """(wheels built here, the prebuilt wheel taken: each by name, replacing a locked sdist;
    the stage's `kernel` output).

    `build` builds the locked sdists among the artifacts it is given (the stage's other sdists
    are built as before).
    """
    dist = kernel_dist(job.stage, job.kernel)
    if dist is None:
        return build(job.artifacts), {}, {}
    key = probe_key(job.python)
    house = job.wheelhouse
    entries = house.entries() if house else ()
    choices = locked_choices(
        job.kernel,
        dist,
        key,
        entries,
        house.shown() if house else None,
        record=job.record,
        order=job.order,
        online=job.online,
        stage=job.stage,
        bundle=job.bundled,
    )
    for choice in choices:
        if _file_of(choice) in job.passed:  # installed once already, and it did not load
            continue
        job.note(f"kernel {dist.name}: env is {key.describe()}; {choice.reason}")
        target = _stands_for(job.stage, choice, dist)
        got = _taken(job, choice, house, target, key)
        if got is None:
            continue
        taken, sha256 = got
        job.note(f"kernel {dist.name}: no compiler ran (installing {taken})")
        left_out = {dist.name, target.name, *choice.replaces}
        built = build({n: a for n, a in job.artifacts.items() if n not in left_out})
        artifact = Artifact(url=taken.as_uri(), sha256=sha256, kind="wheel")
        url = choice.wheel if choice.source in {"release", "index"} else None
        out = kernel_output(choice.source, taken, sha256, choice.built_for or key, url)
        if choice.origin and choice.source != "wheelhouse":
            out.update(origin=choice.origin, trust=choice.trust)
        if choice.source == "bundle" and dist.kernel_wheel is not None:
            out.update(_recorded_source(dist.kernel_wheel))
        if choice.unpinned:  # the lockfile pins the sdist only: this sha256 is the env's record
            out["unpinned"] = True
        if target is not dist:  # a whole wheel: the parts it holds are not installed
            out.update(distribution=target.name, replaces=list(choice.replaces))
        return built, {target.name: artifact}, out
    _toolkit_for_build(job, dist.name, key)
    built = build(job.artifacts)
    made = built.get(dist.name)
    if made is None:  # a locked wheel: installed hash-checked as any other
        return built, {}, {}
    wheel = Path(unquote(urlparse(made.url).path))
    job.note(f"kernel {dist.name}: built {wheel.name} from the locked sdist")
    publish_built(house, wheel, key, dist.name, job.note)
    return built, {}, kernel_output("build", wheel, made.sha256, key)


def _file_of(choice: KernelChoice) -> str | None:
    """The file name of the wheel a choice names (None: it names none, a build)."""
    return unquote(urlparse(choice.wheel).path).rsplit("/", 1)[-1] if choice.wheel else None


def _toolkit_for_build(job: LockedKernel, name: str, key: BuildKey) -> None:
    """Before the kernel's locked sdist is built: refused early where no nvcc can build it."""
    artifact = job.artifacts.get(name)
    if artifact is not None and artifact.kind == "sdist":
        require_toolkit(job.stage.id, name, key.cuda, os.environ)


def _stands_for(stage: LockedStage, choice: KernelChoice, dist: LockedDist) -> LockedDist:
    """The locked distribution the chosen wheel installs as: the kernel's own, or the one a
    source's whole wheel is (TransformerEngine for its torch extension)."""
    whole = stage.find(choice.distribution) if choice.distribution else None
    return whole or dist


def _taken(
    job: LockedKernel,
    choice: KernelChoice,
    house: AnyWheelhouse | None,
    dist: LockedDist,
    key: BuildKey,
) -> tuple[Path, str] | None:
    """The prebuilt wheel the choice names and its sha256 (checked against the lockfile or the
    wheelhouse where they name one); None: the next choice, or a build of the sdist."""
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
    job: LockedKernel, choice: KernelChoice, dist: LockedDist, key: BuildKey
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


def check_locked_loads(job: LockedKernel, output: Mapping[str, Any], *, gpu_present: bool) -> None:
    """The kernel's compiled modules load after the locked stage."""
    key = probe_key(job.python)
    built_for = BuildKey.from_mapping(output["key"]) if output.get("key") else key
    check_loads(
        job.python, job.kernel.modules, built_for, key, gpu_present=gpu_present, note=job.note
    )
