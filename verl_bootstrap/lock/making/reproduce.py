"""`lock --check`, beyond verl's contract: a lock against its own regenerate line and against its
wheels' own requirements.

- The regenerate line: the lock's stages are resolved again for its own target (Python, platform,
  glibc, cutoff) and profile, keeping its versions where they still fit, as `lock` does; each
  version (or set of artifacts) that comes out otherwise is named.
- The requirements: every pin outside a locked wheel's own requirement is named unless the lock
  records it as forced by an override (locking.forced), and a recorded one its pins no longer
  have is named too.

A lock that takes a distribution from an index not configured here (the cpu lock's find-links
torch) cannot be resolved again here: that is said, not counted as a difference.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.installer.resolve import FIND_LINKS, Target
from verl_bootstrap.lock.format import LockedDist, Lockfile
from verl_bootstrap.lock.making.contract import UNCHECKED, MetadataCheck
from verl_bootstrap.lock.making.forced import forced_lines
from verl_bootstrap.lock.making.resolution import resolve_stages
from verl_bootstrap.lock.making.wheelreqs import judge, lock_wheels
from verl_bootstrap.machine.host.indexes import DEFAULT
from verl_bootstrap.options import RunOptions
from verl_bootstrap.platforms import locked_glibc
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.profile.verlextras import marker_env, stage_pins

__all__ = ["forced_gaps", "regenerate_gaps"]


def _target(lock: Lockfile, offline: bool) -> Target:
    glibc = locked_glibc(lock.cuda.virtual_packages)
    return Target(lock.python, lock.platform, lock.exclude_newer or "", offline, glibc)


def forced_gaps(
    lock: Lockfile, profile: Profile, pyproject: Path, check: MetadataCheck
) -> list[str]:
    """Each pin outside a locked wheel's own requirement the lock does not record as forced."""
    env = marker_env(lock.python, lock.platform)
    specs = [stage_pins(s, pyproject.parent, env) for s in stage_specs(profile, lock.cuda.variant)]
    wheels = lock_wheels(lock, check.settings, offline=check.offline, work=check.work / "wheels")
    target = _target(lock, check.offline)
    judged = judge(lock.stages, wheels, specs, target=target, pyproject=pyproject)
    lines = forced_lines(judged.found, lock.forced)
    if judged.unread:
        lines.append(f"{UNCHECKED}the own requirements of {', '.join(judged.unread)}")
    return lines


def regenerate_gaps(
    lock: Lockfile, profile: Profile, options: RunOptions, check: MetadataCheck
) -> list[str]:
    """Where the lock's regenerate line gives other versions than the lock holds."""
    elsewhere = _unconfigured(lock, check)
    if elsewhere:
        return [f"{UNCHECKED}its regenerate line ({elsewhere})"]
    locked = lock.distributions()
    kept = {n: d.version for n, d in locked.items() if d.source != "editable"}
    try:
        again = resolve_stages(
            profile,
            lock.cuda.variant,
            _target(lock, check.offline),
            check.settings,
            options,
            work=check.work / "regenerate",
            kept=kept,
            notes=[],
        )
    except BootstrapError as exc:
        return [f"{UNCHECKED}its regenerate line (it does not resolve here: {exc.message})"]
    found = {d.name: d for s in again.stages for d in s.distributions}
    return list(_moved(locked, found))


def _unconfigured(lock: Lockfile, check: MetadataCheck) -> str | None:
    """What the lock takes from an index this machine is not given (None: nothing)."""
    reachable = {DEFAULT, *check.settings.named}
    if check.settings.find_links:
        reachable.add(FIND_LINKS)
    away = sorted(
        f"{d.name} from {d.index}"
        for d in lock.distributions().values()
        if d.index is not None and d.index not in reachable
    )
    return f"it takes {', '.join(away)}, not configured here" if away else None


def _moved(locked: Mapping[str, LockedDist], found: Mapping[str, LockedDist]) -> Iterator[str]:
    for name in sorted(set(locked) | set(found)):
        old, new = locked.get(name), found.get(name)
        if old is not None and old.source == "editable":
            continue
        if new is None and old is not None:
            yield f"its regenerate line gives no {name} (it locks {old.version})"
        elif old is None and new is not None:
            yield f"its regenerate line adds {name} {new.version}"
        elif old is not None and new is not None and old.version != new.version:
            yield f"its regenerate line gives {name} {new.version} (it locks {old.version})"
        elif old is not None and new is not None and set(old.hashes) != set(new.hashes):
            yield f"its regenerate line gives other artifacts of {name} {old.version}"
