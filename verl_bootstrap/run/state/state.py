"""Per-env run state: which steps are done, with which fingerprint, and how the env was made.

One model: the state file is untrusted input (it decides which steps are skipped), so the model
that checks it on load is the one the runner and the lifecycle use and write back, atomically.
A run loads it once and passes it on (`fresh()` re-reads it only when another process wrote it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from verl_bootstrap.errors import InputError
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.run.state.ownership import check_file
from verl_bootstrap.run.state.statefile import HINT, read_state_json
from verl_bootstrap.safety.shapes import PROFILE_NAME, STAGE_ID, VARIANT, check, control_char_at

__all__ = ["State", "StepRecord"]

STATE_VERSION = 1
_EDITED = "the state was edited by hand; restore it, or delete the field"


class StepRecord(BaseModel):
    """What the state knows of one step."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["running", "done", "failed", "interrupted"]
    fingerprint: str
    started: float
    finished: float | None = None
    log: str | None = None
    outputs: dict[str, Any] = Field(default_factory=dict)


class State(BaseModel):
    """The state file of one env (`.verl-bootstrap/state.json`)."""

    model_config = ConfigDict(extra="forbid")

    path: Path = Field(exclude=True)
    steps: dict[str, StepRecord] = Field(default_factory=dict)
    protected: dict[str, dict[str, str]] = Field(default_factory=dict)
    # how the env was made (verl_bootstrap.run.state.envrecord), its last run, and the top-level
    # names the tool created in the prefix (what `remove` may delete)
    record: dict[str, Any] = Field(default_factory=dict)
    last_run: dict[str, Any] = Field(default_factory=dict)
    made: list[str] = Field(default_factory=list)
    # the last standalone `verify` of the env: when, whether it passed, the checks that failed
    verified: dict[str, Any] = Field(default_factory=dict)
    # the last `verify --train` of each level: whether it trained, its figures, when
    train: dict[str, Any] = Field(default_factory=dict)
    _stamp: tuple[int, int, int] | None = PrivateAttr(default=None)  # the file as last read/written

    @field_validator("steps")
    @classmethod
    def _step_ids(cls, value: dict[str, StepRecord]) -> dict[str, StepRecord]:
        for step_id in value:
            check(step_id, STAGE_ID, "step id")
        return value

    @field_validator("made")
    @classmethod
    def _plain_names(cls, value: list[str]) -> list[str]:
        if not all(map(_plain_name, value)):  # `remove` would otherwise delete outside the prefix
            raise ValueError(f"field 'made' must be a list of names inside the prefix; {_EDITED}")
        return value

    @field_validator("record", "last_run", "made", "verified", "train")
    @classmethod
    def _one_line_each(cls, value: Any, info: Any) -> Any:
        at = control_char_at(value, info.field_name)  # names, paths, URLs, times: each one line
        if at is not None:
            raise ValueError(f"field {at!r} holds a line break or control character; {_EDITED}")
        return value

    @field_validator("record")
    @classmethod
    def _record_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, shape in (("profile_name", PROFILE_NAME), ("variant", VARIANT)):
            given = value.get(name)
            if given is not None and not (isinstance(given, str) and shape.fullmatch(given)):
                what = name.replace("_", " ")
                raise ValueError(f"field 'record.{name}' is {given!r}, not a {what}; {_EDITED}")
        return value

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
        check_file(path, what="state file")  # it names programs (a recorded --python)
        raw = read_state_json(path, STATE_VERSION)  # bounded, one JSON object, this version
        raw.pop("version")
        try:
            state = cls.model_validate({**raw, "path": path})
        except ValidationError as exc:
            errors = exc.errors()[:3]
            where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
            raise InputError(f"{path}: invalid state: {where}", hint=HINT) from None
        state._stamp = _stamp(path)
        return state

    def fresh(self) -> State:
        """This state, or the file read again when another process wrote it since (a run waiting
        for the prefix lock loaded it before that lock was its own)."""
        if _stamp(self.path) == self._stamp:
            return self
        return State.load(self.path)

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
        body = {"version": STATE_VERSION, **self.model_dump(mode="json")}
        body["made"] = sorted(set(self.made))
        atomic_write(self.path, json.dumps(body, indent=2, sort_keys=True) + "\n")
        self._stamp = _stamp(self.path)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _plain_name(value: object) -> bool:
    """A name directly inside the prefix (or "." for the prefix itself): never a path out of it."""
    return isinstance(value, str) and value not in ("", "..") and "/" not in value
