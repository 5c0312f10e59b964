"""What each step kind's fingerprint covers, typed: one frozen dataclass per kind.

A step re-runs when its fingerprint changes (plan.model.Plan.fingerprints), so these fields are
the contract between the plan and an env's record. An optional field left None is not part of
the fingerprint at all, as the record of an env made before it existed holds it: a new field
never re-runs the steps of an env that does not use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "CreateEnvInputs",
    "FetchSourceInputs",
    "NoInputs",
    "RecordLockInputs",
    "StageInputs",
    "StepInputs",
    "VerifyInputs",
]


@dataclass(frozen=True)
class StepInputs:
    """The base of every kind's inputs."""

    def fingerprint_body(self) -> dict[str, Any]:
        """The fields the fingerprint hashes: every field but those left None, as plain data."""
        body = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                body[f.name] = _plain(value)
        return body


def _plain(value: Any) -> Any:
    """Mappings as dicts and sequences as lists: the JSON the fingerprint hashes."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class NoInputs(StepInputs):
    """A step whose commands say all it does (install-verl)."""


@dataclass(frozen=True)
class CreateEnvInputs(StepInputs):
    backend: str  # conda or venv
    python: str  # the profile's Python range


@dataclass(frozen=True)
class FetchSourceInputs(StepInputs):
    repo: str
    ref: str
    fallback: bool | None = None  # a git fetch: whether verl's release sdist may stand in
    sdist_sha256: str | None = None  # a locked release sdist: the file the lockfile names


@dataclass(frozen=True)
class StageInputs(StepInputs):
    """A `stage` or `script` step: what it installs under, and what it promises."""

    env: Mapping[str, str]
    overrides: tuple[str, ...]
    expect: Mapping[str, str]
    protect: tuple[str, ...]
    # a stage that takes verl's extras: re-runs when they, or what it leaves out, change
    verl_extras: tuple[str, ...] | None = None
    excluded: tuple[str, ...] | None = None
    substitutions: tuple[str, ...] | None = None  # each "replace->by"
    # a locked stage: its requirements and its build env, from the lockfile
    locked: str | None = None
    build: str | None = None


@dataclass(frozen=True)
class RecordLockInputs(StepInputs):
    variant: str
    profile: str


@dataclass(frozen=True)
class VerifyInputs(StepInputs):
    verify: Mapping[str, Any] = field(default_factory=dict)  # the profile's checks, as JSON
    train: str | None = None  # a training step's level, when one is planned
