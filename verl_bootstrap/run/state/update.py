"""`update --prefix P`: the env's recorded profile and options re-resolved into a fresh lock, the
version diff against the env's own lockfile, and the fresh lock ready to install with --locked.

The resolution is `lock`'s own (verl_bootstrap.lock.making.create); applying it is a `--locked`
install of the fresh lock onto the same prefix, so the change machinery (shown, confirmed, whole
or resumed) and the record apply unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from verl_bootstrap.errors import BootstrapError, InputError
from verl_bootstrap.lock.diff import VersionChange, python_xy, version_diff
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.create import LockRequest, lock_profile
from verl_bootstrap.lock.making.kernelwheels import record_kernel_wheels
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import atomic_write, env_lockfile, update_lockfile
from verl_bootstrap.run.state.envrecord import read_record
from verl_bootstrap.run.state.hints import resume_command

__all__ = [
    "Update",
    "VersionChange",
    "require_record",
    "resolve_update",
    "stage_update",
    "version_diff",
]


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
        python=python_xy(current.python),
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
