"""verl's own `uv.lock`: where its checkout ships one (git refs from verl's uv integration on), the
CUDA 13.0, x86_64, Python 3.12 stack takes its versions exactly.

uv reads the lock itself: `uv export --frozen --no-emit-project --extra ...` turns it into a
PEP 751 file of pinned artifacts with their sha256 (none for verl's wheelhouse files), markers
kept; nothing here parses `uv.lock`. Each stage then resolves under those pins as constraints,
and every artifact the lock records must be one `uv.lock` records where it records any. Where the
profile substitutes a distribution (another requirement: its pin is left out; another source:
the version is kept, without a local label such as `+cu130` the other source's build carries),
the substitution says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import load_toml
from verl_bootstrap.lockfile.model import LockedDist
from verl_bootstrap.profile.models import Profile, Substitution
from verl_bootstrap.profile.verlextras import marker_env

__all__ = ["UvLockPin", "applies_to", "export_uv_lock", "uv_lock_constraints", "uv_lock_gaps"]

UV_LOCK = "uv.lock"


@dataclass(frozen=True)
class UvLockPin:
    """One distribution verl's uv.lock pins for the target."""

    name: str
    version: str
    hashes: tuple[str, ...]  # every artifact's sha256 the lock records (empty: it records none)
    git: bool = False  # from a git source: the version alone is not an index pin


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
    out = work / "pylock.verl-uv-lock.toml"  # uv export names its PEP 751 output so
    argv = [uv_binary(), "export", "--frozen", "--no-emit-project", "--no-header", "--quiet"]
    argv += ["--directory", str(checkout), "--format", "pylock.toml", "-o", str(out)]
    argv += [a for extra in extras for a in ("--extra", extra)]
    try:
        proc.run(argv, log_path=work / "uv-lock-export.log")
    except CommandFailed as exc:
        tail = " ".join(line.strip() for line in exc.tail if line.strip())
        raise InputError(
            f"{checkout / UV_LOCK}: uv cannot export it: {tail}",
            hint="a uv.lock made for another pyproject.toml is refused: run `uv lock --check` "
            "in the checkout",
        ) from None
    env = marker_env(python, platform)
    packages = load_toml(out.read_text(encoding="utf-8")).get("packages", [])
    pins = (_pin(p) for p in packages if _holds(p.get("marker"), env))
    return {pin.name: pin for pin in pins}


def _pin(package: Mapping[str, Any]) -> UvLockPin:
    artifacts = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
    hashes = tuple(sorted(str(a["hashes"]["sha256"]) for a in artifacts if a.get("hashes")))
    return UvLockPin(
        canonicalize_name(str(package["name"])),
        str(package.get("version", "")),
        hashes,
        "vcs" in package,
    )


def _holds(marker: Any, env: Mapping[str, str]) -> bool:
    if not marker:
        return True
    try:
        return Marker(str(marker)).evaluate(dict(env))
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
