"""The shared libraries a wheel holds, read once: what each says about its links (`verify/elf`),
kept in the tool's cache by the wheel's sha256, so a wheel of GBs is downloaded (through the
tool's one HTTP client, sha256-checked), read and deleted once, and later checks read the cache.
A pure-Python wheel is kept as holding none, without a download.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from pydantic import BaseModel, ConfigDict, ValidationError

from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.download import fetch_checked
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.safety import jsontext
from verl_bootstrap.safety.shapes import inside
from verl_bootstrap.verify.elf import MAGIC, ElfError, ElfLinks, read_links
from verl_bootstrap.verify.links import is_library

__all__ = ["Held", "WheelCache", "is_native", "wheel_libraries"]

Held = list[tuple[str, ElfLinks]]  # (the library's path in the wheel, its link facts)


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


@dataclass(frozen=True)
class WheelCache:
    """The cache folder of what wheels hold, one file per wheel sha256."""

    folder: Path

    def _entry(self, sha256: str) -> Path:
        # the digest comes from a lockfile: untrusted, so it must stay one file name here
        return inside(self.folder, f"{sha256}.json", what="wheel sha256")

    def get(self, sha256: str) -> Held | None:
        """What an earlier check read of the wheel; None when absent or not a cache file of it
        (read again, and written over)."""
        try:
            data = jsontext.loads(self._entry(sha256).read_bytes())
            cached = _CachedWheel.model_validate(data)
        except (OSError, ValueError, ValidationError):
            return None
        if cached.sha256 != sha256:
            return None
        return [(c.member, c.links()) for c in cached.libraries]

    def read(self, artifact: Artifact, work: Path) -> Held:
        """The wheel's libraries: none for a pure-Python wheel; else downloaded into `work`
        (sha256-checked), read, and deleted. Kept in the cache either way."""
        held: Held = []
        if is_native(artifact.filename):
            dest = inside(work, artifact.filename, what="wheel file name")
            fetch_checked(artifact, dest, artifact.sha256)
            try:
                held = wheel_libraries(dest)
            finally:
                dest.unlink(missing_ok=True)
        libraries = [_CachedLibrary.of(member, links) for member, links in held]
        kept = _CachedWheel(sha256=artifact.sha256, libraries=libraries)
        atomic_write(self._entry(artifact.sha256), kept.model_dump_json())
        return held


def is_native(filename: str) -> bool:
    """A wheel built for a platform (a pure-Python wheel holds no shared library)."""
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return any(tag.platform != "any" for tag in tags)


def wheel_libraries(wheel: Path) -> Held:
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
