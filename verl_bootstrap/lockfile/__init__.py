"""Lockfiles: one format for the env's own record and for the lab's shared, hash-checked locks."""

from __future__ import annotations

from verl_bootstrap.lockfile.io import dump_lockfile, read_lockfile, write_lockfile
from verl_bootstrap.lockfile.model import (
    LOCK_SCHEMA_VERSION,
    CondaPackage,
    LockedDist,
    LockedSource,
    LockedStage,
    Lockfile,
    profile_hash,
)

__all__ = [
    "LOCK_SCHEMA_VERSION",
    "CondaPackage",
    "LockedDist",
    "LockedSource",
    "LockedStage",
    "Lockfile",
    "dump_lockfile",
    "profile_hash",
    "read_lockfile",
    "write_lockfile",
]
