"""Lockfiles: one format for the env's own record and for the lab's shared, hash-checked locks."""

from __future__ import annotations

from verl_bootstrap.lockfile.format import (
    LOCK_SCHEMA_VERSION,
    CondaPackage,
    LockedDist,
    LockedSource,
    LockedStage,
    Lockfile,
    profile_hash,
)
from verl_bootstrap.lockfile.io import dump_lockfile, read_lockfile, write_lockfile

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
