"""A kernel stage of a `--locked` install, at run time: with the env's real key, take the wheel
the plan chose (hash-checked) in place of the locked sdist, or build the sdist and publish its
wheel to the lab wheelhouse; the stage's outputs name the wheel for the env's record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.probe import check_loads, probe_key
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse
from verl_bootstrap.kernels.sources import KernelChoice
from verl_bootstrap.kernels.stage import download_release, house_wheel, kernel_output, publish_built
from verl_bootstrap.locked.kernels import choose_locked, kernel_dist
from verl_bootstrap.lockfile.lookup import Artifact
from verl_bootstrap.lockfile.model import LockedStage
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
    choice = choose_locked(job.kernel, dist, key, entries, house.shown() if house else None)
    job.note(f"kernel {dist.name}: env is {key.describe()}; {choice.reason}")
    taken = _taken(job, choice, house)
    if taken is not None and choice.sha256:
        job.note(f"kernel {dist.name}: no compiler ran (installing {taken})")
        built = build({n: a for n, a in job.artifacts.items() if n != dist.name})
        artifact = Artifact(url=taken.as_uri(), sha256=choice.sha256, kind="wheel")
        url = choice.wheel if choice.source == "release" else None
        out = kernel_output(choice.source, taken, choice.sha256, choice.built_for or key, url)
        return built, {dist.name: artifact}, out
    built = build(job.artifacts)
    made = built.get(dist.name)
    if made is None:  # a locked wheel: installed hash-checked as any other
        return built, {}, {}
    wheel = Path(unquote(urlparse(made.url).path))
    job.note(f"kernel {dist.name}: built {wheel.name} from the locked sdist")
    publish_built(house, wheel, key, dist.name, job.note)
    return built, {}, kernel_output("build", wheel, made.sha256, key)


def _taken(job: LockedKernel, choice: KernelChoice, house: AnyWheelhouse | None) -> Path | None:
    """The prebuilt wheel the choice names, its sha256 checked; None: build the sdist."""
    if choice.source == "wheelhouse" and choice.wheel and house is not None:
        return house_wheel(house, choice, job.work)
    if choice.source == "release" and choice.wheel:
        fetched = download_release(choice.wheel, job.work / "release", job.note)
        return None if fetched is None else _checked(fetched, choice.sha256, "the lockfile names")
    return None


def _checked(wheel: Path, sha256: str | None, whose: str) -> Path:
    if file_sha256(wheel) != sha256:
        raise StepFailed(
            f"{wheel} does not have the sha256 {whose} ({sha256})",
            hint="run `verl-bootstrap wheelhouse check` and replace the file",
        )
    return wheel


def check_locked_loads(job: LockedKernel, output: Mapping[str, Any], *, gpu_present: bool) -> None:
    """The kernel's compiled modules load after the locked stage."""
    key = probe_key(job.python)
    built_for = BuildKey.from_mapping(output["key"]) if output.get("key") else key
    check_loads(
        job.python, job.kernel.modules, built_for, key, gpu_present=gpu_present, note=job.note
    )
