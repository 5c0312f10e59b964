"""The step contract, typed: each step kind's inputs and outputs, one frozen dataclass each.

Inputs are what a step's fingerprint covers: it re-runs when they change (plan.graph.Plan.
fingerprints), so their fields are the contract between the plan and an env's record. An optional
field left None is not part of the fingerprint at all, as the record of an env made before it
existed holds it: a new field never re-runs the steps of an env that does not use it.

Outputs are what a finished step leaves for the steps after it. The env's state file keeps them
as JSON (a resumed run reads them back from there), so each kind reads its own with `read`,
which takes a record of any age: a field it lacks is the field's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from verl_bootstrap.source.spec import SourceResult

__all__ = [
    "CreateEnvInputs",
    "CreateEnvOutputs",
    "FetchSourceInputs",
    "NoInputs",
    "NoOutputs",
    "RecordLockInputs",
    "RecordLockOutputs",
    "SourceOutputs",
    "StageInputs",
    "StageOutputs",
    "StepInputs",
    "StepOutputs",
    "VerifyInputs",
    "VerifyOutputs",
]


@dataclass(frozen=True)
class StepInputs:
    """The base of every kind's inputs."""

    def fingerprint_body(self) -> dict[str, Any]:
        """The fields the fingerprint hashes: every field but those left None, as plain data."""
        return _body(self)


def _body(data: object) -> dict[str, Any]:
    """A dataclass's fields as plain JSON data, those left None left out."""
    body = {}
    for f in fields(data):  # type: ignore[arg-type]
        value = getattr(data, f.name)
        if value is not None:
            body[f.name] = _plain(value)
    return body


def _plain(value: Any) -> Any:
    """Mappings as dicts and sequences as lists: the JSON the fingerprint hashes."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
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


_Out = TypeVar("_Out", bound="StepOutputs")


@dataclass(frozen=True)
class StepOutputs:
    """The base of every kind's outputs."""

    def to_json(self) -> dict[str, Any]:
        """As the env's state file keeps them (a field left None is not written)."""
        return _body(self)

    @classmethod
    def read(cls: type[_Out], data: Mapping[str, Any] | None) -> _Out:
        """A finished step's outputs from the state file: the fields this kind knows (one a
        record too old to hold it lacks is its default; what another kind wrote is dropped)."""
        known = {f.name: f for f in fields(cls)}
        taken = {k: v for k, v in (data or {}).items() if k in known}
        return cls(**taken)


@dataclass(frozen=True)
class NoOutputs(StepOutputs):
    """A step that leaves nothing for later steps (install-verl)."""


@dataclass(frozen=True)
class CreateEnvOutputs(StepOutputs):
    created: bool = False  # False: the env was there already


@dataclass(frozen=True)
class SourceOutputs(StepOutputs):
    """What fetch-source got (source.spec.SourceResult, its path as text)."""

    kind: str = ""  # git | sdist
    repo: str = ""
    ref: str = ""
    path: str = ""
    commit: str | None = None
    sdist_sha256: str | None = None
    sdist_name: str | None = None
    note: str = ""

    @classmethod
    def of(cls, result: SourceResult) -> SourceOutputs:
        return cls(**{**result.__dict__, "path": str(result.path)})

    def result(self) -> SourceResult:
        return SourceResult(**{**self.__dict__, "path": Path(self.path)})


@dataclass(frozen=True)
class StageOutputs(StepOutputs):
    """A stage: the env as it left it, the wheels it built here, and its kernel's wheel."""

    installed: Mapping[str, str] | None = None  # name -> version (None: a record without it)
    built: Mapping[str, str] = field(default_factory=dict)  # name -> sha256 of a wheel built here
    # a kernel stage: the wheel it took (file, sha256, source, key, url, origin, trust,
    # distribution, replaces: the locked parts a whole wheel holds; passed_over: the sources
    # passed over, as a plan's kernel names them)
    kernel: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RecordLockOutputs(StepOutputs):
    lockfile: str = ""  # the env's lockfile, written


@dataclass(frozen=True)
class VerifyOutputs(StepOutputs):
    verify: Mapping[str, Any] = field(default_factory=dict)  # the verification report's JSON
    train: Mapping[str, Any] | None = None  # a training step: its level and result, or why skipped
