"""`verify --prefix P`: an existing env verified again, with the checks of its profile (the one its
record names, unless --profile says another); `verify --against LOCKFILE`: the env compared with
a lockfile (by default the one it was installed from)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.drift import EnvComparison, compare_env
from verl_bootstrap.lock.io import read_lockfile, recorded_forced
from verl_bootstrap.machine.gpu.detect import gpu_present
from verl_bootstrap.paths import env_lockfile, logs_dir
from verl_bootstrap.profile import VerifySpec, load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.run.state.envrecord import read_record
from verl_bootstrap.run.state.envstack import env_uv_lock_stack
from verl_bootstrap.run.state.runlog import record_train, record_verify
from verl_bootstrap.verify.env import VerifyReport, verify_env
from verl_bootstrap.verify.train import TrainReport, record_entry, train_step
from verl_bootstrap.verify.trainscratch import fresh_log, train_folder

__all__ = ["train_prefix", "verify_against", "verify_prefix"]


def verify_prefix(prefix: Path, *, profile: str | None, require_gpu: bool) -> VerifyReport:
    """Verify `prefix` with `profile`'s checks, else those of the profile that built it (at the
    env's own verl ref); the outcome is recorded in the env's state."""
    spec = _spec(prefix, profile)
    report = verify_env(
        prefix,
        spec,
        require_gpu=require_gpu,
        gpu_present=gpu_present(),
        forced=recorded_forced(prefix),
    )
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
            stack.profile,
            stack.ref,
            allow_unsupported=stack.allow_unsupported,
            tests=stack.tests,
            prefix=prefix,
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


def _at_ref(
    name: str, ref: str | None, *, allow_unsupported: bool, tests: bool, prefix: Path | None = None
) -> Profile:
    profile, options = load_profile(name), frozenset({"tests"} if tests else ())
    try:
        return apply_stack(profile, ref, allow_unsupported=allow_unsupported, options=options)
    except InputError:  # a ref no stack names (an update pins verl's commit): the profile's own
        own = apply_stack(profile, ref, allow_unsupported=True, options=options)
    if prefix is None or ref is None or allow_unsupported:
        return own
    return env_uv_lock_stack(profile, ref, prefix, options) or own


def verify_against(prefix: Path, given: Path | None) -> tuple[Path, EnvComparison]:
    """`verify --against`: the env at `prefix` compared with the lockfile `given` (None: the one
    it was installed from), the outcome recorded as a verify's; returns the lockfile compared
    with and every difference."""
    if not (prefix / "bin" / "python").exists():
        raise InputError(f"{prefix} is not an env (it has no bin/python)")
    against = _against(prefix, given)
    compared = compare_env(prefix, read_lockfile(against))
    failed = [f"{d.kind} {d.name}" for d in compared.differences]
    record_verify(  # `envs list` and `info` show it, as a plain verify's
        prefix, ok=not failed, failed=failed, against=against
    )
    return against, compared


def _against(prefix: Path, given: Path | None) -> Path:
    """The lockfile to compare with: the one given, else the one the env was installed from."""
    if given is not None:
        return given
    record = read_record(prefix) or {}
    lock = record.get("lockfile")
    if not isinstance(lock, dict) or not lock.get("path"):
        raise InputError(
            f"{prefix} was not installed from a lockfile ({record.get('route') or 'no record'})",
            hint="pass --against LOCKFILE to compare it with one",
        )
    return Path(str(lock["path"]))


def train_prefix(prefix: Path, level: str, *, scratch: Path | None = None) -> TrainReport:
    """`verify --train LEVEL`: one real training step in the env at `prefix` (its inputs,
    checkpoints and log in `scratch`, else the env's own), this run's log alone, its checks
    recorded in the env."""
    work = train_folder(prefix, scratch)  # private: its checkpoint is unpickled on resume
    log = (work if scratch else logs_dir(prefix)) / f"train-{level}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    trained = train_step(prefix, level, log_path=fresh_log(log), scratch=work)
    record_train(prefix, trained.level, record_entry(trained))
    return trained
