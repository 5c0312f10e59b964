"""`install --bundle PATH`: the host is checked against the manifest before anything is unpacked,
every member is checked while it is unpacked, and the run is locked to the bundle's lockfile,
offline, with the bundle as its only index (its kernel wheels a wheelhouse searched before the
lab's)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from verl_bootstrap.errors import Refused
from verl_bootstrap.lock.bundle.manifest import Manifest, read_manifest
from verl_bootstrap.lock.bundle.unpack import Unpacked, misfits, unpack_bundle, unpack_folder
from verl_bootstrap.machine.host.interpreters import has_python
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import cache_folder
from verl_bootstrap.profile.models import Profile

__all__ = ["OpenedBundle", "open_bundle"]


@dataclass(frozen=True)
class OpenedBundle:
    """A bundle checked and unpacked, and the options that install from it."""

    archive: Path
    options: RunOptions
    unpacked: Unpacked
    seconds: float  # how long checking and unpacking took


def open_bundle(
    archive: Path,
    options: RunOptions,
    profile: Profile,
    variant: str,
    *,
    into: Path | None = None,
) -> OpenedBundle:
    """Check that the bundle fits this run of `profile` and `variant` (the plan's choices),
    unpack it (into the tool's cache, or `into`), and lock the run to it."""
    manifest = read_manifest(archive)
    check_fits(archive, manifest, options, profile, variant)
    started = time.monotonic()
    dest = unpack_folder(into or cache_folder(), manifest)
    unpacked = unpack_bundle(archive, manifest, dest)
    seconds = time.monotonic() - started
    return OpenedBundle(archive, bundle_options(options, unpacked, profile), unpacked, seconds)


def check_fits(
    archive: Path, manifest: Manifest, options: RunOptions, profile: Profile, variant: str
) -> None:
    """Refuse a host the bundle does not fit, naming every reason (nothing is unpacked yet)."""
    if profile.name != manifest.profile:
        raise Refused(
            f"{archive} holds a lock of profile {manifest.profile!r}, not {profile.name!r}",
            hint=f"pass --profile {manifest.profile}",
        )
    problems = misfits(manifest, variant=variant, python_found=_python_found(manifest, options))
    if problems:
        raise Refused(
            f"{archive} does not fit this machine: {'; '.join(w for _, w in problems)}; nothing "
            "was unpacked",
            hint="make a bundle for this machine (`verl-bootstrap bundle --platform ...`, or "
            "lock with --cuda/--python-version/--glibc for it)",
            data={"misfits": [field for field, _ in problems], "unpacked": False},
        )


def _python_found(manifest: Manifest, options: RunOptions) -> bool:
    """The venv backend needs the lock's Python on this machine (conda brings its own)."""
    if options.backend_for(None, manifest.backend) != "venv" or options.python is not None:
        return True
    return has_python(manifest.python)


def bundle_options(options: RunOptions, unpacked: Unpacked, profile: Profile) -> RunOptions:
    """The run, locked to the bundle's lockfile, offline, with the bundle as its only index."""
    url, links = unpacked.index_url, (str(unpacked.find_links),)
    site = replace(
        options.site,
        index_url=url,
        extra_index_urls=(),
        find_links=links,
        pytorch=(),
        bundle_kernels=unpacked.kernel_wheels,
    )
    source, channel = unpacked.verl_source, unpacked.conda_channel
    return replace(
        options,
        backend=options.backend_for(None, unpacked.manifest.backend),
        channels=(channel.as_uri(),) if channel is not None else options.channels,
        lockfile=unpacked.lockfile,
        locked=not options.frozen,
        offline=True,
        site=site,
        indexes=tuple((name, url) for name in profile.indexes),
        verl_source=str(source) if source is not None else options.verl_source,
    )
