"""`verify --prefix P`: the verification of an existing env, with the checks of its profile."""

from __future__ import annotations

from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.gpu.detect import detect_driver
from verl_bootstrap.lifecycle.record import read_record
from verl_bootstrap.lockfile import read_lockfile
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.profile import VerifySpec, load_profile
from verl_bootstrap.verify.env import VerifyReport, verify_env

__all__ = ["verify_prefix"]


def verify_prefix(prefix: Path, *, profile: str | None, require_gpu: bool) -> VerifyReport:
    """Verify `prefix` with `profile`'s checks, else those of the profile that built it."""
    spec = _spec(prefix, profile)
    gpu_present = detect_driver() is not None
    return verify_env(prefix, spec, require_gpu=require_gpu, gpu_present=gpu_present)


def _spec(prefix: Path, profile: str | None) -> VerifySpec:
    if profile:
        return load_profile(profile).verify
    lock = env_lockfile(prefix)
    if lock.exists():
        # the record keeps a profile file's path; the lockfile only its name
        name = _recorded_profile(prefix) or read_lockfile(lock).profile
        try:
            return load_profile(name).verify
        except InputError as exc:  # the env was built from a profile file that is gone
            raise InputError(
                f"{prefix} was built from profile {name!r}, which cannot be loaded here: "
                f"{exc.message}",
                hint="pass --profile NAME_OR_FILE to say whose checks to run",
            ) from None
    return VerifySpec()


def _recorded_profile(prefix: Path) -> str | None:
    record = read_record(prefix)
    profile = record["options"].get("profile") if record else None
    return profile if isinstance(profile, str) else None
