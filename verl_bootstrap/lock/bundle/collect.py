"""What goes into a bundle: every locked artifact, the build requirements of the locked sdists,
and verl's locked source, each downloaded once into the tool's cache and checked by sha256.

The artifacts are found as a `--locked` install finds them (the same lookup on the user's
indexes), so a bundle holds exactly the files such an install would fetch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.download import fetch_checked
from verl_bootstrap.installer.resolve import Target, load_toml
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.lookup import hashed_dists, lookup, refuse_unserved, served_artifacts
from verl_bootstrap.lock.making.buildlock import resolve_pylock
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.platforms import locked_glibc

__all__ = [
    "Collected",
    "artifact_cache",
    "collect_locked",
    "download",
    "resolve_build",
    "resolve_download",
]


@dataclass(frozen=True)
class Collected:
    """One checked file in the tool's cache, and the distribution it is."""

    path: Path
    name: str
    sha256: str


def artifact_cache(cache: Path, sha256: str, filename: str) -> Path:
    """Where a bundle's checked download is kept: by sha256, so the next bundle reuses it."""
    return cache / "artifacts" / sha256 / filename


def download(artifacts: Iterable[tuple[str, Artifact]], cache: Path) -> list[Collected]:
    """Each (name, artifact) in the tool's cache, downloaded if missing, checked by sha256."""
    out = []
    for name, artifact in artifacts:
        dest = artifact_cache(cache, artifact.sha256, artifact.filename)
        fetch_checked(artifact, dest, artifact.sha256)
        out.append(Collected(path=dest, name=canonicalize_name(name), sha256=artifact.sha256))
    return out


def collect_locked(
    lock: Lockfile, lockfile: Path, settings: IndexSettings, *, cache: Path, work: Path
) -> list[Collected]:
    """Every artifact whose sha256 the lockfile allows, as the indexes serve it; a mismatch is
    refused as a `--locked` install refuses it."""
    dists = hashed_dists(lock)
    served = lookup(lock, settings, offline=False, work=work / "lookup")
    refuse_unserved(lockfile, dists, served)
    chosen = [(d.name, a) for d in dists for a in served.get(d.name, ()) if a.sha256 in d.hashes]
    return download(chosen, cache)


def resolve_build(
    requirements: Sequence[str], lock: Lockfile, settings: IndexSettings, *, cache: Path, work: Path
) -> list[Collected]:
    """The build requirements (with their dependencies) for the lock's Python and platform, at
    its upload cutoff: what an isolated build of a locked sdist installs."""
    glibc = locked_glibc(lock.cuda.virtual_packages)
    target = Target(lock.python, lock.platform, lock.exclude_newer or "", False, glibc)
    return resolve_download(requirements, target, settings, cache=cache, work=work)


def resolve_download(
    requirements: Sequence[str], target: Target, settings: IndexSettings, *, cache: Path, work: Path
) -> list[Collected]:
    """`requirements` and their dependencies resolved for `target`, downloaded and checked."""
    if not requirements:
        return []
    text = resolve_pylock(requirements, target, settings, work=work)
    served = served_artifacts(load_toml(text))
    return download(((name, a) for name, files in served.items() for a in _wheels(files)), cache)


def _wheels(files: Sequence[Artifact]) -> Sequence[Artifact]:
    """The wheels of a distribution; its sdist only when it has none (nothing to build)."""
    wheels = [a for a in files if a.kind == "wheel"]
    return wheels or files
