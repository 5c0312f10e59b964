"""`bundle` (write an offline bundle from a lockfile) and `install --bundle` (install from one)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import (
    cuda_flag,
    dry_run_flag,
    lock_source_flags,
    lockfile_flag,
    output_beside,
    platform_flag,
    profile_flag,
)
from verl_bootstrap.cli.optionsbuilder import named_lock, scratch_options
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK

if TYPE_CHECKING:
    from verl_bootstrap.lock.format import Lockfile

__all__ = ["cmd_bundle", "flags_bundle"]


def flags_bundle(p: argparse.ArgumentParser) -> None:
    """bundle's flags."""
    lockfile_flag(p, "the lockfile (default: the profile's)")
    profile_flag(
        p,
        "the profile whose lockfile to bundle: this folder's (lockfiles/), else the committed one",
    )
    cuda_flag(p, "the variant's lockfile (default: the profile's variant that has one)")
    platform_flag(p)
    p.add_argument("-o", "--output", type=path_arg, help="the archive (default: ./verl-bundle-…)")
    p.add_argument("--no-tool", action="store_true", help="leave out the tool's own wheels")
    dry_run_flag(p, "name the archive and what it would hold; change nothing")
    lock_source_flags(p)


def cmd_bundle(ns: argparse.Namespace) -> int:
    """`bundle`: collect, check and write; print the size and the time it took."""
    from verl_bootstrap.kernels.host import open_wheelhouse
    from verl_bootstrap.lock.bundle.bundlecreate import BundleRequest, create_bundle
    from verl_bootstrap.lock.making.origins import lock_channels, lock_index_settings
    from verl_bootstrap.paths import cache_root

    lock, path = named_lock(ns)
    default = Path(f"verl-bundle-{lock.profile}-{lock.cuda.variant}-{lock.platform}.tar")
    output_beside(ns.output or default)
    if ns.dry_run:
        return _dry_run(ns, lock, path, (ns.output or default).absolute())
    options = scratch_options(ns, lock.profile, lock.cuda.variant)
    request = BundleRequest(
        lockfile=path,
        output=(ns.output or default).absolute(),
        settings=lock_index_settings(lock, options),
        channels=lock_channels(lock, options),
        cache=cache_root() / "bundle",  # checked private when first used
        verl_source=ns.verl_source,
        with_tool=not ns.no_tool,
        wheelhouse=open_wheelhouse(options.site.wheelhouse, os.environ),
    )
    result = create_bundle(request)
    members = len(result.manifest.members) + 1
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.bundle/1",
                "path": str(result.path),
                "bytes": result.size,
                "members": members,
                "seconds": round(result.seconds, 2),
                "kernel_wheels": [m.path for m in result.manifest.members if m.role == "kernel"],
                "notes": list(result.notes),
            }
        )
        return EXIT_OK
    for note in result.notes:
        err(f"note: {note}")
    size = f"{result.size / (1 << 20):.1f} MiB"
    out(f"wrote {result.path}: {members} members, {size} in {result.seconds:.1f} s")
    name, profile = result.path.name, lock.profile
    out(f"install it with: verl-bootstrap --bundle {name} --profile {profile}")
    if not ns.no_tool:
        out(
            f"on a node without verl-bootstrap: tar -xf {name} install.sh && "
            f"sh install.sh {name} --profile {profile}"
        )
    return EXIT_OK


def _dry_run(ns: argparse.Namespace, lock: Lockfile, lockfile: Path, archive: Path) -> int:
    """`bundle --dry-run`: the archive it would write and what would go in; nothing fetched."""
    artifacts = sum(len(s.distributions) + len(s.build) for s in lock.stages) + len(lock.conda)
    verl = f"verl {lock.verl.ref} ({lock.verl.kind})"
    kernels = sum(1 for s in lock.stages for d in s.distributions if d.kernel_wheel)
    tool = "" if ns.no_tool else ", the tool's own wheels"
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.bundle/1",
                "dry_run": True,
                "path": str(archive),
                "lockfile": str(lockfile),
                "packages": artifacts,
                "kernel_wheels": kernels,
                "with_tool": not ns.no_tool,
            }
        )
        return EXIT_OK
    wheels = f", {kernels} prebuilt kernel wheel(s)" if kernels else ""
    out(f"would write {archive} from {lockfile}: {artifacts} locked packages{wheels}, {verl}{tool}")
    return EXIT_OK
