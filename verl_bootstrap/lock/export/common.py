"""What every export needs: each locked distribution with the artifacts it may be installed from,
as URLs on the user's configured indexes (lockfiles hold no URLs; exports do)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.lock.format import LockedDist, Lockfile
from verl_bootstrap.lock.lookup import hashed_dists, lookup, mismatches
from verl_bootstrap.lock.wheelrank import install_order
from verl_bootstrap.machine.host.indexes import IndexSettings

__all__ = ["ExportEntry", "export_entries", "verl_note"]


@dataclass(frozen=True)
class ExportEntry:
    """One distribution of one stage, with its locked artifacts' URLs (the file an installer takes
    for the lock's target first)."""

    stage: str
    dist: LockedDist
    artifacts: tuple[Artifact, ...]

    @property
    def primary(self) -> Artifact:
        """The artifact a single-URL format (conda-lock) names: the file an installer takes for
        the lock's target (its most specific wheel, else the sdist)."""
        return self.artifacts[0]


def export_entries(lock: Lockfile, settings: IndexSettings, *, offline: bool) -> list[ExportEntry]:
    """Every hash-checked distribution in install order, with URLs from the configured indexes."""
    with tempfile.TemporaryDirectory(prefix="verl-export-") as tmp:
        served = lookup(lock, settings, offline=offline, work=Path(tmp))
    problems = mismatches(hashed_dists(lock), served)
    if problems:
        raise InputError(
            "cannot export: your indexes do not serve these locked artifacts:\n  "
            + "\n  ".join(problems),
            hint="configure the index the lockfile was made from (pip config, --index NAME=URL)",
        )
    entries = []
    for stage in lock.stages:
        for dist in stage.distributions:
            if dist.source in ("wheel", "sdist"):
                entries.append(
                    ExportEntry(stage.id, dist, _locked(dist, served.get(dist.name, ()), lock))
                )
    return entries


def _locked(dist: LockedDist, offered: Sequence[Artifact], lock: Lockfile) -> tuple[Artifact, ...]:
    """The locked files of `dist`, the one an installer takes for the lock's target first."""
    wanted = set(dist.hashes)
    return tuple(install_order((a for a in offered if a.sha256 in wanted), lock))


def verl_note(lock: Lockfile) -> str:
    """How verl itself is installed: editable from its checkout, before everything else."""
    where = (
        f"commit {lock.verl.commit} of {lock.verl.repo}"
        if lock.verl.kind == "git"
        else f"its release sdist {lock.verl.sdist} (sha256 {lock.verl.sdist_sha256})"
    )
    return (
        "verl is not in this file: install it first with `pip install --no-deps -e CHECKOUT`, "
        f"CHECKOUT being {where}"
    )
