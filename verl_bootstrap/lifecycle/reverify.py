"""`verify --prefix P`: an existing env verified again, with the checks of its profile (the one its
record names, unless --profile says another)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.gpu.detect import detect_driver
from verl_bootstrap.lifecycle.record import read_record
from verl_bootstrap.lifecycle.runlog import record_verify
from verl_bootstrap.lockfile import read_lockfile
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.profile import VerifySpec, load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.verify.env import VerifyReport, verify_env

__all__ = ["verify_prefix"]


def verify_prefix(prefix: Path, *, profile: str | None, require_gpu: bool) -> VerifyReport:
    """Verify `prefix` with `profile`'s checks, else those of the profile that built it (at the
    env's own verl ref); the outcome is recorded in the env's state."""
    spec = _spec(prefix, profile)
    gpu_present = detect_driver() is not None
    report = verify_env(prefix, spec, require_gpu=require_gpu, gpu_present=gpu_present)
    failed = [c.name for c in report.checks if c.status == "fail"]
    record_verify(prefix, ok=report.ok, failed=failed)  # `envs list` and `info` show it
    return report


def _spec(prefix: Path, profile: str | None) -> VerifySpec:
    """The checks of the env's own stack: its profile (or `profile`) at the verl ref it was made
    with, as its record (or, for an env made before records, its lockfile) says."""
    stack = _recorded_stack(prefix)
    if profile:  # the checks of another profile, still at the env's own ref
        return _at_ref(profile, stack.ref, allow_unsupported=True, tests=stack.tests).verify
    if stack.profile is None:
        return VerifySpec()
    try:
        return _at_ref(
            stack.profile, stack.ref, allow_unsupported=stack.allow_unsupported, tests=stack.tests
        ).verify
    except InputError as exc:  # the env was built from a profile file that is gone
        raise InputError(
            f"{prefix} was built from profile {stack.profile!r}, which cannot be loaded here: "
            f"{exc.message}",
            hint="pass --profile NAME_OR_FILE to say whose checks to run",
        ) from None


@dataclass(frozen=True)
class _Stack:
    """What the env says it was made from (None: it does not say)."""

    profile: str | None = None
    ref: str | None = None
    allow_unsupported: bool = False
    tests: bool = False


def _recorded_stack(prefix: Path) -> _Stack:
    """The record keeps a profile file's path and the options; an older env only its lockfile."""
    record = read_record(prefix)
    options = record["options"] if record else {}
    profile, ref = options.get("profile"), record.get("verl_ref") if record else None
    if isinstance(profile, str):
        return _Stack(
            profile,
            ref if isinstance(ref, str) else None,
            options.get("allow_unsupported_ref") is True,
            options.get("with_tests") is True,
        )
    lock = env_lockfile(prefix)
    if not lock.exists():
        return _Stack()
    locked = read_lockfile(lock)
    return _Stack(locked.profile, locked.verl.ref, locked.allow_unsupported_ref)


def _at_ref(name: str, ref: str | None, *, allow_unsupported: bool, tests: bool) -> Profile:
    profile, options = load_profile(name), frozenset({"tests"} if tests else ())
    try:
        return apply_stack(profile, ref, allow_unsupported=allow_unsupported, options=options)
    except InputError:  # a ref no stack names (an update pins verl's commit): the profile's own
        return apply_stack(profile, ref, allow_unsupported=True, options=options)
