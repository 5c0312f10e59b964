"""Which of a lock's pins break a locked wheel's own requirement, and why.

An override (verl's `[tool.uv] override-dependencies`, or a profile stage's) replaces every
requirement on its package, so the resolver never sees the bounds it erases: verl's `numpy>=2.0.0`
erases numba 0.65.0's `numpy<2.5`. A pin outside a locked wheel's own requirement is a mismatch:
- *erased*: an override on the package erased that requirement. Where some release meets both the
  override and the requirement, the lock must take one (`locking.bounds` restores the bound);
  where none does (xgrammar's `transformers<5` against verl's `transformers==5.9.0`), the override
  *forces* it, and the lock records it (`forced:`);
- *broken*: nothing explains it.

Each wheel's requirements are read from its METADATA (installer.wheelmeta); markers are evaluated
for the lock's Python and platform, with the extras something in the lock asks of the wheel.
A distribution installed without its dependencies (verl's dependency-metadata, a no-deps stage)
is not held to its own requirements, and an sdist's are not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap.lock.format import ForcedMismatch
from verl_bootstrap.profile.stagespec import DROPPED_MARKER

__all__ = ["Mismatch", "forced_lines", "mismatches", "overrides_in_force"]


@dataclass(frozen=True)
class Mismatch:
    """A pin outside a locked wheel's own requirement (`override`: the one that erased it)."""

    package: str
    version: str
    requirement: str  # as the wheel states it, marker left out
    required_by: str
    required_by_version: str
    override: str | None

    def record(self) -> ForcedMismatch:
        """The lockfile's record of it, as a mismatch its override forces."""
        assert self.override is not None
        return ForcedMismatch(
            package=self.package,
            requirement=self.requirement,
            required_by=self.required_by,
            required_by_version=self.required_by_version,
            override=self.override,
        )

    def line(self) -> str:
        """One line: what is pinned, who requires what, and what erased it (if anything)."""
        head = (
            f"pins {self.package}=={self.version}, but {self.required_by} "
            f"{self.required_by_version} requires {self.requirement}"
        )
        if self.override is None:
            return f"{head} (no override explains it)"
        return f"{head}: the override {self.override!r} erases that bound"


def overrides_in_force(lines: Iterable[str], env: Mapping[str, str]) -> dict[str, str]:
    """name -> the override that holds on the target (a drop, by a marker no machine has, is
    not a version: it leaves the name out)."""
    out: dict[str, str] = {}
    for line in lines:
        req = _parse(line)
        if req is None or DROPPED_MARKER in line:
            continue
        if req.marker is None or _holds(req.marker, env, ""):
            out[canonicalize_name(req.name)] = line
    return out


def mismatches(
    locked: Mapping[str, str],
    requires: Mapping[str, Sequence[str]],
    env: Mapping[str, str],
    overrides: Mapping[str, str],
    roots: Sequence[str] = (),
) -> list[Mismatch]:
    """Every pin outside a requirement of a wheel in `requires` (name -> its Requires-Dist; the
    deps-free installs and sdists left out by the caller), with the override that erased it.
    `roots`: the lock's own requests, for the extras they ask of its wheels."""
    extras = _asked_extras(locked, requires, env, roots)
    found = []
    for name, lines in sorted(requires.items()):
        for req in _applying(lines, env, extras.get(name, set())):
            wanted = canonicalize_name(req.name)
            have = locked.get(wanted)
            if have is None or req.url or _within(req, have):
                continue
            req.marker = None
            found.append(
                Mismatch(wanted, have, str(req), name, locked[name], overrides.get(wanted))
            )
    return found


def _asked_extras(
    locked: Mapping[str, str],
    requires: Mapping[str, Sequence[str]],
    env: Mapping[str, str],
    roots: Sequence[str],
) -> dict[str, set[str]]:
    """name -> the extras the lock asks of it (its requests and its wheels' requirements)."""
    extras: dict[str, set[str]] = {}
    _add_extras(extras, [r for r in map(_parse, roots) if r is not None], env)
    for _ in range(len(locked) + 1):  # until no new extra is asked for
        before = sum(len(v) for v in extras.values())
        for name, lines in requires.items():
            _add_extras(extras, _applying(lines, env, extras.get(name, set())), env)
        if sum(len(v) for v in extras.values()) == before:
            break
    return extras


def _add_extras(
    extras: dict[str, set[str]], reqs: Iterable[Requirement], env: Mapping[str, str]
) -> None:
    for req in reqs:
        if req.extras and (req.marker is None or _holds(req.marker, env, "")):
            extras.setdefault(canonicalize_name(req.name), set()).update(req.extras)


def _applying(lines: Sequence[str], env: Mapping[str, str], extras: set[str]) -> list[Requirement]:
    """The requirements that hold on the target for the wheel with `extras` asked of it."""
    out = []
    for line in lines:
        req = _parse(line)
        if req is None:
            continue
        if req.marker is None or any(_holds(req.marker, env, e) for e in ("", *sorted(extras))):
            out.append(req)
    return out


def forced_lines(found: Sequence[Mismatch], recorded: Sequence[ForcedMismatch]) -> list[str]:
    """`lock --check`'s differences: each mismatch the lock does not record as forced, and each
    recorded one its pins no longer have."""
    keys = {(f.package, f.required_by) for f in recorded}
    lines = [m.line() + _unrecorded(m) for m in found if (m.package, m.required_by) not in keys]
    have = {(m.package, m.required_by) for m in found if m.override is not None}
    lines += [
        f"records a forced mismatch its pins do not have: {f.line()}"
        for f in recorded
        if (f.package, f.required_by) not in have
    ]
    return lines


def _unrecorded(mismatch: Mismatch) -> str:
    if mismatch.override is None:
        return ""
    return (
        ", and the lock does not record it as forced (`lock` takes a release that meets both, "
        "or records the mismatch where none does)"
    )


def _parse(line: str) -> Requirement | None:
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None


def _holds(marker: Marker, env: Mapping[str, str], extra: str) -> bool:
    try:
        return marker.evaluate({**env, "extra": extra})
    except InvalidMarker:
        return False


def _within(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True  # a version packaging cannot read is not judged here
