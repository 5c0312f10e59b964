"""The lock capability: one format for the env's own record and for the lab's shared,
hash-checked locks (format, io, fit, gaps, diff), choosing the lock a run takes (lockroute),
finding its files on the indexes (lookup, wheelrank), making and checking locks (making/),
installing exactly one (installing/), comparing an env with one (drift), and carrying one
elsewhere (export/, bundle/)."""

from __future__ import annotations

from verl_bootstrap.lock.format import (
    LOCK_SCHEMA_VERSION,
    CondaPackage,
    LockedDist,
    LockedSource,
    LockedStage,
    Lockfile,
    profile_hash,
)
from verl_bootstrap.lock.io import dump_lockfile, read_lockfile, write_lockfile

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
