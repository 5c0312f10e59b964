"""A lock made with the network records, for each kernel stage, the prebuilt wheel its declared
sources serve for the lock's key (the URL, the source and its trust, and the sha256 of the file
downloaded now), so that a `--locked` install and a bundle take that exact file. Never the lab
wheelhouse: a committed lockfile must not depend on one lab's wheelhouse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.kernels.coverage import stack_keys
from verl_bootstrap.kernels.kernelchoice import KernelQuery, candidates
from verl_bootstrap.kernels.record import KernelRecord, record_for_profile, wheel_file
from verl_bootstrap.kernels.sources import KernelChoice, held_parts, pinned_version
from verl_bootstrap.lock.format import KernelWheel, LockedDist, LockedKey, LockedStage, Lockfile
from verl_bootstrap.lock.making.create import AfterLock
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.platforms import MACHINES
from verl_bootstrap.profile.models import Profile

__all__ = ["lock_kernel_wheels", "record_kernel_wheels", "wheel_platform"]

Fetch = Callable[[str, Path], None]


def record_kernel_wheels(options: RunOptions) -> AfterLock:
    """The step `lock` runs after resolving: each kernel stage's prebuilt wheel recorded (with
    the network; offline, a note that none is)."""

    def after(lock: Lockfile, profile: Profile, work: Path, notes: list[str]) -> Lockfile:
        if not any(stage.kernel for stage in profile.stages):
            return lock
        if options.offline:
            notes.append(
                "offline: no prebuilt kernel wheel is recorded (a --locked install builds)"
            )
            return lock
        stages, said = lock_kernel_wheels(
            lock,
            profile,
            record=record_for_profile(options.profile),
            order=options.site.kernel_sources,
            work=work / "kernel-wheels",
        )
        notes.extend(said)
        return lock.model_copy(update={"stages": stages})

    return after


def wheel_platform(platform: str) -> str:
    """The wheel platform tag of a lock platform: linux-64 -> linux_x86_64."""
    machine = MACHINES.get(platform, platform.split("-", 1)[-1])
    return f"linux_{machine}"


def lock_kernel_wheels(
    lock: Lockfile,
    profile: Profile,
    *,
    record: KernelRecord | None,
    order: tuple[str, ...] | None,
    work: Path,
    fetch: Fetch | None = None,
) -> tuple[tuple[LockedStage, ...], list[str]]:
    """The lock's stages with each kernel's prebuilt wheel recorded, for the lock's variant,
    platform and Python; a note per kernel stage."""
    get = fetch or (lambda url, dest: download(url, dest, timeout=600))
    notes: list[str] = []
    stages = lock.stages
    by_stage = {s.id: s for s in stages}
    keys = stack_keys(profile, lock.cuda.variant, wheel_platform(lock.platform), lock.python)
    for stage_id, packages, kernel, key in keys:
        stage = by_stage.get(stage_id)
        locked = stage.find(kernel.distribution) if stage else None
        version = pinned_version(packages, kernel.distribution, key) or (
            locked.version if locked else None
        )
        if stage is None or version is None:
            continue
        query = KernelQuery(kernel, version, key, packages, record=record, order=order)
        listed = candidates(query)
        taken = _first(listed.choices, work / stage_id, get, notes)
        if taken is None:
            why_not = "; ".join(listed.why_not)
            notes.append(f"{stage_id}: no prebuilt wheel is recorded: {why_not}")
            continue
        wheel = _record(*taken)
        if taken[0].distribution:  # a whole wheel: what of the stage it holds
            names = [d.name for d in stage.distributions]
            held = held_parts(kernel, taken[0].replaces, names)
            wheel = wheel.model_copy(
                update={"distribution": taken[0].distribution, "replaces": held}
            )
        by_stage[stage_id] = _with_wheel(stage, kernel.distribution, wheel)
        notes.append(
            f"{stage_id}: {wheel.file} from {wheel.origin} (trust: {wheel.trust}), "
            f"sha256 {wheel.sha256[:12]}…"
        )
    return tuple(by_stage[s.id] for s in stages), notes


def _first(
    found: Sequence[KernelChoice], folder: Path, get: Fetch, notes: list[str]
) -> tuple[KernelChoice, Path] | None:
    """The first candidate whose file downloads (the kernel's own wheel, or a source's whole
    wheel of another distribution the stage locks)."""
    for choice in found:
        if not choice.wheel or choice.built_for is None:
            continue
        dest = folder / (choice.origin or choice.source) / wheel_file(choice.wheel)
        try:
            get(choice.wheel, dest)
        except (OSError, HttpError, BootstrapError) as exc:
            notes.append(f"{choice.origin}: {choice.wheel} not available ({exc})")
            continue
        return choice, dest
    return None


def _record(choice: KernelChoice, path: Path) -> KernelWheel:
    assert choice.built_for is not None and choice.wheel is not None
    return KernelWheel(
        file=path.name,
        sha256=file_sha256(path),
        source="index" if choice.source == "index" else "release",
        key=LockedKey.model_validate(choice.built_for.to_json()),
        url=choice.wheel,
        origin=choice.origin,
        trust=choice.trust,
    )


def _with_wheel(stage: LockedStage, distribution: str, wheel: KernelWheel) -> LockedStage:
    dists = tuple(
        replace_dist(d, wheel)
        if canonicalize_name(d.name) == canonicalize_name(distribution)
        else d
        for d in stage.distributions
    )
    return stage.model_copy(update={"distributions": dists})


def replace_dist(dist: LockedDist, wheel: KernelWheel) -> LockedDist:
    """The locked distribution with its prebuilt kernel wheel."""
    return dist.model_copy(update={"kernel_wheel": wheel})
