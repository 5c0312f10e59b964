"""Write a lockfile in another tool's format (one of `names.FORMATS`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.export.common import export_entries
from verl_bootstrap.lock.export.condalock import render_conda_lock
from verl_bootstrap.lock.export.names import CONTAINER_FORMATS, DEFAULT_OUTPUT, FORMATS
from verl_bootstrap.lock.export.pylock import render_pylock
from verl_bootstrap.lock.export.requirements import write_requirements
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import atomic_write

__all__ = ["DEFAULT_OUTPUT", "FORMATS", "export_lockfile"]


def export_lockfile(
    lock: Lockfile,
    fmt: str,
    output: Path,
    *,
    settings: IndexSettings,
    channels: Mapping[str, str],
    offline: bool = False,
) -> list[Path]:
    """Write `lock` in format `fmt` to `output` (a folder for requirements); return the files."""
    if fmt not in FORMATS:
        raise InputError(
            f"unknown export format {fmt!r}", hint=f"choose one of {', '.join(FORMATS)}"
        )
    if fmt in CONTAINER_FORMATS:
        raise InputError(
            f"{fmt} definitions are written by verl_bootstrap.lock.export.containerfmt"
        )
    entries = export_entries(lock, settings, offline=offline)
    if fmt == "requirements":
        return write_requirements(lock, entries, settings, output)
    if fmt == "pylock":
        _check_pylock_name(output)
        atomic_write(output, render_pylock(lock, entries))
        output.chmod(0o644)
    else:
        missing = sorted({p.channel for p in lock.conda} - set(channels))
        if missing:
            raise InputError(
                f"no URL for the conda channel(s) {', '.join(missing)} the lockfile names",
                hint="pass --channel URL (a channel whose last path part is that name)",
            )
        atomic_write(output, render_conda_lock(lock, entries, channels))
        output.chmod(0o644)
    return [output]


def _check_pylock_name(output: Path) -> None:
    """PEP 751: the file is pylock.toml or pylock.NAME.toml."""
    name = output.name
    if name != "pylock.toml" and not (name.startswith("pylock.") and name.endswith(".toml")):
        raise InputError(
            f"{output}: a PEP 751 lock file is named pylock.toml or pylock.NAME.toml",
            hint="pass --output DIR/pylock.toml",
        )
