"""What `cluster install|verify|script` run on the nodes: verl-bootstrap's path there, the install
command's arguments, and the log a cluster run writes here."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import tool_home

__all__ = ["install_args", "run_log", "tool_on_nodes"]


def run_log() -> Path:
    """A new log file for one cluster run, in the tool's logs folder."""
    folder = tool_home() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"cluster-{time.strftime('%Y%m%d-%H%M%S')}.log"


def tool_on_nodes(given: str | None) -> str:
    """verl-bootstrap's path on the nodes: the one given, else this one's (a shared filesystem
    holds it), else the name for the nodes' PATH to find."""
    if given:
        return str(given)
    here = Path(sys.executable).parent / "verl-bootstrap"
    return str(here) if here.exists() else shutil.which("verl-bootstrap") or "verl-bootstrap"


def install_args(
    profile: str | None, prefix: str, lockfile: str | None, config: str | None
) -> list[str]:
    """The `install` arguments each node runs: the profile into the prefix, waiting for the
    node that holds the prefix's lock; --locked when a lockfile is given."""
    if not profile:
        raise InputError("cluster install needs --profile", hint="e.g. --profile fsdp")
    return RunOptions(
        profile=profile,
        prefix=Path(prefix),
        guard_wait=3600.0,
        locked=bool(lockfile),
        lockfile=Path(lockfile) if lockfile else None,
        config=config,
    ).to_argv()
