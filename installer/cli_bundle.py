"""`bundle` (write an offline bundle from a lockfile) and `install --bundle` (install from one)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from installer.bundle.manifest import Manifest
    from installer.bundle.unpack import Unpacked
    from installer.options import RunOptions
    from installer.profile.models import Profile

__all__ = ["cmd_bundle", "cmd_install_bundle", "register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `bundle` to `sub`."""
    from installer.cli_lock import _source_flags  # noqa: PLC0415 - the same source flags as lock

    p = sub.add_parser("bundle", help="write one archive that installs a lockfile with no network")
    p.add_argument("--lockfile", type=Path, help="the lockfile (default: the profile's)")
    p.add_argument("--profile", help="the profile whose committed lockfile to bundle")
    p.add_argument("--cuda", default="cpu", help="the variant's lockfile (default cpu)")
    p.add_argument("--platform", default="linux-64", help="linux-64 (default) or linux-aarch64")
    p.add_argument("-o", "--output", type=Path, help="the archive (default: ./verl-bundle-….tar)")
    p.add_argument("--no-tool", action="store_true", help="leave out the tool's own wheels")
    _source_flags(p)
    p.set_defaults(handler=cmd_bundle)


def cmd_bundle(ns: argparse.Namespace) -> int:
    """`bundle`: collect, check and write; print the size and the time it took."""
    from installer.bundle.create import BundleRequest, create_bundle  # noqa: PLC0415
    from installer.cli import emit_json, out  # noqa: PLC0415
    from installer.cli_lock import _export_lock, _options, _settings  # noqa: PLC0415
    from installer.envs.conda import default_cache_root  # noqa: PLC0415
    from installer.errors import EXIT_OK  # noqa: PLC0415

    lock, path = _export_lock(ns)
    options = _options(ns, lock.profile, lock.cuda.variant)
    default = Path(f"verl-bundle-{lock.profile}-{lock.cuda.variant}-{lock.platform}.tar")
    result = create_bundle(
        BundleRequest(
            lockfile=path,
            output=(ns.output or default).absolute(),
            settings=_settings(lock, options),
            cache=default_cache_root() / "bundle",
            verl_source=ns.verl_source,
            with_tool=not ns.no_tool,
        )
    )
    members = len(result.manifest.members) + 1
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.bundle/1",
                "path": str(result.path),
                "bytes": result.size,
                "members": members,
                "seconds": round(result.seconds, 2),
            }
        )
    else:
        out(
            f"wrote {result.path}: {members} members, {_mib(result.size)} in {result.seconds:.1f} s"
        )
        out(f"install it with: verl-bootstrap --bundle {result.path.name} --profile {lock.profile}")
        out(
            f"on a node without verl-bootstrap: tar -xf {result.path.name} install.sh && "
            f"sh install.sh {result.path.name} --profile {lock.profile}"
        )
    return EXIT_OK


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def cmd_install_bundle(ns: argparse.Namespace) -> int:
    """`install --bundle PATH`: the host is checked against the manifest before anything is
    unpacked, every member is checked while it is unpacked, then a --locked install runs offline
    from it."""
    import time  # noqa: PLC0415

    from installer.bundle.manifest import read_manifest  # noqa: PLC0415
    from installer.bundle.unpack import unpack_bundle, unpack_folder  # noqa: PLC0415
    from installer.cli import err  # noqa: PLC0415
    from installer.clicmd import install_with, run_options  # noqa: PLC0415
    from installer.envs.conda import default_cache_root  # noqa: PLC0415

    manifest = read_manifest(ns.bundle)
    ns.profile = ns.profile or manifest.profile
    options = run_options(ns)
    profile = _check_fits(ns.bundle, manifest, options)
    started = time.monotonic()
    unpacked = unpack_bundle(ns.bundle, manifest, unpack_folder(default_cache_root(), manifest))
    err(f"note: {ns.bundle} checked and unpacked into {unpacked.root} in "
        f"{time.monotonic() - started:.1f} s ({len(manifest.members)} members, every sha256 "
        "matches its manifest)")  # fmt: skip
    return install_with(ns, _bundle_options(options, unpacked, profile))


def _check_fits(archive: Path, manifest: Manifest, options: RunOptions) -> Profile:
    """Refuse a host the bundle does not fit, naming every reason (nothing is unpacked yet)."""
    from installer.bundle.unpack import misfits  # noqa: PLC0415
    from installer.errors import Refused  # noqa: PLC0415
    from installer.install import detect_host_driver  # noqa: PLC0415
    from installer.profile import load_profile  # noqa: PLC0415
    from installer.variants import choose_variant  # noqa: PLC0415

    profile = load_profile(options.profile)
    if profile.name != manifest.profile:
        raise Refused(
            f"{archive} holds a lock of profile {manifest.profile!r}, not {profile.name!r}",
            hint=f"pass --profile {manifest.profile}",
        )
    variant, _ = choose_variant(profile, detect_host_driver(), options.cuda)
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
    from installer.errors import InputError  # noqa: PLC0415
    from installer.interpreters import find_interpreter  # noqa: PLC0415

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
    from dataclasses import replace  # noqa: PLC0415

    url = unpacked.index_url
    links = (str(unpacked.find_links),)
    site = replace(options.site, index_url=url, extra_index_urls=(), find_links=links, pytorch=())
    source = unpacked.verl_source
    return replace(
        options,
        lockfile=unpacked.lockfile,
        locked=not options.frozen,
        offline=True,
        site=site,
        indexes=tuple((name, url) for name in profile.indexes),
        verl_source=str(source) if source is not None else options.verl_source,
    )
