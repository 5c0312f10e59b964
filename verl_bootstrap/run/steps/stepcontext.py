"""What every step kind shares: the context a step runs with, and running a command in the env."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import StepOutputs

__all__ = ["Executor", "StepContext", "activation_env", "run_cache_first", "run_in_env"]


@dataclass
class StepContext:
    """What a step gets: the plan, its log, earlier outputs, and the protected-package record."""

    plan: Plan
    step: Step
    log_path: Path
    prior: Mapping[str, Mapping[str, Any]]  # each finished step's outputs, as JSON (read them
    # with its kind's StepOutputs.read: a resumed run has them from the env's state file)
    protected: dict[str, dict[str, str]] = field(default_factory=dict)
    on_line: Callable[[str], None] | None = None


Executor = Callable[[StepContext], StepOutputs]


def activation_env(prefix: Path) -> dict[str, str | None]:
    """Variables that make a child see the env first, as an activated shell would."""
    path = f"{prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    is_conda = (prefix / "conda-meta").is_dir()
    return {
        "PATH": path,
        "VIRTUAL_ENV": None if is_conda else str(prefix),
        "CONDA_PREFIX": str(prefix) if is_conda else None,
        "PYTHONNOUSERSITE": "1",  # ~/.local packages must not leak into the env
    }


def run_in_env(
    ctx: StepContext,
    argv: list[str],
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
) -> None:
    """Run one command of the step as the activated env would, its output into the step's log
    (`env`: variables to set, or to unset when None)."""
    child = {**activation_env(ctx.plan.prefix), **(env or {})}
    proc.run(argv, log_path=ctx.log_path, env=child, cwd=cwd, on_line=ctx.on_line)


def run_cache_first(
    ctx: StepContext,
    cached: list[str] | None,
    online: list[str],
    *,
    env: Mapping[str, str | None] | None = None,
) -> None:
    """A locked install from uv's cache alone (`cached`: the same install with --offline), then,
    when that fails (a file the cache lacks, as on a user's first env), `online` as planned.

    Every file of a locked install is pinned by its sha256, so the cache's copy is the locked
    one: the first try only saves the index and URL round trips of uv's revalidation."""
    if cached is None:
        run_in_env(ctx, online, env=env)
        return
    try:
        run_in_env(ctx, cached, env=env)
    except CommandFailed:
        with ctx.log_path.open("a", encoding="utf-8") as log:
            log.write("uv's cache does not hold every locked file: the same install, online\n")
        run_in_env(ctx, online, env=env)
