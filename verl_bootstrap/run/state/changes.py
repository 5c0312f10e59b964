"""What a run would change in an env with a record: shown first, then applied whole or not at all.

The options are compared with the record (verl ref, backend and variant as they resolved, so a
default that moved shows too), the profile by its hash, and the steps by their fingerprints.
A change that needs another env (backend, Python) cannot be applied in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.installer.envs.venv import python_version
from verl_bootstrap.paths import state_file
from verl_bootstrap.run.state.envrecord import plan_options, recorded_options
from verl_bootstrap.run.state.state import State

if TYPE_CHECKING:
    from verl_bootstrap.plan.graph import Plan

__all__ = ["Change", "ChangeSet", "changes_for"]

# compared as they resolved (below), not as flags
_RESOLVED = ("verl_ref", "backend")


@dataclass(frozen=True)
class Change:
    """One difference between the record and this run."""

    what: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.what} {self.old} -> {self.new}"


@dataclass(frozen=True)
class ChangeSet:
    """The differences, the steps that re-run, and why it cannot be applied in place (if so)."""

    changes: tuple[Change, ...]
    reruns: tuple[str, ...]
    new_checkout: bool
    env_unchanged: bool
    blockers: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The change set as JSON-ready data (a refusal's --json carries it)."""
        return {
            "changes": [{"what": c.what, "old": c.old, "new": c.new} for c in self.changes],
            "reruns": list(self.reruns),
            "new_checkout": self.new_checkout,
            "env_unchanged": self.env_unchanged,
            "blockers": list(self.blockers),
        }

    def summary(self) -> str:
        """e.g. "verl ref v0.9.1 -> v0.9.0: new checkout; stages torch re-run; Python unchanged"."""
        what = "; ".join(str(c) for c in self.changes)
        effects = ["new checkout"] if self.new_checkout else []
        stages = [s for s in self.reruns if s not in _FIXED_STEPS]
        if stages:
            effects.append(f"stage{'s' if len(stages) > 1 else ''} {', '.join(stages)} re-run")
        effects.append("Python unchanged" if self.env_unchanged else "the env is re-created")
        return f"{what}: {'; '.join(effects)}"


_FIXED_STEPS = ("create-env", "fetch-source", "install-verl", "record-lock", "verify")


def changes_for(plan: Plan, state: State | None = None) -> ChangeSet | None:
    """The change set of running `plan` on its prefix (whose `state` the run loaded); None when
    the env has no record or the run changes nothing that shaped it (resuming or re-verifying
    needs no confirmation)."""
    state = state or State.load(state_file(plan.prefix))
    if not state.record:
        return None
    changes = _differences(state.record, plan)
    if not changes:
        return None
    return _effects(changes, state, plan)


def _differences(record: dict[str, Any], plan: Plan) -> tuple[Change, ...]:
    old, new = record.get("options", {}), plan_options(plan)
    found = [
        Change(o.label, _show(old.get(o.name)), _show(new[o.name]))
        for o in recorded_options(plan.options)
        if o.name not in _RESOLVED and old.get(o.name) != new[o.name]
    ]
    resolved = {"verl ref": plan.source.ref, "backend": plan.backend, "variant": plan.variant}
    keys = {"verl ref": "verl_ref", "backend": "backend", "variant": "variant"}
    for label, now in resolved.items():
        before = record.get(keys[label])
        if before != now:
            found.insert(0, Change(label, _show(before), now))
    digest = plan.profile_hash
    if not found and record.get("profile_hash") != digest:
        old_hash, new_hash = str(record.get("profile_hash", "?")), digest
        found.append(Change(f"profile {plan.profile.name} (edited)", old_hash[:19], new_hash[:19]))
    return tuple(found)


def _effects(changes: tuple[Change, ...], state: State, plan: Plan) -> ChangeSet:
    fingerprints = plan.fingerprints()

    def reruns(step_id: str) -> bool:
        record = state.steps.get(step_id)
        done = record is not None and record.status == "done"
        return not done or record is None or record.fingerprint != fingerprints[step_id]

    rerun = tuple(s.id for s in plan.steps if reruns(s.id))
    env = state.steps.get("create-env")
    env_kept = (
        env is None or env.status != "done" or "create-env" not in rerun or _python_fits(plan)
    )
    blockers = []
    if state.record.get("backend") not in (None, plan.backend):
        blockers.append(f"the backend changes ({state.record.get('backend')} -> {plan.backend})")
    elif not env_kept:
        blockers.append("the env itself (its Python or base packages) would be re-created")
    return ChangeSet(
        changes=changes,
        reruns=rerun,
        new_checkout="fetch-source" in rerun,
        env_unchanged=env_kept,
        blockers=tuple(blockers),
    )


def _python_fits(plan: Plan) -> bool:
    """The env's Python is inside the plan's range: create-env then reuses the env (a --locked
    run narrows the range to the lock's Python X.Y, which changes the step but not the env)."""
    version = python_version(env_python(plan.prefix))
    if version is None or version not in SpecifierSet(plan.profile.python.requires):
        return False
    # another interpreter asked for (--python) is another env, even in the same range
    return plan.interpreter is None or python_version(Path(plan.interpreter)) == version


def _show(value: Any) -> str:
    if value in (None, [], False):
        return "(default)" if value is None else "(none)" if value == [] else "off"
    if value is True:
        return "on"
    if isinstance(value, list):
        return ",".join("=".join(v) if isinstance(v, list) else str(v) for v in value)
    return str(value)
