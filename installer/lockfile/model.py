"""The lockfile model (schema version 1).

A lockfile records names, versions and hashes, never download URLs: an index is recorded by the
name the profile gives it ("default" is whatever default index the user configured), so one
lockfile installs from the default index or from any mirror, and the hashes prove it is the same
artifact.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from installer.profile.models import Profile

__all__ = [
    "LOCK_SCHEMA_VERSION",
    "CondaPackage",
    "CudaTarget",
    "LockedDist",
    "LockedSource",
    "LockedStage",
    "Lockfile",
    "profile_hash",
]

LOCK_SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LockedDist(_Strict):
    """One distribution a stage installs."""

    name: str
    version: str
    hashes: tuple[str, ...] = Field(default=(), description="sha256 of each allowed artifact")
    index: str | None = Field(default=None, description="Index name; None: not from an index")
    git: str | None = Field(default=None, description="For git-sourced builds: URL@commit")
    build_env: dict[str, str] = Field(default_factory=dict)
    built_sha256: str | None = None


class LockedStage(_Strict):
    """A stage and what it installs, in install order."""

    id: str
    kind: str
    options: tuple[str, ...] = Field(default=(), description="installer flags the stage used")
    env: dict[str, str] = Field(default_factory=dict)
    distributions: tuple[LockedDist, ...] = ()


class LockedSource(_Strict):
    """verl's source: a git commit, or (when git was unreachable) the release sdist's hash."""

    repo: str
    ref: str
    kind: Literal["git", "sdist"]
    commit: str | None = None
    sdist: str | None = None
    sdist_sha256: str | None = None


class CondaPackage(_Strict):
    """A conda package of the env (conda backend)."""

    name: str
    version: str
    build: str
    channel: str
    subdir: str
    filename: str
    md5: str | None = None
    sha256: str | None = None


class CudaTarget(_Strict):
    """The CUDA variant and the virtual packages the lock was solved for."""

    variant: str
    cuda: str | None = None
    virtual_packages: dict[str, str] = Field(default_factory=dict)


class Lockfile(_Strict):
    """A whole lockfile."""

    schema_version: Literal[1] = LOCK_SCHEMA_VERSION
    generated_by: str
    regenerate: str
    profile: str
    profile_hash: str
    verl: LockedSource
    python: str
    platform: str = "linux-64"
    cuda: CudaTarget
    exclude_newer: str | None = None
    backend: str
    conda: tuple[CondaPackage, ...] = ()
    stages: tuple[LockedStage, ...]
    skipped_checks: tuple[str, ...] = ()
    allow_unsupported_ref: bool = False

    def distributions(self) -> dict[str, LockedDist]:
        """Every locked distribution by name (the last stage to install one wins)."""
        return {d.name: d for stage in self.stages for d in stage.distributions}


def profile_hash(profile: Profile, variant: str) -> str:
    """The hash a lockfile is checked against: the resolved profile's content plus the variant.

    Inputs: every field of the profile after `extends` and the per-release stack are applied
    (name and description included), and the CUDA variant name. Changing this recipe makes
    every committed lockfile stale, so it is versioned with the lock schema.
    """
    body = {
        "lock_schema": LOCK_SCHEMA_VERSION,
        "variant": variant,
        "profile": profile.model_dump(mode="json"),
    }
    blob = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()
