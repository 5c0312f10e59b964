"""`bundle` (write an offline bundle from a lockfile) and `install --bundle` (install from one)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.lockinput import (
    lock_channels,
    lock_index_settings,
    lock_source_flags,
    named_lock,
    scratch_options,
)
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, InputError, Refused

if TYPE_CHECKING:
    from verl_bootstrap.bundle.manifest import Manifest
    from verl_bootstrap.bundle.unpack import Unpacked
    from verl_bootstrap.options import RunOptions
    from verl_bootstrap.profile.models import Profile

__all__ = ["bundle_options", "cmd_bundle", "flags_bundle"]


def flags_bundle(p: argparse.ArgumentParser) -> None:
    """bundle's flags."""
    p.add_argument("--lockfile", type=path_arg, help="the lockfile (default: the profile's)")
    p.add_argument("--profile", help="the profile whose committed lockfile to bundle")
    p.add_argument(
        "--cuda", help="the variant's lockfile (default: the profile's variant that has one)"
    )
    p.add_argument("--platform", default="linux-64", help="linux-64 (default) or linux-aarch64")
    p.add_argument("-o", "--output", type=path_arg, help="the archive (default: ./verl-bundle-…)")
    p.add_argument("--no-tool", action="store_true", help="leave out the tool's own wheels")
    lock_source_flags(p)


def cmd_bundle(ns: argparse.Namespace) -> int:
    """`bundle`: collect, check and write; print the size and the time it took."""
    from verl_bootstrap.bundle.create import BundleRequest, create_bundle
    from verl_bootstrap.paths import cache_root

    lock, path = named_lock(ns)
    options = scratch_options(ns, lock.profile, lock.cuda.variant)
    default = Path(f"verl-bundle-{lock.profile}-{lock.cuda.variant}-{lock.platform}.tar")
    request = BundleRequest(
        lockfile=path,
        output=(ns.output or default).absolute(),
        settings=lock_index_settings(lock, options),
        channels=lock_channels(lock, options),
        cache=cache_root() / "bundle",
        verl_source=ns.verl_source,
        with_tool=not ns.no_tool,
    )
    result = create_bundle(request)
    members = len(result.manifest.members) + 1
    if ns.json:
        emit_json({"schema": "verl-bootstrap.bundle/1", "path": str(result.path),
                   "bytes": result.size, "members": members,
                   "seconds": round(result.seconds, 2)})  # fmt: skip
        return EXIT_OK
    size = f"{result.size / (1 << 20):.1f} MiB"
    out(f"wrote {result.path}: {members} members, {size} in {result.seconds:.1f} s")
    name, profile = result.path.name, lock.profile
    out(f"install it with: verl-bootstrap --bundle {name} --profile {profile}")
    if not ns.no_tool:
        out(f"on a node without verl-bootstrap: tar -xf {name} install.sh && "
            f"sh install.sh {name} --profile {profile}")  # fmt: skip
    return EXIT_OK


def bundle_options(archive: Path, options: RunOptions) -> RunOptions:
    """`install --bundle PATH`: the host is checked against the manifest before anything is
    unpacked, every member is checked while it is unpacked; the options returned run a --locked
    install offline from it."""
    import time

    from verl_bootstrap.bundle.manifest import read_manifest
    from verl_bootstrap.bundle.unpack import unpack_bundle, unpack_folder
    from verl_bootstrap.paths import cache_root

    manifest = read_manifest(archive)
    profile = _check_fits(archive, manifest, options)
    started = time.monotonic()
    unpacked = unpack_bundle(archive, manifest, unpack_folder(cache_root(), manifest))
    err(f"note: {archive} checked and unpacked into {unpacked.root} in "
        f"{time.monotonic() - started:.1f} s ({len(manifest.members)} members, every sha256 "
        "matches its manifest)")  # fmt: skip
    return _bundle_options(options, unpacked, profile)


def _check_fits(archive: Path, manifest: Manifest, options: RunOptions) -> Profile:
    """Refuse a host the bundle does not fit, naming every reason (nothing is unpacked yet)."""
    from verl_bootstrap.bundle.unpack import misfits
    from verl_bootstrap.gpu.detect import detect_driver
    from verl_bootstrap.host.variants import choose_variant
    from verl_bootstrap.profile import load_profile

    profile = load_profile(options.profile)
    if profile.name != manifest.profile:
        raise Refused(f"{archive} holds a lock of profile {manifest.profile!r}, not "
                      f"{profile.name!r}", hint=f"pass --profile {manifest.profile}")  # fmt: skip
    variant, _ = choose_variant(profile, detect_driver(), options.cuda)
    problems = misfits(manifest, variant=variant, python_found=_python_found(manifest, options))
    if problems:
        raise Refused(
            f"{archive} does not fit this machine: {'; '.join(problems)}; nothing was unpacked",
            hint="make a bundle for this machine (`verl-bootstrap bundle --platform ...`, or "
            "lock with --cuda/--python/--glibc for it)",
        )
    return profile


def _python_found(manifest: Manifest, options: RunOptions) -> bool:
    """The venv backend needs the lock's Python on this machine (conda brings its own)."""
    from verl_bootstrap.host.interpreters import find_interpreter

    if (options.backend or manifest.backend) != "venv" or options.python is not None:
        return True
    major, minor = manifest.python.split(".")[:2]
    try:
        find_interpreter(f">={major}.{minor},<{major}.{int(minor) + 1}", manifest.python)
    except InputError:
        return False
    return True


def _bundle_options(options: RunOptions, unpacked: Unpacked, profile: Profile) -> RunOptions:
    """The run, locked to the bundle's lockfile, offline, with the bundle as its only index."""
    from dataclasses import replace

    url, links = unpacked.index_url, (str(unpacked.find_links),)
    site = replace(options.site, index_url=url, extra_index_urls=(), find_links=links, pytorch=())
    source, channel = unpacked.verl_source, unpacked.conda_channel
    return replace(
        options,
        backend=options.backend or unpacked.manifest.backend,
        channels=(channel.as_uri(),) if channel is not None else options.channels,
        lockfile=unpacked.lockfile,
        locked=not options.frozen,
        offline=True,
        site=site,
        indexes=tuple((name, url) for name in profile.indexes),
        verl_source=str(source) if source is not None else options.verl_source,
    )
