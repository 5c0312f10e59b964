"""A `--locked` conda env: each package's sha256 (or md5) is the lockfile's before it is linked.

The lock pins each conda package by name, version and build, and records its archive's sha256
and md5. The solver picks the channel's record of that build; before py-rattler downloads and
links anything, each record's digest is compared with the lock's, so a channel that serves
another file under the same name is refused with nothing linked. py-rattler then checks each
archive it downloads against that same record; it does not check a file:// channel's archive,
so that is hashed here. A reused prefix is held to the same digests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.paths import file_sha256

if TYPE_CHECKING:
    from rattler import PackageRecord, RepoDataRecord

__all__ = ["LockedConda", "check_local_archives", "check_locked_digests"]


@dataclass(frozen=True)
class LockedConda:
    """What a lockfile says one conda package's archive is."""

    name: str
    sha256: str | None = None
    md5: str | None = None


def check_locked_digests(
    records: Iterable[PackageRecord], locked: Iterable[LockedConda], *, where: str
) -> None:
    """Refuse `records` unless each is a locked package with the locked sha256 (else md5)."""
    wanted = {p.name: p for p in locked}
    problems = [p for r in records if (p := _problem(r, wanted.get(r.name.normalized)))]
    if problems:
        raise StepFailed(
            f"{where} does not match the lockfile's conda packages; nothing was linked:\n  "
            + "\n  ".join(problems),
            hint="the channel serves other files than the ones locked: use the channel the lock "
            "was made from, or regenerate the lock with `verl-bootstrap lock`",
        )


def _problem(record: PackageRecord, want: LockedConda | None) -> str | None:
    label = f"{record.name.normalized} {record.version} {record.build}"
    if want is None:
        return f"{label}: not in the lockfile"
    for kind, locked, got in (
        ("sha256", want.sha256, record.sha256),
        ("md5", want.md5, record.md5),
    ):
        if locked:
            if got is None or got.hex() != locked.lower():
                return f"{label}: {kind} {got.hex() if got else 'unknown'}, the lock has {locked}"
            return None  # the strongest digest the lock records matched
    return f"{label}: the lockfile records no sha256 or md5 for it"


def check_local_archives(records: Iterable[RepoDataRecord]) -> None:
    """Each archive a file:// channel holds has its record's sha256 (py-rattler links those
    without checking them)."""
    for record in records:
        url = urlparse(record.url)
        if url.scheme != "file" or record.sha256 is None:
            continue
        archive = Path(unquote(url.path))
        got = file_sha256(archive) if archive.is_file() else "missing"
        if got != record.sha256.hex():
            raise StepFailed(
                f"{archive} has sha256 {got}, its channel's record and the lockfile say "
                f"{record.sha256.hex()}; nothing was linked",
                hint="the local channel's file was replaced after it was indexed: re-index it "
                "or restore the file",
            )
