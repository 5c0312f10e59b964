"""The lockfile model (schema version 1).

A lockfile records names, versions and hashes, never download URLs: an index is recorded by the
name the profile gives it ("default" is whatever default index the user configured), so one
lockfile installs from the default index or from any mirror, and the hashes prove it is the same
artifact.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from installer.profile.models import Profile
from installer.profile.stagespec import stage_specs

__all__ = [
    "LOCK_SCHEMA_VERSION",
    "CondaPackage",
    "CudaTarget",
    "DistSource",
    "LockedDist",
    "LockedSource",
    "LockedStage",
    "Lockfile",
    "channel_name",
    "profile_hash",
]

LOCK_SCHEMA_VERSION: Final = 1
DistSource = Literal["wheel", "sdist", "git", "editable"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LockedDist(_Strict):
    """One distribution a stage installs.

    `source` says what the hashes are: "wheel" (the wheels for the lock's platform and Python),
    "sdist" (no wheel exists: the source archive is hashed and built at install time with the
    stage's `build_env`; a `--locked` install builds it into a wheel first and its env record
    gives that wheel's `built_sha256`), "git" (`url` at
    `commit`, no index), or "editable" (verl's own checkout, recorded under `verl`).
    """

    name: str
    version: str
    source: DistSource | None = None
    hashes: tuple[str, ...] = Field(default=(), description="sha256 of each allowed artifact")
    index: str | None = Field(default=None, description="Index name; None: not from an index")
    url: str | None = Field(default=None, description="For git-sourced builds: the repository")
    commit: str | None = Field(default=None, description="For git-sourced builds: the commit")
    build_env: dict[str, str] = Field(default_factory=dict)
    built_sha256: str | None = Field(
        default=None,
        description="Env records of --locked installs: sha256 of the wheel built from the sdist",
    )
    record_sha256: str | None = Field(
        default=None, description="Env records only: digest of the installed RECORD file"
    )


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
    torch: str | None = Field(default=None, description="The locked torch version")
    torch_cuda: str | None = Field(
        default=None, description="CUDA of the locked torch build (None: a CPU build)"
    )


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


def channel_name(channel: str) -> str:
    """Channels are recorded by name, like indexes, so a mirror can serve them."""
    return channel.rstrip("/").rsplit("/", 1)[-1] if channel else ""


def profile_hash(profile: Profile, variant: str) -> str:
    """The hash a lockfile is checked against: what a lock of `variant` is resolved from.

    Inputs: the profile's name, verl source, python, env, named indexes and protected packages;
    the variant's definition; and its stages as resolved for the variant (after `extends` and the
    stack of the profile's verl ref): packages, overrides, kinds, flags, env, indexes and
    expectations. Left out, because no lockfile records them: stacks of other verl refs, other
    variants, verify checks, disk size and descriptions. Changing this recipe makes every
    committed lockfile stale, so it is versioned with the lock schema.
    """

    cuda = profile.cuda_variants.get(variant)
    body = {
        "lock_schema": LOCK_SCHEMA_VERSION,
        "name": profile.name,
        "variant": variant,
        "cuda": cuda.model_dump(mode="json", exclude={"description"}) if cuda else None,
        "verl": profile.verl.model_dump(mode="json"),
        "python": profile.python.model_dump(mode="json"),
        "env": profile.env.model_dump(mode="json"),
        "indexes": {k: v.model_dump(mode="json") for k, v in profile.indexes.items()},
        "protected": list(profile.protected),
        "stages": [
            {k: v for k, v in asdict(stage).items() if k != "description"}
            for stage in stage_specs(profile, variant)
        ],
    }
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=list).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()
