"""Per-env run state: which steps are done, with which fingerprint. Written atomically."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.lifecycle.statefile import parse_state
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.safety.shapes import PROFILE_NAME, VARIANT, control_char_at

__all__ = ["State", "StepRecord"]

STATE_VERSION = 1


@dataclass
class StepRecord:
    """What the state knows of one step."""

    status: str  # running | done | failed | interrupted
    fingerprint: str
    started: float
    finished: float | None = None
    log: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class State:
    """The state file of one env (`.verl-bootstrap/state.json`)."""

    path: Path
    steps: dict[str, StepRecord] = field(default_factory=dict)
    protected: dict[str, dict[str, str]] = field(default_factory=dict)
    # how the env was made (verl_bootstrap.lifecycle.record), its last run, and the top-level names
    # the tool created in the prefix (what `remove` may delete)
    record: dict[str, Any] = field(default_factory=dict)
    last_run: dict[str, Any] = field(default_factory=dict)
    made: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> State:
        """Read the state, or start an empty one."""
        if path.is_symlink():  # the tool writes a plain file here; a link is not its own
            raise InputError(
                f"{path} is a symlink, not the env's state file",
                hint="remove the link; the next run starts the steps over",
            )
        if not path.exists():
            return cls(path=path)
        raw = parse_state(path, STATE_VERSION)  # untrusted: bounded, typed, or an InputError
        _check_types(path, raw)
        steps = {k: StepRecord(**v) for k, v in raw["steps"].items()}
        return cls(
            path=path, steps=steps, protected=raw["protected"],
            record=raw["record"], last_run=raw["last_run"], made=list(raw["made"]),
        )  # fmt: skip

    def is_done(self, step_id: str, fingerprint: str) -> bool:
        """The step finished before with exactly these inputs."""
        record = self.steps.get(step_id)
        return record is not None and record.status == "done" and record.fingerprint == fingerprint

    def outputs(self, step_id: str) -> dict[str, Any]:
        """What a finished step left for later steps."""
        record = self.steps.get(step_id)
        return dict(record.outputs) if record else {}

    def save(self) -> None:
        """Persist atomically."""
        body = {
            "version": STATE_VERSION,
            "steps": {k: v.__dict__ for k, v in sorted(self.steps.items())},
            "protected": self.protected,
            "record": self.record,
            "last_run": self.last_run,
            "made": sorted(set(self.made)),
        }
        atomic_write(self.path, json.dumps(body, indent=2, sort_keys=True) + "\n")


def _check_types(path: Path, raw: dict[str, Any]) -> None:
    """The lifecycle fields are input like any other: a wrong type is named, not crashed on."""
    for name, kind in (("record", dict), ("last_run", dict), ("made", list)):
        value = raw.get(name, kind())
        if not isinstance(value, kind) or (kind is list and not all(map(_plain_name, value))):
            raise InputError(
                f"{path}: field {name!r} must be a "
                + ("mapping" if kind is dict else "list of names inside the prefix"),
                hint="the state was edited by hand; restore it, or delete the field",
            )
    for name in ("record", "last_run", "made"):  # names, paths, URLs, times: each one line
        at = control_char_at(raw.get(name), name)
        if at is not None:
            raise InputError(
                f"{path}: field {at!r} holds a line break or control character",
                hint="the state was edited by hand; restore it, or delete the field",
            )
    record = raw.get("record") or {}
    for name, shape in (("profile_name", PROFILE_NAME), ("variant", VARIANT)):
        value = record.get(name)
        if value is not None and not (isinstance(value, str) and shape.fullmatch(value)):
            raise InputError(
                f"{path}: field 'record.{name}' is {value!r}, not a {name.replace('_', ' ')}",
                hint="the state was edited by hand; restore it, or delete the field",
            )


def _plain_name(value: object) -> bool:
    """A name directly inside the prefix (or "." for the prefix itself): never a path out of it."""
    return isinstance(value, str) and value not in ("", "..") and "/" not in value
