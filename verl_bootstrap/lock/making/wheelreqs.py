"""A lock's wheels and their own requirements, for the mismatch check (locking.forced): which
overrides hold on the lock's target, which distributions install without their dependencies, and
each locked wheel's Requires-Dist, read where the indexes serve it (installer.wheelmeta).
Used where a lock is made (locking.bounds) and where it is checked (`lock --check`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.installer.resolve import FIND_LINKS, Target
from verl_bootstrap.installer.wheelmeta import WheelFile, served_wheels, wheel_requirements
from verl_bootstrap.lock.format import LockedStage, Lockfile
from verl_bootstrap.lock.lookup import lookup_dists, stage_index
from verl_bootstrap.lock.making.forced import Mismatch, mismatches, overrides_in_force
from verl_bootstrap.machine.host.indexes import DEFAULT, IndexSettings
from verl_bootstrap.paths import cache_folder
from verl_bootstrap.platforms import locked_glibc
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.profile.verlextras import marker_env, read_uv_table

__all__ = ["Judged", "deps_free_names", "judge", "lock_wheels", "stage_roots"]


@dataclass(frozen=True)
class Judged:
    """The mismatches found, and what could not be read here (named, not a difference)."""

    found: list[Mismatch]
    unread: list[str]


def deps_free_names(pyproject: Path, specs: Sequence[StageSpec]) -> set[str]:
    """What installs without its own dependencies: verl's dependency-metadata entries and the
    packages of a no-deps stage (their own requirements are not the env's)."""
    table = read_uv_table(pyproject) if pyproject.is_file() else {}
    entries = table.get("dependency-metadata")
    names: set[str] = {
        canonicalize_name(str(e.get("name", "")))
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
    }
    for spec in specs:
        if spec.no_deps:
            names |= {canonicalize_name(Requirement(p).name) for p in spec.packages}
    return names


def stage_roots(specs: Sequence[StageSpec]) -> list[str]:
    """What the stages ask for themselves (for the extras they ask of a wheel)."""
    return [line for s in specs for line in (*s.verl_lines, *s.packages)]


def judge(
    stages: Sequence[LockedStage],
    wheels: Sequence[WheelFile],
    specs: Sequence[StageSpec],
    *,
    target: Target,
    pyproject: Path,
) -> Judged:
    """The mismatches of `stages` (their wheels' requirements read from `wheels`)."""
    env = marker_env(target.python, target.platform)
    free = deps_free_names(pyproject, specs)
    hashed = {d.name: d for s in stages for d in s.distributions if d.source == "wheel"}
    checked = [w for w in wheels if w.name in hashed and w.name not in free]
    read = wheel_requirements(checked, cache_folder("wheel-metadata"), offline=target.offline)
    requires = {n: lines for n, lines in read.items() if lines is not None}
    locked = {d.name: d.version for s in stages for d in s.distributions}
    overrides = overrides_in_force([o for s in specs for o in s.overrides], env)
    found = mismatches(locked, requires, env, overrides, stage_roots(specs))
    unread = sorted(
        {*(n for n, lines in read.items() if lines is None), *_unserved(hashed, wheels, free)}
    )
    return Judged(found, unread)


def _unserved(
    hashed: Mapping[str, object], wheels: Sequence[WheelFile], free: set[str]
) -> set[str]:
    return set(hashed) - {w.name for w in wheels} - free


def lock_wheels(
    lock: Lockfile, settings: IndexSettings, *, offline: bool, work: Path
) -> list[WheelFile]:
    """One wheel per locked wheel distribution, as the indexes configured here serve it (those
    from an index that is not configured here, or that cannot be asked, are left out)."""
    glibc = locked_glibc(lock.cuda.virtual_packages)
    target = Target(lock.python, lock.platform, lock.exclude_newer or "", offline, glibc)
    reachable = {DEFAULT, *settings.named, *([FIND_LINKS] if settings.find_links else [])}
    found: list[WheelFile] = []
    for number, stage in enumerate(lock.stages):
        dists = [
            d
            for d in stage.distributions
            if d.source == "wheel" and (d.index or DEFAULT) in reachable
        ]
        if not dists:
            continue
        try:
            served = lookup_dists(
                dists, stage_index(stage), target, settings, work=work / f"stage-{number}"
            )
        except BootstrapError:
            continue  # named by the caller as not read here
        files = {
            n: [WheelFile(n, a.url, a.sha256, a.size) for a in arts if a.kind == "wheel"]
            for n, arts in served.items()
        }
        found += served_wheels({d.name: d.hashes for d in dists}, files)
    return found
