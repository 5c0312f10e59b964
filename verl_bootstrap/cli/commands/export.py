"""`export --format F`: a lockfile in another tool's format (conda-lock, PEP 751, hashed
requirements, a container definition); where it goes is verl_bootstrap.lock.export.target's."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import (
    bundle_flag,
    cuda_flag,
    dry_run_flag,
    lock_source_flags,
    lockfile_flag,
    output_beside,
    platform_flag,
    profile_flag,
)
from verl_bootstrap.cli.optionsbuilder import named_lock, scratch_options
from verl_bootstrap.cli.output import emit_json, out, path_arg
from verl_bootstrap.errors import EXIT_OK

if TYPE_CHECKING:
    from verl_bootstrap.lock.format import Lockfile
    from verl_bootstrap.machine.host.indexes import IndexSettings

__all__ = ["cmd_export", "flags_export"]


def flags_export(export: argparse.ArgumentParser) -> None:
    """export's flags."""
    from verl_bootstrap.lock.export.names import FORMATS

    export.add_argument("--format", required=True, choices=FORMATS, help="the tool's format")
    lockfile_flag(export, "the lockfile (default: the profile's)")
    profile_flag(
        export,
        "the profile whose lockfile to export: this folder's (lockfiles/, as `lock` writes "
        "it), else the committed one",
    )
    cuda_flag(export, "the variant's lockfile (default: the profile's variant that has one)")
    platform_flag(export)
    export.add_argument(
        "-o",
        "--output",
        type=path_arg,
        help="pylock, conda-lock: a file, or - for stdout (the default); requirements: a folder "
        "(default requirements/); apptainer, dockerfile: the definition file (default verl.def, "
        "Dockerfile), its lockfile and wheel beside it",
    )
    export.add_argument("--force", action="store_true", help="overwrite files that are there")
    bundle_flag(export, "apptainer/dockerfile: build from this bundle (no network)", metavar=None)
    export.add_argument("--base", help="apptainer/dockerfile: the base image (default: python)")
    dry_run_flag(export, "name the files it would write; change nothing")
    lock_source_flags(export)


def cmd_export(ns: argparse.Namespace) -> int:
    """`export --format F`: the lockfile in conda-lock, PEP 751 or hashed-requirements form."""
    from verl_bootstrap.lock.export.names import CONTAINER_FORMATS
    from verl_bootstrap.lock.export.target import export_output, refuse_overwrite
    from verl_bootstrap.lock.export.write import export_lockfile

    lock, path = named_lock(ns)
    output = export_output(ns.format, ns.output, json_report=ns.json)
    if output is not None:
        refuse_overwrite(output_beside(output), force=ns.force)
    if ns.dry_run:
        return _export_dry_run(ns, lock, path, output)
    if ns.format in CONTAINER_FORMATS and output is not None:  # never stdout (one file each)
        from verl_bootstrap.lock.export.containerfmt import write_container

        written = write_container(lock, path, ns.format, output, bundle=ns.bundle, base=ns.base)
        return _report_export(ns, path, written)
    settings, channels = _origins(ns, lock)
    if output is None:  # the file's text is the output, as `uv export` does
        from verl_bootstrap.lock.export.target import export_text

        text = export_text(
            lock, ns.format, settings=settings, channels=channels, offline=ns.offline
        )
        out(text.rstrip("\n"))
        return EXIT_OK
    written = export_lockfile(
        lock, ns.format, output, settings=settings, channels=channels, offline=ns.offline
    )
    return _report_export(ns, path, written)


def _origins(ns: argparse.Namespace, lock: Lockfile) -> tuple[IndexSettings, dict[str, str]]:
    """The lock's indexes and conda channels as this machine and the user's flags reach them."""
    from verl_bootstrap.lock.making.origins import lock_channels, lock_index_settings

    options = scratch_options(ns, lock.profile, lock.cuda.variant)
    return lock_index_settings(lock, options), dict(lock_channels(lock, options))


def _export_dry_run(
    ns: argparse.Namespace, lock: Lockfile, lockfile: Path, output: Path | None
) -> int:
    """`export --dry-run`: the files it would write (None: stdout), from which lockfile."""
    from verl_bootstrap.lock.export.target import planned_files

    files = planned_files(lock, ns.format, output, bundle=ns.bundle)
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.export/1",
                "dry_run": True,
                "lockfile": str(lockfile),
                "files": files,
            }
        )
        return EXIT_OK
    for file in files:
        what = "print it to stdout" if file == "-" else f"write {file}"
        out(f"would {what} ({ns.format}, from {lockfile})")
    return EXIT_OK


def _report_export(ns: argparse.Namespace, path: Path, written: list[Path]) -> int:
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.export/1",
                "lockfile": str(path),
                "files": [str(w) for w in written],
            }
        )
    else:
        for file in written:
            out(f"wrote {file}")
    return EXIT_OK
