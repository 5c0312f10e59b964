"""A lock's native libraries judged as they will link (`lock --check --links`): every shared
library of the lock's wheels is read from the wheel itself (`locking/wheellibs`, any host, any
architecture): each CUDA library one needs must be in the lock, and each versioned symbol one
takes from another library of the lock must be defined there (`verify/links`).

The wheels are GBs (a cu130 lock's CUDA libraries alone are several), so what was read is kept in
the tool's cache by the wheel's sha256, which the lock records: a later check asks the indexes
for nothing it has read. `--offline` reads only the cache and names the wheels it could not read.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.resolve import Target
from verl_bootstrap.kernels.record import record_for_profile, wheel_file
from verl_bootstrap.kernels.sources import from_source
from verl_bootstrap.lock.format import LockedDist, Lockfile
from verl_bootstrap.lock.installing.kernels import locked_key
from verl_bootstrap.lock.lookup import lookup_dists, stage_index
from verl_bootstrap.lock.making.wheellibs import Held, WheelCache
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.platforms import MACHINES, locked_glibc
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.verify.links import Gap, Library, link_gaps

__all__ = ["REPLACED", "UNCHECKED", "LinkCheck", "native_link_gaps", "replacing_wheels"]

UNCHECKED = "not checked here: "  # as locking/contract's: said, but not a difference
# a library that does not link, which the default route does not install: said, not a failure
REPLACED = "replaced where the kernel stage takes its source's whole wheel: "


@dataclass(frozen=True)
class LinkCheck:
    """Where the check runs: the indexes, a scratch folder (the downloads, deleted once read),
    the cache of what was read, and whether it is offline (the cache only)."""

    settings: IndexSettings
    work: Path
    cache: Path
    offline: bool = False


def native_link_gaps(
    lock: Lockfile, check: LinkCheck, replaced: Mapping[str, str] | None = None
) -> list[str]:
    """Each CUDA library a library of the lock's wheels needs that the lock lacks, each
    versioned symbol one needs from another that lacks it; and, as `not checked here:`, what
    could not be read. `replaced`: distribution -> the whole wheel a kernel stage takes in its
    place for this lock (`replacing_wheels`): a gap of its libraries is said with that wheel,
    not a failure."""
    cache = WheelCache(check.cache)
    wheels = sorted(
        (d for d in lock.distributions().values() if d.source == "wheel"), key=lambda d: d.name
    )
    unknown = [d for d in wheels if any(cache.get(h) is None for h in d.hashes)]
    try:
        served = _served(lock, unknown, check) if unknown and not check.offline else {}
    except BootstrapError as exc:
        return [f"{UNCHECKED}its native libraries (the wheels were not found: {exc.message})"]
    libraries: list[Library] = []
    unread: list[str] = []
    for dist in wheels:
        for sha256 in dist.hashes:
            held = _held(dist, sha256, served, cache, check)
            if isinstance(held, str):
                unread.append(f"{dist.name} {dist.version} ({held})")
                continue
            owner = f"{dist.name} {dist.version}"
            libraries.extend(Library(member, owner, links) for member, links in held)
    gaps = [_said(g, replaced or {}) for g in link_gaps(libraries, among="the lock")]
    return gaps + [f"{UNCHECKED}the native libraries of {w}" for w in unread]


def _held(
    dist: LockedDist,
    sha256: str,
    served: Mapping[str, list[Artifact]],
    cache: WheelCache,
    check: LinkCheck,
) -> Held | str:
    """The wheel's libraries, from the cache or read now; a string says why they were not."""
    held = cache.get(sha256)
    if held is not None:
        return held
    if check.offline:
        return "offline, and not read by an earlier check"
    artifact = next((a for a in served.get(dist.name, ()) if a.sha256 == sha256), None)
    if artifact is None or artifact.kind != "wheel":
        return f"no index serves its wheel with sha256 {sha256[:12]}…"
    try:
        return cache.read(artifact, check.work / "wheels")
    except (BootstrapError, OSError, zipfile.BadZipFile, zlib.error) as exc:
        return f"could not be read: {getattr(exc, 'message', None) or exc}"


def _served(lock: Lockfile, dists: list[LockedDist], check: LinkCheck) -> dict[str, list[Artifact]]:
    """The files the indexes serve of `dists`, each asked on its stage's index."""
    glibc = locked_glibc(lock.cuda.virtual_packages)
    target = Target(lock.python, lock.platform, lock.exclude_newer or "", check.offline, glibc)
    names = {d.name for d in dists}
    found: dict[str, list[Artifact]] = {}
    for number, stage in enumerate(lock.stages):
        asked = [d for d in stage.distributions if d.name in names and d.source == "wheel"]
        if asked:
            work = check.work / f"lookup-{number}"
            found.update(lookup_dists(asked, stage_index(stage), target, check.settings, work=work))
    return found


def _said(gap: Gap, replaced: Mapping[str, str]) -> str:
    wheel = replaced.get(gap.library.owner.split(" ", 1)[0])
    if wheel is None:
        return gap.line()
    return (
        f"{REPLACED}{gap.line()}; the stage takes {wheel} in its place, and where that wheel is "
        "not served (another platform, the source unreachable) this library is installed and "
        "does not load"
    )


def replacing_wheels(lock: Lockfile, profile: Profile) -> dict[str, str]:
    """Each locked distribution a kernel stage's declared source replaces with a whole wheel it
    lists for this lock's key (verl's TransformerEngine in place of the index's core library) ->
    that wheel, as said."""
    record = record_for_profile(lock.profile)
    key = locked_key(lock, f"linux_{MACHINES.get(lock.platform, lock.platform)}")
    out: dict[str, str] = {}
    for spec in stage_specs(profile, lock.cuda.variant):
        stage = next((s for s in lock.stages if s.id == spec.id), None)
        for source in spec.kernel.sources if spec.kernel and stage else ():
            whole = stage.find(source.distribution) if stage and source.distribution else None
            if whole is None or not source.replaces:
                continue
            listed = from_source(source, (whole.name, whole.version), key, record, [])
            if listed and listed[0].wheel:
                said = f"{source.id}'s {wheel_file(listed[0].wheel)} ({source.trust} trust)"
                out.update({canonicalize_name(n): said for n in source.replaces})
    return out
