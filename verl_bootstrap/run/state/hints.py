"""The commands the tool suggests about an env."""

from __future__ import annotations

import shlex
from pathlib import Path

from verl_bootstrap.options import options_argv

__all__ = ["doctor_command", "next_step", "resume_command"]


def resume_command(prefix: Path) -> str:
    """Resumes (or re-verifies) the env with the options it recorded: nothing else is needed.
    It also repairs what changed since the env was recorded (run.repair)."""
    return shlex.join(["verl-bootstrap", *options_argv({"prefix": prefix})])


def doctor_command(prefix: Path) -> str:
    """Checks the machine and the env, naming a fix for each problem it finds."""
    return f"verl-bootstrap doctor --prefix {shlex.quote(str(prefix))}"


def next_step(prefix: Path, drift: tuple[str, ...] | None) -> tuple[str, ...]:
    """What to run after a failed check of the env at `prefix`, given what its record check
    found (`drift`, run.repair.record_drift: None when it has no record): a re-run puts back
    what changed; when nothing did, reinstalling would change nothing, and doctor looks wider."""
    if drift:
        shown = "; ".join(drift[:5]) + (f"; and {len(drift) - 5} more" if len(drift) > 5 else "")
        return (f"it differs from its record: {shown}", f"repair it: {resume_command(prefix)}")
    why = "its packages match its record" if drift is not None else "it has no record to repair"
    return (f"{why}: look for the cause with `{doctor_command(prefix)}`",)
