"""The conda part of a lock: py-rattler solves the env's conda packages for a platform, offline of
the host (the virtual packages are the lock's, not this machine's)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.lock.format import CondaPackage, channel_name
from verl_bootstrap.redact import redact

__all__ = ["ChannelsUnreachable", "conda_records", "solve_conda"]


class ChannelsUnreachable(StepFailed):
    """The channels could not be read: a lock made here names its conda part as a gap."""


def solve_conda(
    channels: Sequence[str],
    specs: Sequence[str],
    *,
    platform: str,
    virtual: Mapping[str, str],
    exclude_newer: str,
    cache: Path,
) -> tuple[CondaPackage, ...]:
    """Solve `specs` from `channels` (URLs) for `platform`; the records sorted by name."""
    from rattler.exceptions import GatewayError, SolverError  # noqa: PLC0415 - py-rattler

    try:
        records = asyncio.run(
            _solve(
                channels,
                specs,
                platform=platform,
                virtual=virtual,
                cutoff=exclude_newer,
                cache=cache,
            )
        )
    except GatewayError as exc:
        shown = ", ".join(redact(c) for c in channels)
        raise ChannelsUnreachable(
            f"could not read the conda channels {shown}: {redact(str(exc).splitlines()[0])}",
            hint="pass --channel with a reachable mirror, or lock with --backend venv "
            "(the conda env's python is then solved when the env is made)",
        ) from exc
    except SolverError as exc:
        raise StepFailed(
            f"no conda packages satisfy {' '.join(specs)}: {str(exc).strip().splitlines()[0]}",
            hint="widen the python range or add a channel that has these packages",
        ) from exc
    return conda_records(records)


async def _solve(
    channels: Sequence[str],
    specs: Sequence[str],
    *,
    platform: str,
    virtual: Mapping[str, str],
    cutoff: str,
    cache: Path,
) -> list[Any]:
    from rattler import (  # noqa: PLC0415 - py-rattler is only needed by conda locks
        BuildString,
        Channel,
        Gateway,
        GenericVirtualPackage,
        PackageName,
        Platform,
        Version,
        solve,
    )

    packages = [
        GenericVirtualPackage(PackageName(name), Version(version), BuildString("0"))
        for name, version in sorted(virtual.items())
    ]
    return await solve(
        [Channel(url) for url in channels],
        list(specs),
        gateway=Gateway(cache_dir=cache / "conda-repodata"),
        platforms=[Platform(platform), Platform("noarch")],
        virtual_packages=packages,
        exclude_newer=_cutoff(cutoff),
        timestamp_policy="allow-missing",
    )


def _cutoff(value: str) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"exclude-newer {value!r} is not an ISO date or time") from exc


def conda_records(records: Sequence[Any]) -> tuple[CondaPackage, ...]:
    """Lockfile entries for py-rattler records, sorted by name."""
    out = [
        CondaPackage(
            name=record.name.normalized,
            version=str(record.version),
            build=str(record.build),
            channel=channel_name(str(record.channel or "")),
            subdir=str(record.subdir),
            filename=str(record.file_name),
            md5=record.md5.hex() if isinstance(record.md5, bytes) else record.md5,
            sha256=record.sha256.hex() if isinstance(record.sha256, bytes) else record.sha256,
        )
        for record in records
    ]
    return tuple(sorted(out, key=lambda p: p.name))
