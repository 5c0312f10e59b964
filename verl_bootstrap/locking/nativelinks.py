"""A lock's native libraries judged as they will link (`lock --check --links`): every shared
library of the lock's platform wheels is read from the wheel itself (`verify/elf`, any host, any
architecture), and each versioned symbol one takes from another library of the lock must be
defined there (`verify/links`).

The wheels are GBs (a cu130 lock's CUDA libraries alone are several), so what was read is kept in
the tool's cache by the wheel's sha256: the first check downloads each native wheel once, through
the tool's one HTTP client, checks its sha256, reads it and deletes it; later checks read the
cache. `--offline` reads only the cache and names the wheels it could not read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from pydantic import BaseModel, ConfigDict, ValidationError

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.host.indexes import IndexSettings
from verl_bootstrap.installer.fetch import fetch_checked
from verl_bootstrap.installer.lookup import Artifact, lookup
from verl_bootstrap.kernels.record import record_for_profile, wheel_file
from verl_bootstrap.kernels.sources import from_source
from verl_bootstrap.lockfile.model import LockedDist, Lockfile
from verl_bootstrap.lockinstall.kernels import locked_key
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.platforms import MACHINES
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.safety import jsontext
from verl_bootstrap.safety.shapes import inside
from verl_bootstrap.verify.elf import MAGIC, ElfError, ElfLinks, read_links
from verl_bootstrap.verify.links import Library, LinkGap, is_library, link_gaps

__all__ = [
    "REPLACED",
    "UNCHECKED",
    "LinkCheck",
    "native_link_gaps",
    "replacing_wheels",
    "wheel_libraries",
]

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
    """Each versioned symbol a library of the lock's wheels needs from another that lacks it;
    and, as `not checked here:`, what could not be read. `replaced`: distribution -> the whole
    wheel a kernel stage takes in its place for this lock (`replacing_wheels`): a gap of its
    libraries is said with that wheel, not a failure."""
    try:
        served = lookup(lock, check.settings, offline=check.offline, work=check.work / "lookup")
    except BootstrapError as exc:
        return [f"{UNCHECKED}its native libraries (the wheels were not found: {exc.message})"]
    libraries: list[Library] = []
    unread: list[str] = []
    for dist, artifact in _native_wheels(lock.distributions().values(), served):
        found = _libraries(dist, artifact, check)
        if isinstance(found, str):
            unread.append(f"{dist.name} {dist.version} ({found})")
        else:
            libraries.extend(found)
    gaps = [_said(g, replaced or {}) for g in link_gaps(libraries)]
    return gaps + [f"{UNCHECKED}the native libraries of {w}" for w in unread]


def _said(gap: LinkGap, replaced: Mapping[str, str]) -> str:
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
    machine = MACHINES.get(lock.platform, lock.platform)
    key = locked_key(lock, f"linux_{machine}")
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


def _native_wheels(
    dists: Iterable[LockedDist], served: Mapping[str, Sequence[Artifact]]
) -> Iterator[tuple[LockedDist, Artifact]]:
    """Each locked wheel built for a platform (a pure-Python wheel holds no library)."""
    for dist in sorted(dists, key=lambda d: d.name):
        if dist.source != "wheel":
            continue
        for artifact in served.get(dist.name, ()):
            if artifact.kind == "wheel" and artifact.sha256 in dist.hashes and _native(artifact):
                yield dist, artifact


def _native(artifact: Artifact) -> bool:
    try:
        _, _, _, tags = parse_wheel_filename(artifact.filename)
    except InvalidWheelFilename:
        return False
    return any(tag.platform != "any" for tag in tags)


def _libraries(dist: LockedDist, artifact: Artifact, check: LinkCheck) -> list[Library] | str:
    """The wheel's libraries, from the cache or read now; a string says why they were not."""
    owner = f"{dist.name} {dist.version}"
    entry = inside(check.cache, f"{artifact.sha256}.json", what="wheel sha256")
    cached = _from_cache(entry, artifact.sha256)
    if cached is None and check.offline:
        return "offline, and not read by an earlier check"
    if cached is None:
        try:
            cached = _read_wheel(artifact, check.work / "wheels")
        except (BootstrapError, OSError, zipfile.BadZipFile) as exc:
            return f"could not be read: {getattr(exc, 'message', None) or exc}"
        kept = _CachedWheel(sha256=artifact.sha256, libraries=cached)
        atomic_write(entry, kept.model_dump_json())
    return [Library(c.member, owner, c.links()) for c in cached]


class _CachedLibrary(BaseModel):
    """One library of a wheel, as the cache keeps its link facts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    member: str
    soname: str | None
    machine: int
    needed: list[str]
    defines: dict[str, list[str]]
    needs: dict[str, dict[str, list[str]]]

    @classmethod
    def of(cls, member: str, links: ElfLinks) -> _CachedLibrary:
        return cls(
            member=member,
            soname=links.soname,
            machine=links.machine,
            needed=list(links.needed),
            defines={v: sorted(s) for v, s in links.defines.items()},
            needs={f: {v: sorted(s) for v, s in vs.items()} for f, vs in links.needs.items()},
        )

    def links(self) -> ElfLinks:
        return ElfLinks(
            self.soname,
            self.machine,
            tuple(self.needed),
            {v: frozenset(s) for v, s in self.defines.items()},
            {f: {v: frozenset(s) for v, s in vs.items()} for f, vs in self.needs.items()},
        )


class _CachedWheel(BaseModel):
    """The cache file of one wheel: its sha256 and what its libraries say."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    sha256: str
    libraries: list[_CachedLibrary]


def _from_cache(entry: Path, sha256: str) -> list[_CachedLibrary] | None:
    """What an earlier check read of the wheel; None when absent or not a cache file of it (read
    again, and written over)."""
    try:
        cached = _CachedWheel.model_validate(jsontext.loads(entry.read_bytes()))
    except (OSError, ValueError, ValidationError):
        return None
    return cached.libraries if cached.sha256 == sha256 else None


def _read_wheel(artifact: Artifact, folder: Path) -> list[_CachedLibrary]:
    """The wheel downloaded (sha256-checked), its libraries read, the file deleted."""
    dest = inside(folder, artifact.filename, what="wheel file name")
    fetch_checked(artifact, dest, artifact.sha256)
    try:
        return [_CachedLibrary.of(member, links) for member, links in wheel_libraries(dest)]
    finally:
        dest.unlink(missing_ok=True)


def wheel_libraries(wheel: Path) -> list[tuple[str, ElfLinks]]:
    """Every ELF shared library inside the wheel file: (its path in the wheel, its links)."""
    out = []
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not is_library(info.filename):
                continue
            links = _member_links(archive, info)
            if links is not None:
                out.append((info.filename, links))
    return out


def _member_links(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> ElfLinks | None:
    with archive.open(info) as stream:
        if stream.read(4) != MAGIC:
            return None
        try:
            return read_links(stream)  # type: ignore[arg-type]
        except ElfError:
            return None
