"""What an env is, read from its own state: one line for `envs list`, everything for `info`."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.activation import activation_line
from verl_bootstrap.paths import guard_file, state_dir, state_file
from verl_bootstrap.run.state.ownership import check_yours, not_yours
from verl_bootstrap.run.state.state import State

__all__ = ["EnvSummary", "describe", "disk_usage", "env_status", "summarize", "verify_failed_since"]

LOCKFILE_NAME = "verl-bootstrap.lock.yaml"


@dataclass(frozen=True)
class EnvSummary:
    """One env, as `envs list` shows it."""

    prefix: Path
    # ok | verify failed | failed | interrupted | running | killed | missing | not an env |
    # not yours
    status: str
    profile: str | None = None
    verl_ref: str | None = None
    commit: str | None = None  # or the release sdist's sha256 (source_kind says which)
    source_kind: str | None = None  # git | sdist
    variant: str | None = None
    backend: str | None = None
    verified_at: float | None = None
    size: int | None = None
    not_yours: str | None = None  # what in it is another user's, or writable by others


def load_state(prefix: Path) -> State:
    """The env's state; InputError when `prefix` holds no env made by verl-bootstrap, Refused
    when the env is not the user's (run/state/ownership.py)."""
    check_yours(prefix)
    path = state_file(prefix)
    if not path.is_file():
        raise InputError(
            f"{prefix} holds no env made by verl-bootstrap (no {path.name} in {path.parent})",
            hint="`verl-bootstrap envs list` shows the envs it made",
            data={"prefix": str(prefix), "missing": str(path)},  # the env's state file
        )
    return State.load(path)


def env_status(prefix: Path, state: State) -> str:
    """The last run's outcome; a run that says it is running but holds no lock was killed."""
    status = str(state.last_run.get("status") or ("ok" if _verified(state) else "unknown"))
    if status == "running" and not _locked(guard_file(prefix)):
        return "killed"
    if status == "ok" and verify_failed_since(state):
        return "verify failed"
    return status


def verify_failed_since(state: State) -> bool:
    """A standalone `verify` failed after the last run finished (a run since re-checks it)."""
    check, finished = state.verified, state.last_run.get("finished")
    if not check or check.get("ok") is not False:
        return False
    return not isinstance(finished, (int, float)) or float(check.get("at") or 0) >= finished


def summarize(prefix: Path, *, size: bool = True) -> EnvSummary:
    """The summary of the env at `prefix` (a missing or foreign prefix says so, never raises)."""
    if not prefix.is_dir():
        return EnvSummary(prefix, "missing")
    foreign = not_yours(prefix)
    if foreign is not None:  # nothing in it is read: its state could say anything
        return EnvSummary(prefix, "not yours", not_yours=foreign.reason)
    if not (state_file(prefix)).is_file():
        return EnvSummary(prefix, "not an env")
    state = load_state(prefix)
    source = _source(state)
    record = state.record
    return EnvSummary(
        prefix=prefix,
        status=env_status(prefix, state),
        profile=record.get("profile_name"),
        verl_ref=source.get("ref") or record.get("verl_ref"),
        commit=source.get("commit") or source.get("sdist_sha256"),
        source_kind=source.get("kind"),
        variant=record.get("variant"),
        backend=record.get("backend"),
        verified_at=_verified(state),
        size=disk_usage(prefix) if size else None,
    )


def describe(prefix: Path) -> dict[str, Any]:
    """Everything `info` shows: the record, the last run, each step, the lockfile, activation."""
    state = load_state(prefix)
    lockfile = state_dir(prefix) / LOCKFILE_NAME
    return {
        "prefix": str(prefix),
        "status": env_status(prefix, state),
        "record": state.record,
        "source": _source(state),
        "last_run": state.last_run,
        "verified": state.verified,  # the last standalone `verify`, if any
        "steps": {  # in the order they ran
            k: {"status": v.status, "finished": v.finished, "log": v.log}
            for k, v in sorted(state.steps.items(), key=lambda kv: kv[1].started)
        },
        "lockfile": str(lockfile) if lockfile.is_file() else None,
        "activate": activation_line(prefix) if _verified(state) else None,
        "made": sorted(state.made),
    }


def package_count(prefix: Path) -> int:
    """The Python distributions installed in the env (its site-packages' .dist-info folders)."""
    return sum(1 for _ in prefix.glob("lib/python*/site-packages/*.dist-info"))


def disk_usage(prefix: Path) -> int:
    """Bytes on disk under `prefix` (links are not followed)."""
    total = 0
    for root, _dirs, files in os.walk(prefix):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512  # noqa: PTH118
            except OSError:
                continue
    return total


def _source(state: State) -> dict[str, Any]:
    """What fetch-source got (only once it finished: a running one has not checked out yet)."""
    record = state.steps.get("fetch-source")
    if record is None or record.status != "done":
        return {}
    keys = ("kind", "repo", "ref", "commit", "sdist_sha256", "sdist_name")
    return {k: record.outputs.get(k) for k in keys}


def _verified(state: State) -> float | None:
    """When the env was last verified: its verify step, or a later standalone `verify` that
    passed (one that failed since means it is not verified now)."""
    if verify_failed_since(state):
        return None
    record = state.steps.get("verify")
    step = record.finished if record is not None and record.status == "done" else None
    check = state.verified
    at = check.get("at") if check.get("ok") is True else None
    stamps = [t for t in (step, at) if isinstance(t, (int, float))]
    return max(stamps) if stamps else None


def _locked(path: Path) -> bool:
    """Another process holds the prefix lock (a shared probe never disturbs it)."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
