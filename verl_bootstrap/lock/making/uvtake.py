"""What a uv.lock stack takes for each pin of the slice (locking.uvstack): the lock's own
artifact where this run reaches its source, else the nearest artifact of the configured indexes,
stated as a substitution (an index of verl's the run does not reach: the same release; a git
source it does not reach: the indexes' release nearest the version the lock records)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.lock.making.uvlock import UvLockPin
from verl_bootstrap.lock.making.uvtable import LockTable
from verl_bootstrap.profile.models import Profile, Substitution
from verl_bootstrap.profile.verlextras import read_uv_table

__all__ = ["Reach", "Taken", "release", "take", "verl_indexes"]


@dataclass(frozen=True)
class Reach:
    """What this run reaches of the lock's sources."""

    indexes: Mapping[str, str]  # the profile's named indexes this run reaches: name -> URL
    git: Callable[[str], bool]  # whether a git repository answers
    nearest: Callable[[str, str], str]  # (name, the lock's version) -> the indexes' nearest


@dataclass(frozen=True)
class Taken:
    """What the stack installs for one pin of the slice."""

    line: str  # the requirement
    index: str | None = None  # the profile's index it comes from (None: the configured ones)
    sub: Substitution | None = None  # where it is not the lock's own artifact
    locked: str = ""  # the lock's pin, as said in a substitution


def verl_indexes(pyproject: Path) -> dict[str, str]:
    """verl's named indexes ([[tool.uv.index]]): URL -> name."""
    found = read_uv_table(pyproject).get("index", [])
    out: dict[str, str] = {}
    for entry in found if isinstance(found, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            out[_norm(entry["url"])] = str(entry.get("name", entry["url"]))
    return out


def _norm(url: str) -> str:
    return url.rstrip("/")


def take(
    pin: UvLockPin,
    table: LockTable,
    verl_indexes: Mapping[str, str],
    own: Substitution | None,
    run: tuple[Profile, Reach],
) -> Taken:
    """What the stack installs for `pin` (see the module docstring)."""
    base, reach = run
    if pin.git:
        return _from_git(pin, table, own, reach)
    source = table.source_of(pin.name, pin.version)
    named = verl_indexes.get(_norm(source.url)) if source and source.kind == "registry" else None
    locked = f"{pin.version} from {named or 'the default index'}"
    if named is not None and source is not None:
        index = next(
            (n for n, i in base.indexes.items() if _norm(i.url) == _norm(source.url)), None
        )
        used = index is not None and any(s.index == index for s in base.stages)
        if own is None and used and index in reach.indexes:
            return Taken(f"{pin.name}=={pin.version}", index)
        why = "is unreachable here" if used else "no stage of this profile installs from"
        own = own or Substitution(
            replace=pin.name,
            source="the configured indexes",
            reason=f"verl's uv.lock takes it from its index {named} ({source.url}), which {why}: "
            "the same release from the configured indexes",
        )
    if own is not None:
        return Taken(f"{pin.name}=={release(pin.version)}", None, own, locked)
    return Taken(f"{pin.name}=={pin.version}")


def _from_git(pin: UvLockPin, table: LockTable, own: Substitution | None, reach: Reach) -> Taken:
    source = table.source_of(pin.name)
    repo = source.url if source else pin.url.removeprefix("git+").rsplit("@", 1)[0]
    commit = source.commit if source else pin.url.rsplit("@", 1)[-1]
    version = next((v for v, s in table.sources.get(pin.name, []) if s.kind == "git"), "")
    locked = f"{version} from git {repo} at {commit[:12]}"
    if own is None and reach.git(repo):
        return Taken(f"{pin.name} @ {pin.url}")
    nearest = reach.nearest(pin.name, version)
    why = (
        own.reason
        if own
        else (
            f"verl's uv.lock builds it from git ({repo} at {commit[:12]}), which is unreachable "
            f"here: {nearest} is the configured indexes' release nearest {version}"
        )
    )
    line = f"{pin.name}=={nearest}"
    return Taken(line, None, Substitution(replace=pin.name, by=line, reason=why), locked)


def release(version: str) -> str:
    """The release without a build's local label (`2.11.0+cpu` -> `2.11.0`)."""
    return version.split("+", 1)[0]
