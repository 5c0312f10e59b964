"""The env's state.json, read as untrusted input: a corrupt or foreign file is an InputError.

The state decides which steps are skipped, so a file another tool (or a crash of the disk) left
there must never be half-trusted: it is bounded in size, parsed as JSON with no duplicate keys,
and checked field by field before the runner uses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verl_bootstrap.errors import InputError
from verl_bootstrap.safety.shapes import STAGE_ID, check
from verl_bootstrap.safety.yamlfile import read_untrusted

__all__ = ["parse_state"]

MAX_STATE_BYTES = 4 * 1024 * 1024
_HINT = "delete that file to start the env's steps over (the installed packages stay)"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["running", "done", "failed", "interrupted"]
    fingerprint: str
    started: float
    finished: float | None = None
    log: str | None = None
    outputs: dict[str, Any] = Field(default_factory=dict)


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    steps: dict[str, _Record] = Field(default_factory=dict)
    protected: dict[str, dict[str, str]] = Field(default_factory=dict)
    record: dict[str, Any] = Field(default_factory=dict)  # how the env was made (lifecycle)
    last_run: dict[str, Any] = Field(default_factory=dict)
    made: list[str] = Field(default_factory=list)  # top-level names the tool created

    @field_validator("steps")
    @classmethod
    def _step_ids(cls, value: dict[str, _Record]) -> dict[str, _Record]:
        for step_id in value:
            check(step_id, STAGE_ID, "step id")
        return value


def parse_state(path: Path, version: int) -> dict[str, Any]:
    """The state at `path` as plain data, checked; an InputError says what is wrong."""
    try:
        text = read_untrusted(path, what="state file", max_bytes=MAX_STATE_BYTES)
    except InputError as exc:
        raise InputError(exc.message, hint=_HINT) from None
    try:
        raw = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise InputError(f"{path}: unreadable state ({exc})", hint=_HINT) from None
    if not isinstance(raw, dict) or "version" not in raw:
        raise InputError(f"{path}: not a verl-bootstrap state file", hint=_HINT)
    if raw["version"] != version:
        raise InputError(f"{path}: state version {raw['version']!r} is not supported "
                         f"(this verl-bootstrap writes {version})", hint=_HINT)  # fmt: skip
    try:
        model = _StateFile.model_validate(raw)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise InputError(f"{path}: invalid state: {where}", hint=_HINT) from None
    return model.model_dump()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        keys = [k for k, _ in pairs]
        repeated = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"duplicate key {repeated!r}")
    return found
