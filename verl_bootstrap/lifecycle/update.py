"""`update --prefix P`: the env's recorded profile and options re-resolved into a fresh lock, the
version diff against the env's own lockfile, and the fresh lock ready to install with --locked.

The resolution is `lock`'s own (verl_bootstrap.lockfile.create); applying it is a `--locked`
install of the fresh lock onto the same prefix, so the change machinery (shown, confirmed, whole
or resumed) and the record apply unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from verl_bootstrap.errors import BootstrapError, InputError
from verl_bootstrap.kernels.lockwheels import record_kernel_wheels
from verl_bootstrap.lifecycle.hints import resume_command
from verl_bootstrap.lifecycle.record import read_record
from verl_bootstrap.lockfile.create import LockRequest, lock_profile
from verl_bootstrap.lockfile.io import read_lockfile
from verl_bootstrap.lockfile.model import Lockfile
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import atomic_write, env_lockfile, update_lockfile

__all__ = [
    "Update",
    "VersionChange",
    "require_record",
    "resolve_update",
    "stage_update",
    "version_diff",
]


@dataclass(frozen=True)
class VersionChange:
    """One package whose pin differs: old None means added, new None means removed."""

    name: str
    old: str | None
    new: str | None

    def line(self) -> str:
        """`name: old → new`, `name: added new` or `name: removed (was old)`."""
        if self.old is None:
            return f"{self.name}: added {self.new}"
        if self.new is None:
            return f"{self.name}: removed (was {self.old})"
        return f"{self.name}: {self.old} → {self.new}"


@dataclass(frozen=True)
class Update:
    """The env's lock, the fresh one (its text, not yet in the env), and what differs."""

    prefix: Path
    current: Lockfile
    fresh: Lockfile
    fresh_text: str
    changes: tuple[VersionChange, ...]


def resolve_update(options: RunOptions, work: Path) -> Update:
    """Re-resolve the env at `options.prefix` as it was recorded (same profile, variant, Python,
    platform, backend and sources), against today's index; `work` is a scratch folder."""
    prefix = options.prefix
    require_record(prefix)
    current = _env_lock(prefix)
    request = LockRequest(
        options=replace(
            options, locked=False, frozen=False, lockfile=None, cuda=current.cuda.variant
        ),
        platform=current.platform,
        python=_xy(current.python),
        glibc=current.cuda.virtual_packages.get("__glibc"),
        output=work / "update.lock.yaml",
        upgrade=True,
    )
    (work / "resolve").mkdir(parents=True, exist_ok=True)
    result = lock_profile(
        request, work=work / "resolve", after=record_kernel_wheels(request.options)
    )
    text = result.path.read_text(encoding="utf-8")
    changes = version_diff(current, result.lock)
    return Update(prefix, current, result.lock, text, changes)


def require_record(prefix: Path) -> None:
    """An InputError unless `prefix` holds an env with a record of how it was made."""
    if read_record(prefix) is None:
        raise InputError(
            f"{prefix} holds no record of how it was made, so it cannot be re-resolved",
            hint="build it with verl-bootstrap first (or pass --profile to make a new env)",
        )


def stage_update(update: Update) -> Path:
    """The fresh lock written into the env's state folder, named by its content: the record of
    the --locked install that applies it points there, so a resume finds it."""
    digest = hashlib.sha256(update.fresh_text.encode()).hexdigest()[:16]
    path = update_lockfile(update.prefix, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, update.fresh_text)
    return path


def version_diff(old: Lockfile, new: Lockfile) -> tuple[VersionChange, ...]:
    """Each pin that differs between two locks, by name: distributions, conda packages, Python
    and verl's source (its ref and commit or sdist)."""
    before, after = _pins(old), _pins(new)
    return tuple(
        VersionChange(name, before.get(name), after.get(name))
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    )


def _pins(lock: Lockfile) -> dict[str, str]:
    # verl is installed from its source: the env's lock lists it as a distribution, `lock` not
    pins = {n: d.version for n, d in lock.distributions().items() if n != "verl"}
    pins.update({f"conda:{p.name}": f"{p.version}={p.build}" for p in lock.conda})
    pinned = lock.verl.commit or lock.verl.sdist_sha256 or "?"
    pins["verl"] = f"{lock.verl.ref} ({lock.verl.kind} {pinned[:12]})"
    pins["python"] = _xy(lock.python)  # the env's lock says 3.11.7, `lock` says 3.11
    return pins


def _xy(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _env_lock(prefix: Path) -> Lockfile:
    path = env_lockfile(prefix)
    if not path.is_file():
        raise InputError(
            f"{prefix} has no lockfile yet ({path}): its install has not finished",
            hint=f"finish it first: {resume_command(prefix)}",
        )
    try:
        return read_lockfile(path)
    except BootstrapError as exc:
        raise InputError(
            f"the env's lockfile cannot be read: {exc.message}",
            hint=f"re-record it: {resume_command(prefix)} --force record-lock",
        ) from None
