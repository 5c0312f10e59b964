"""What the summary of a run says about the env: its time, packages, size on disk, and the
lockfile the run wrote or installed (measured once the run is over)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.run.installrun import InstallResult
from verl_bootstrap.run.state.inspect import disk_usage, package_count

__all__ = ["EnvFacts", "env_facts"]


@dataclass(frozen=True)
class EnvFacts:
    """What the summary says about the env after a run."""

    seconds: float  # the whole run, wall clock
    packages: int
    size: int | None  # bytes on disk (None: not measured, the run changed nothing)
    lockfile_written: Path | None  # the env's own lockfile, when record-lock ran this time
    lockfile_used: Path | None  # the lockfile a --locked run installed


def env_facts(result: InstallResult, seconds: float) -> EnvFacts:
    """The totals the summary shows: time, packages, size, the lockfile written or installed."""
    prefix = result.plan.prefix
    wrote = any(o.id == "record-lock" and o.status.value == "done" for o in result.report.outcomes)
    locked = result.plan.locked
    return EnvFacts(
        seconds=seconds,
        packages=package_count(prefix),
        # walking every file takes a while; a run that changed nothing leaves the size as it was
        size=disk_usage(prefix) if _changed(result) else None,
        lockfile_written=env_lockfile(prefix) if wrote else None,
        lockfile_used=locked.path if locked is not None else None,
    )


def _changed(result: InstallResult) -> bool:
    return any(o.status.value != "skipped" for o in result.report.outcomes)
