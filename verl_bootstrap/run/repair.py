"""An env's truth, checked on every run: its distributions against its own record.

A finished env's record (`.verl-bootstrap/verl-bootstrap.lock.yaml`, written by record-lock)
lists what each stage installed, and the digest of each installed RECORD. A re-run compares the
env with it the way `verify --against` does (dist-info folders only: no interpreter starts), and
runs again each stage that owns a missing or changed distribution; the runner then re-runs what
depends on it (the record, the verification). A difference no stage of the plan can put back is
said, and the run goes on without claiming it repaired it. The same check, outside a run
(`record_drift`), is what `envs list` and a failed `verify` say of an env, with the command that
repairs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import BootstrapError, StepFailed
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.lock.drift import REPLACED, Difference, compare_env
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.run.state.state import State

__all__ = ["Repair", "env_drift", "record_drift", "take_out_changed"]

RECORD_STEP = "record-lock"
_REPAIRED = ("missing", "other-version", "other-hash")  # an extra distribution is the user's own


@dataclass(frozen=True)
class Repair:
    """What drifted since the env was recorded: the steps that run again to put it back, a line
    per difference they repair, the distributions that changed (taken out first, so that their
    stage installs them again rather than finding them satisfied), and the differences no step
    of this plan can repair."""

    steps: frozenset[str] = frozenset()
    lines: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    cannot: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "steps": sorted(self.steps),
            "repaired": list(self.lines),
            "cannot": list(self.cannot),
        }


def env_drift(plan: Plan, state: State) -> Repair:
    """The env at `plan.prefix` against its record; nothing to say when the record is not this
    plan's (a first, unfinished or changing run records the env anyway)."""
    in_plan = plan.fingerprints()
    if RECORD_STEP not in in_plan or not state.is_done(RECORD_STEP, in_plan[RECORD_STEP]):
        return Repair()
    try:
        lock = read_lockfile(env_lockfile(plan.prefix))
    except BootstrapError as exc:  # gone or edited: the env is recorded again as it is
        line = f"the env's record cannot be read ({exc.message}); it is written again"
        return Repair(frozenset({RECORD_STEP}), (line,))
    return _triage(_drifted(plan.prefix, lock), _owners(lock), frozenset(in_plan))


def record_drift(prefix: Path) -> tuple[str, ...] | None:
    """What differs in the env at `prefix` from its own record, a line each (the check a re-run
    makes; a re-run puts each back); None when the env has no readable record (unfinished, or
    not made by verl-bootstrap)."""
    try:
        lock = read_lockfile(env_lockfile(prefix))
    except BootstrapError:
        return None
    return tuple(_describe(d) for d in _drifted(prefix, lock))


def _drifted(prefix: Path, lock: Lockfile) -> list[Difference]:
    """The env's distributions missing or changed since its record `lock` (dist-info folders
    only: no interpreter starts); one the user added is theirs, not drift."""
    return [d for d in compare_env(prefix, lock, own=True).differences if d.kind in _REPAIRED]


def _triage(drifted: list[Difference], owners: dict[str, str], in_plan: frozenset[str]) -> Repair:
    """Each difference to the stage that installed it, when this plan has that stage."""
    steps, lines, changed, cannot = set(), [], [], []
    for diff in drifted:
        owner = owners.get(diff.name)
        if owner is None or owner not in in_plan:
            cannot.append(f"{_describe(diff)}: cannot be repaired here ({_why(owner)})")
            continue
        steps.add(owner)
        lines.append(f"{_describe(diff)}: stage {owner} runs again")
        if diff.kind != "missing":
            changed.append(diff.name)
    return Repair(frozenset(steps), tuple(lines), tuple(changed), tuple(cannot))


def take_out_changed(plan: Plan, repair: Repair) -> None:
    """Uninstall the distributions that changed since the env was recorded: their stages, run
    again, install the recorded ones (an installer finds a changed one already satisfied)."""
    if not repair.changed:
        return
    argv = [uv_binary(), "pip", "uninstall", "--python", str(env_python(plan.prefix))]
    done = proc.capture([*argv, *repair.changed], timeout=600)
    if done.returncode != 0:
        raise StepFailed(
            f"could not take out the changed distributions {', '.join(repair.changed)}: "
            f"{done.stderr.strip()[-500:]}",
            hint="fix that, then re-run the same command: it repairs the env",
        )


def _owners(lock: Lockfile) -> dict[str, str]:
    """distribution -> the stage that installed it last (a later stage that upgrades one owns
    it)."""
    return {d.name: stage.id for stage in lock.stages for d in stage.distributions}


def _describe(diff: Difference) -> str:
    if diff.kind == "missing":
        return f"{diff.name} {diff.locked} is missing"
    if diff.kind == "other-version":
        return f"{diff.name} is {diff.found}, recorded {diff.locked}"
    if diff.found == REPLACED:
        return f"{diff.name}: {REPLACED}"
    return f"{diff.name} was installed from another file than recorded"


def _why(owner: str | None) -> str:
    if owner is None:
        return "no stage of the env installs it"
    return f"stage {owner} is not in this run's plan"
