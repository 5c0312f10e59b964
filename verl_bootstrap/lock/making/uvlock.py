"""verl's own `uv.lock`: where its checkout ships one (git refs from verl's uv integration on), the
CUDA 13.0, x86_64, Python 3.12 stack takes its versions exactly.

uv reads the lock itself: `uv export --frozen --no-emit-project --extra ... --format
requirements.txt` turns it into pinned requirements with the sha256 of each artifact it records,
markers kept; nothing here parses `uv.lock`. That export reads only the file: it needs no network
(the PEP 751 export downloads every file uv.lock records without a hash, such as verl's wheelhouse
wheels, to hash it, and fails where that index is unreachable). A pin uv.lock records no sha256
for is a named gap: its artifacts are not compared. Each stage then resolves under those pins as
constraints, and every artifact the lock records must be one `uv.lock` records where it records
any. Where the profile substitutes a distribution (another requirement: its pin is left out;
another source: the version is kept, without a local label such as `+cu130` the other source's
build carries), the substitution says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lock.format import LockedDist
from verl_bootstrap.profile.models import Profile, Substitution
from verl_bootstrap.profile.verlextras import marker_env

__all__ = [
    "UvLockPin",
    "applies_to",
    "export_uv_lock",
    "unhashed",
    "uv_lock_constraints",
    "uv_lock_gaps",
]

UV_LOCK = "uv.lock"


@dataclass(frozen=True)
class UvLockPin:
    """One distribution verl's uv.lock pins for the target."""

    name: str
    version: str
    hashes: tuple[str, ...]  # every artifact's sha256 the lock records (empty: it records none)
    git: bool = False  # from a git source: the version alone is not an index pin
    url: str = ""  # a git source's `git+URL@commit`, as uv exports it


@dataclass(frozen=True)
class _Exported(UvLockPin):
    marker: Marker | None = None  # where uv.lock holds it (evaluated for the target)


def applies_to(profile: Profile, variant: str, python: str, platform: str) -> bool:
    """The stack verl's uv.lock is made for: CUDA 13.0, x86_64 Linux, Python 3.12."""
    cuda = profile.cuda_variants.get(variant)
    return bool(cuda and cuda.cuda == "13.0" and python == "3.12" and platform == "linux-64")


def export_uv_lock(
    checkout: Path, extras: Sequence[str], python: str, platform: str, work: Path
) -> dict[str, UvLockPin] | None:
    """What `uv export` gives of the checkout's uv.lock for `extras` on the target (None: the
    checkout has no uv.lock)."""
    if not (checkout / UV_LOCK).is_file():
        return None
    out = work / "verl-uv-lock.txt"
    argv = [uv_binary(), "export", "--frozen", "--no-emit-project", "--no-header", "--quiet"]
    argv += ["--directory", str(checkout), "--format", "requirements.txt", "-o", str(out)]
    argv += [a for extra in extras for a in ("--extra", extra)]
    try:
        proc.run(argv, log_path=work / "uv-lock-export.log")
    except CommandFailed as exc:
        tail = " ".join(line.strip() for line in exc.tail if line.strip())
        raise InputError(
            f"{checkout / UV_LOCK}: uv cannot export it: {tail}",
            hint=_export_hint(tail, extras),
        ) from None
    env = marker_env(python, platform)
    pins = (_pin(req, hashes) for req, hashes in _exported(out.read_text(encoding="utf-8")))
    return {pin.name: pin for pin in pins if pin.marker is None or _holds(pin.marker, env)}


def unhashed(pins: Mapping[str, UvLockPin]) -> list[str]:
    """The gap: each index pin uv.lock records no sha256 for (`name version`), whose artifacts
    are therefore not compared with the lock's."""
    return sorted(f"{p.name} {p.version}" for p in pins.values() if not p.hashes and not p.git)


def _export_hint(said: str, extras: Sequence[str]) -> str:
    """What to do, from uv's own words (the export reads only uv.lock and pyproject.toml)."""
    if "extra" in said.lower():
        return (
            f"this ref's uv.lock does not lock the extras the profile's deps stage asks for "
            f"({', '.join(extras)}): lock another ref, or name extras it locks"
        )
    return "uv's words above say what it could not read in the checkout's uv.lock"


def _exported(text: str) -> list[tuple[Requirement, tuple[str, ...]]]:
    """(requirement, sha256s) of each line of uv's requirements export."""
    logical = re.sub(r"\\\n\s*", " ", text)
    out = []
    for raw in logical.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        spec, *hashes = re.split(r"\s+--hash=", line)
        out.append((_requirement(spec), tuple(sorted(h.removeprefix("sha256:") for h in hashes))))
    return out


def _requirement(spec: str) -> Requirement:
    try:
        return Requirement(spec)
    except InvalidRequirement as exc:
        raise InputError(f"uv export gave a line that does not parse: {spec!r}: {exc}") from None


def _pin(req: Requirement, hashes: tuple[str, ...]) -> _Exported:
    exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
    git = bool(req.url and req.url.startswith("git+"))
    return _Exported(
        canonicalize_name(req.name),
        exact[0] if exact else "",
        hashes,
        git,
        (req.url or "") if git else "",
        req.marker,
    )


def _holds(marker: Marker, env: Mapping[str, str]) -> bool:
    try:
        return marker.evaluate(dict(env))
    except InvalidMarker:
        raise InputError(f"uv export gave a marker that does not parse: {marker!r}") from None


def uv_lock_constraints(
    pins: Mapping[str, UvLockPin], substitutions: Iterable[Substitution]
) -> list[str]:
    """The pins as constraints: each stage resolves to uv.lock's versions."""
    subs: dict[str, Substitution] = {canonicalize_name(s.replace): s for s in substitutions}
    out = []
    for name, pin in sorted(pins.items()):
        wanted = _wanted_version(pin, subs.get(name))
        if wanted is not None:
            out.append(f"{name}=={wanted}")
    return out


def _wanted_version(pin: UvLockPin, sub: Substitution | None) -> str | None:
    """The version a lock must have of `pin` (None: none, the profile installs another)."""
    if pin.git or not pin.version or (sub is not None and not sub.keeps_requirement()):
        return None
    if sub is not None:  # another source: the same release, without the other build's label
        return pin.version.split("+", 1)[0]
    return pin.version


def uv_lock_gaps(
    locked: Mapping[str, LockedDist],
    pins: Mapping[str, UvLockPin],
    substitutions: Iterable[Substitution],
) -> list[str]:
    """Where the lock's distributions are not uv.lock's: another version, or (where uv.lock
    records hashes for a distribution from the same source) other artifacts."""
    subs: dict[str, Substitution] = {canonicalize_name(s.replace): s for s in substitutions}
    gaps = []
    for name, pin in sorted(pins.items()):
        dist = locked.get(name)
        wanted = _wanted_version(pin, subs.get(name))
        if dist is None or wanted is None:
            continue
        if not _same(dist.version, wanted):
            gaps.append(f"pins {name}=={dist.version}, verl's uv.lock has {pin.version}")
        elif pin.hashes and name not in subs and not set(pin.hashes) & set(dist.hashes):
            gaps.append(f"locks {name} {dist.version} as other artifacts than verl's uv.lock")
    return gaps


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b
