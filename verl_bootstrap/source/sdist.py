"""verl's release sdist unpacked as its checkout, marked so a later run knows what it is."""

from __future__ import annotations

import shutil
import tarfile
import zlib
from pathlib import Path

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.source.sourcework import SDIST_MARK, record_unpacked

__all__ = ["unpack_sdist"]


def unpack_sdist(archive: Path, dest: Path, sha256: str) -> None:
    """Unpack a release sdist into `dest`, its top folder stripped, members filtered as data.

    It is unpacked beside `dest` and renamed into place with its mark written, so `dest` never
    exists half-unpacked: a run killed midway leaves only the staging folder, which the next
    run removes and redoes. A damaged (truncated) archive is a step failure naming it.
    """
    staging = dest.with_name(f".{dest.name}.unpacking")
    shutil.rmtree(staging, ignore_errors=True)  # the tool's own, from a run killed midway
    staging.mkdir(parents=True)
    try:
        _extract(archive, staging)
        record_unpacked(staging)  # what is the tool's in it, for `remove` and a re-run
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise StepFailed(
            f"verl's sdist {archive} could not be unpacked ({exc}); nothing was kept",
            hint="the archive is damaged (a cut download?): run the same command again",
        ) from None
    (staging / SDIST_MARK).write_text(f"{archive.name} {sha256}\n")
    staging.rename(dest)


def _extract(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        top = members[0].name.split("/")[0]
        for member in members:
            member.name = member.name.removeprefix(top).lstrip("/")
        kept = [m for m in members if m.name]
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, members=kept, filter="data")
        else:  # Python without PEP 706: the names were checked above
            tar.extractall(into, members=kept)
