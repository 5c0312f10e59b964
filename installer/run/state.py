"""Per-env run state: which steps are done, with which fingerprint. Written atomically."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from installer.errors import InputError
from installer.paths import atomic_write

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

    @classmethod
    def load(cls, path: Path) -> State:
        """Read the state, or start an empty one."""
        if not path.exists():
            return cls(path=path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(
                f"{path}: unreadable state ({exc})",
                hint="delete that file to start the env's steps over",
            ) from exc
        if raw.get("version") != STATE_VERSION:
            raise InputError(f"{path}: state version {raw.get('version')} is not supported")
        steps = {k: StepRecord(**v) for k, v in raw.get("steps", {}).items()}
        return cls(path=path, steps=steps, protected=raw.get("protected", {}))

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
        }
        atomic_write(self.path, json.dumps(body, indent=2, sort_keys=True) + "\n")
