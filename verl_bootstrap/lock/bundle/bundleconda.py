"""The conda part of a bundle: the lock's conda packages, downloaded from their channels (by the
lock's channel names, as the user's --channel or .condarc spells them), checked against the
lock's sha256 (else md5), and carried as a local channel that the node indexes after unpacking.

On the node the packages are checked against the lock once more (the bundle's manifest proves the
bytes are the ones packed; the lock proves they are the ones locked), then the conda backend
solves the locked `name ==version build` specs from that channel alone: no other channel is asked.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import Refused, StepFailed
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.lock.format import CondaPackage
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.redact import redact

__all__ = [
    "CONDA_FOLDER",
    "CondaFile",
    "check_conda_files",
    "collect_conda",
    "conda_arcname",
    "index_channel",
]

CONDA_FOLDER = "conda"  # the bundle's local channel: conda/<subdir>/<filename>


@dataclass(frozen=True)
class CondaFile:
    """One checked conda package in the tool's cache."""

    path: Path
    package: CondaPackage


def conda_arcname(package: CondaPackage) -> str:
    """Where a conda package sits in the bundle (a channel layout: subdir, then file)."""
    return f"{CONDA_FOLDER}/{package.subdir}/{package.filename}"


def collect_conda(
    packages: Iterable[CondaPackage], channels: Mapping[str, str], cache: Path
) -> list[CondaFile]:
    """Each locked conda package in the tool's cache, downloaded if missing, hash-checked."""
    return [_collect_one(p, channels, cache) for p in packages]


def _collect_one(package: CondaPackage, channels: Mapping[str, str], cache: Path) -> CondaFile:
    dest = cache / "conda" / _key(package) / package.filename
    if not dest.is_file():
        url = f"{channels.get(package.channel, package.channel).rstrip('/')}/{package.subdir}/"
        url += package.filename
        try:
            download(url, dest)
        except (HttpError, OSError) as exc:
            reason = exc.reason if isinstance(exc, HttpError) else str(exc)
            raise StepFailed(
                f"could not download conda package {redact(url)}: {reason}",
                hint=f"pass --channel with a reachable mirror of channel {package.channel!r}",
            ) from None
    problem = hash_problem(dest, package)
    if problem:
        dest.unlink()  # the tool's own cache entry: a wrong one must not be used again
        raise Refused(
            f"conda package {package.filename}: {problem}; no bundle was written",
            hint="the channel serves another file under this name; regenerate the "
            "lock with `verl-bootstrap lock`",
        )
    return CondaFile(path=dest, package=package)


def _key(package: CondaPackage) -> str:
    """The cache folder of a package: its locked hash, so a changed file is never taken."""
    if package.sha256:
        return package.sha256
    if package.md5:
        return f"md5-{package.md5}"
    raise Refused(
        f"the lock records no sha256 or md5 for conda package {package.filename}",
        hint="regenerate the lock with `verl-bootstrap lock`",
    )


def hash_problem(path: Path, package: CondaPackage) -> str | None:
    """Why `path` is not the locked package (None: its sha256, else md5, is the lock's)."""
    if package.sha256:
        got = file_sha256(path)
        return None if got == package.sha256 else f"sha256 {got}, the lock says {package.sha256}"
    if package.md5:
        got = _md5(path)
        return None if got == package.md5 else f"md5 {got}, the lock says {package.md5}"
    return "the lock records no sha256 or md5 for it"


def _md5(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "md5").hexdigest()


def check_conda_files(channel: Path, packages: Iterable[CondaPackage], origin: Path) -> None:
    """Every locked conda package is in the unpacked channel with the lock's hash."""
    problems = []
    for package in packages:
        path = channel / package.subdir / package.filename
        problem = "it is missing" if not path.is_file() else hash_problem(path, package)
        if problem:
            problems.append(f"{package.filename}: {problem}")
    if problems:
        raise Refused(
            f"{origin}: its conda packages are not the locked ones: {'; '.join(problems)}; "
            "nothing was installed",
            hint="make the bundle again from the lockfile",
        )


def index_channel(channel: Path) -> None:
    """Write the channel's repodata (a channel always has noarch/, even an empty one)."""
    from rattler.index import index_fs  # noqa: PLC0415 - py-rattler is only needed by conda

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
