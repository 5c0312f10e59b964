"""A lockfile against what verl declares for its backend (`lock --check`).

A profile whose verl-deps stage names verl's extras promises an env that holds everything those
extras declare (read from verl's `pyproject.toml` at the locked ref), except what the profile's
substitutions replace, each with its reason. This check names every distribution the lock lacks
or pins outside verl's range, so a lock cannot drift from verl's own install contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.profile.verlextras import (
    declared_requirements,
    marker_env,
    read_extras,
    substitutions_for,
)

__all__ = ["ExtrasGap", "declared_extras", "extras_gaps"]


@dataclass(frozen=True)
class ExtrasGap:
    """One distribution verl declares that the lockfile lacks or pins otherwise."""

    name: str
    declared: str  # verl's requirement
    origin: str  # e.g. verl[fsdp] > verl[verl-core]
    locked: str | None = None  # the version the lock pins (None: the lock lacks it)

    def line(self) -> str:
        """One line for `lock --check`."""
        if self.locked is None:
            return f"lacks {self.declared} ({self.origin})"
        return f"pins {self.name}=={self.locked}, verl declares {self.declared} ({self.origin})"


def declared_extras(profile: Profile, variant: str) -> tuple[str, ...]:
    """The extras the profile's verl-deps stage names for `variant` (empty: none)."""
    deps = next((s for s in stage_specs(profile, variant) if s.kind == "verl-deps"), None)
    return deps.extras if deps is not None else ()


def extras_gaps(lock: Lockfile, profile: Profile, pyproject: Path) -> list[ExtrasGap]:
    """Every distribution the extras declare that `lock` lacks or pins otherwise, less the
    profile's substitutions for the lock's variant (empty when the profile names no extras)."""
    extras = declared_extras(profile, lock.cuda.variant)
    if not extras:
        return []
    declared = declared_requirements(
        read_extras(pyproject),
        extras,
        marker_env(lock.python, lock.platform),
        where=str(pyproject),
    )
    substituted = substitutions_for(profile.substitutions, lock.cuda.variant)
    locked = {d.name: d.version for s in lock.stages for d in s.distributions}
    gaps: list[ExtrasGap] = []
    for item in declared:
        sub = substituted.get(item.name)
        if sub is None or sub.keeps_requirement():
            name, wanted, origin = item.name, item.requirement, item.origin()
        elif sub.by is None:  # left out, the profile says why
            continue
        else:  # the substitute must be there instead
            name, wanted = canonicalize_name(Requirement(sub.by).name), sub.by
            origin = f"instead of {item.requirement} of {item.origin()}"
        version = locked.get(name)
        if version is None or not _within(Requirement(wanted), version):
            gaps.append(ExtrasGap(name, wanted, origin, version))
    return list(dict.fromkeys(gaps))


def _within(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False
