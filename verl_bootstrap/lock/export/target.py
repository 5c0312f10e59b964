"""Where `export` writes, decided before anything is written: stdout or a path (a user's file is
never replaced unasked), the files a dry run names, and a one-file format's text for stdout."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.export.container import LOCKFILE_NAME
from verl_bootstrap.lock.export.names import CONTAINER_FORMATS, DEFAULT_OUTPUT
from verl_bootstrap.lock.export.write import export_lockfile
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.machine.host.indexes import IndexSettings

__all__ = ["STDOUT_FORMATS", "export_output", "export_text", "planned_files", "refuse_overwrite"]

STDOUT_FORMATS = ("pylock", "conda-lock")  # one file each: stdout unless --output names one
_STDOUT = Path("-")


def export_output(fmt: str, output: Path | None, *, json_report: bool) -> Path | None:
    """The path `fmt` is written to (--output, else the format's default); None: stdout."""
    to_stdout = fmt in STDOUT_FORMATS and output in (None, _STDOUT)
    if output == _STDOUT and not to_stdout:
        raise InputError(f"--output -: {fmt} writes several files", hint="name a path")
    if to_stdout and json_report:
        raise InputError("--json reports the files written: pass --output FILE with it")
    return None if to_stdout else output or DEFAULT_OUTPUT[fmt]


def refuse_overwrite(output: Path, *, force: bool) -> None:
    """Files the user has are theirs: export replaces one only when told to."""
    if output.exists() and not force:
        raise InputError(
            f"{output} is already there; export does not overwrite it",
            hint="pass --force to replace it, or --output another path",
        )


def planned_files(
    lock: Lockfile, fmt: str, output: Path | None, *, bundle: Path | None
) -> list[str]:
    """The files an export would write ("-": stdout), as `export --dry-run` names them."""
    if output is None:
        return ["-"]
    if fmt in CONTAINER_FORMATS and bundle is None:
        folder = output.parent.absolute()
        return [str(output), str(folder / LOCKFILE_NAME), str(folder / "verl_bootstrap-*.whl")]
    if fmt == "requirements":
        hashed = [s.id for s in lock.stages if s.kind != "install-verl"]  # as write_requirements
        return [str(output / f"{n:02d}-{stage}.txt") for n, stage in enumerate(hashed, start=1)]
    return [str(output)]


def export_text(
    lock: Lockfile,
    fmt: str,
    *,
    settings: IndexSettings,
    channels: Mapping[str, str],
    offline: bool,
) -> str:
    """A one-file format's text, written in a scratch folder (its checks are the file's)."""
    with tempfile.TemporaryDirectory(prefix="verl-bootstrap-export-") as scratch:
        written = export_lockfile(
            lock,
            fmt,
            Path(scratch) / DEFAULT_OUTPUT[fmt].name,
            settings=settings,
            channels=channels,
            offline=offline,
        )
        return written[0].read_text(encoding="utf-8")
