"""A run's bookkeeping in the env's state: the record before the steps, the outcome after, and the
top-level names the run created (what `remove` may delete later)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.paths import STATE_DIRNAME, guard_file, state_file
from verl_bootstrap.run.state.envindex import register
from verl_bootstrap.run.state.envrecord import record_of
from verl_bootstrap.run.state.guard import guarding
from verl_bootstrap.run.state.state import State

if TYPE_CHECKING:
    from verl_bootstrap.plan.graph import Plan

__all__ = ["PREFIX_ITSELF", "begin_run", "end_run", "record_train", "record_verify", "top_level"]


def top_level(prefix: Path) -> set[str]:
    """The names directly inside `prefix` (none when it does not exist yet)."""
    return {p.name for p in prefix.iterdir()} if prefix.is_dir() else set()


PREFIX_ITSELF = "."  # in `made`: the prefix folder was created by the tool too


def begin_run(plan: Plan, state: State, *, made_prefix: bool) -> None:
    """Record how the env is being made, before any step runs; register the prefix.

    `made_prefix`: the prefix did not exist before this run (the caller looked before the prefix
    lock created its folder).
    """
    state.record = record_of(plan)
    state.last_run = {"started": time.time(), "status": "running"}
    state.made = sorted({*state.made, STATE_DIRNAME, *([PREFIX_ITSELF] if made_prefix else [])})
    state.save()
    register(plan.prefix)


def end_run(
    plan: Plan, state: State, status: str, before: set[str], log_dir: Path | None = None
) -> None:
    """The run's outcome, and the names it created, into the state."""
    state.last_run = {
        **state.last_run,
        "finished": time.time(),
        "status": status,
        "log_dir": None if log_dir is None else str(log_dir),
    }
    state.made = sorted(set(state.made) | (top_level(plan.prefix) - before))
    state.save()


def record_verify(
    prefix: Path, *, ok: bool, failed: list[str], against: Path | None = None
) -> bool:
    """A standalone `verify` of the env at `prefix`, into its state (what `envs list` and `info`
    show); False when it could not be recorded (_update_state)."""
    verified: dict[str, Any] = {"at": time.time(), "ok": ok, "failed": failed[:20]}
    if against is not None:
        verified["against"] = str(against.absolute())

    def keep(state: State) -> None:
        state.verified = verified

    return _update_state(prefix, keep)


def record_train(prefix: Path, level: str, entry: dict[str, Any]) -> bool:
    """A `verify --train` level's result, into the env's state (field `train`, beside `verified`);
    False when it could not be recorded (_update_state)."""

    def keep(state: State) -> None:
        state.train[level] = entry

    return _update_state(prefix, keep)


def _update_state(prefix: Path, change: Callable[[State], None]) -> bool:
    """`change` applied to the env's state and saved; False when it could not be: no env of the
    tool's, or a run holds it now (that run writes the state; this never waits for it)."""
    path = state_file(prefix)
    if not path.is_file():
        return False
    try:
        with guarding(guard_file(prefix)):
            state = State.load(path)
            change(state)
            state.save()
    except BootstrapError:
        return False
    return True
