"""A bundle's kernel wheels: the prebuilt wheel its lockfile records for each kernel stage
(`kernel_wheel`), carried under kernels/ so that an install from the bundle takes that very file,
with no download and no compiler.

Making the bundle, a record with a URL is downloaded (once, into the tool's cache by sha256) and
checked against the sha256 the lockfile records: another file is refused and no bundle is
written. A record with no URL (an env's record of a wheel from the lab wheelhouse, or built and
published there) is taken from the lab wheelhouse by sha256 when it lists it.

On the node, after every member was checked against the manifest, each kernel member must be a
wheel the bundle's lockfile records, with that sha256; the folder then gets a wheelhouse index
that lists them with their recorded build keys. A `--locked` install searches that read-only
wheelhouse by sha256 before the lab's (verl_bootstrap/lock/installing/kernels.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError, Refused, StepFailed
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse
from verl_bootstrap.kernels.wheelhouse import INDEX_NAME, entry_for, index_text
from verl_bootstrap.lock.bundle.collect import Collected, artifact_cache
from verl_bootstrap.lock.bundle.manifest import Manifest
from verl_bootstrap.lock.format import KernelWheel, Lockfile
from verl_bootstrap.paths import atomic_write, file_sha256

__all__ = [
    "KERNELS_FOLDER",
    "collect_kernel_wheels",
    "index_kernel_wheels",
    "kernel_arcname",
    "recorded_kernel_wheels",
]

KERNELS_FOLDER = "kernels"


def kernel_arcname(file: str) -> str:
    """A kernel wheel's path in the bundle."""
    return f"{KERNELS_FOLDER}/{file}"


def recorded_kernel_wheels(lock: Lockfile) -> list[tuple[str, KernelWheel]]:
    """(distribution, wheel) for each kernel wheel the lockfile records, once per file; two
    records of one file name with different sha256 are refused (one bundle path each)."""
    found: dict[str, tuple[str, KernelWheel]] = {}
    for stage in lock.stages:
        for dist in stage.distributions:
            wheel = dist.kernel_wheel
            if wheel is None:
                continue
            seen = found.setdefault(wheel.file, (canonicalize_name(dist.name), wheel))
            if seen[1].sha256 != wheel.sha256:
                raise InputError(
                    f"the lockfile records {wheel.file} twice, with sha256 {seen[1].sha256} and "
                    f"{wheel.sha256}",
                    hint="lock again (`verl-bootstrap lock`): a file name has one sha256",
                )
    return list(found.values())


def collect_kernel_wheels(
    lock: Lockfile, *, cache: Path, house: AnyWheelhouse | None, work: Path
) -> tuple[list[Collected], list[str]]:
    """Each kernel wheel the lockfile records, checked by sha256 in the tool's cache; and a note
    for each one that has no URL and is not in the lab wheelhouse `house` (not carried: an
    install from the bundle builds the locked sdist)."""
    collected, notes = [], []
    for name, wheel in recorded_kernel_wheels(lock):
        dest = artifact_cache(cache, wheel.sha256, wheel.file)
        if dest.is_file() and file_sha256(dest) == wheel.sha256:
            pass  # a bundle made before downloaded it
        elif wheel.url:
            _download_checked(name, wheel, wheel.url, dest)
        elif not _from_house(name, wheel, house, dest, work):
            where = f"the lab wheelhouse {house.shown()}" if house else "any wheelhouse"
            notes.append(
                f"{name}: the lockfile's {wheel.file} (sha256 {wheel.sha256[:12]}…) has no URL "
                f"and is not in {where}: not carried (an install from the bundle builds the "
                "locked sdist)"
            )
            continue
        collected.append(Collected(path=dest, name=name, sha256=wheel.sha256))
    return collected, notes


def _download_checked(name: str, wheel: KernelWheel, url: str, dest: Path) -> None:
    try:
        download(url, dest, timeout=600)
    except (OSError, HttpError) as exc:
        raise StepFailed(
            f"the {name} kernel wheel the lockfile records could not be downloaded from {url} "
            f"({exc}); no bundle was written",
            hint="bundle on a machine that reaches it, or lock again where it is served",
        ) from None
    found = file_sha256(dest)
    if found != wheel.sha256:
        dest.unlink()  # the cache keeps files by the sha256 they have
        raise Refused(
            f"{url} serves {wheel.file} with sha256 {found}, not the {wheel.sha256} the lockfile "
            f"records for {name}; no bundle was written",
            hint="the file changed since the lock was made: check where it comes from, then "
            "lock again (`verl-bootstrap lock`)",
        )


def _from_house(
    name: str, wheel: KernelWheel, house: AnyWheelhouse | None, dest: Path, work: Path
) -> bool:
    """Copy the recorded wheel from the lab wheelhouse into `dest` (False: it does not list it)."""
    entry = next((e for e in house.entries() if e.sha256 == wheel.sha256), None) if house else None
    if house is None or entry is None:
        return False
    path = house.local_wheel(entry.file, work / "kernel-wheels")
    if file_sha256(path) != wheel.sha256:
        raise Refused(
            f"{entry.file} in the lab wheelhouse {house.shown()} does not have the sha256 its "
            f"index lists ({wheel.sha256}), which the lockfile records for {name}; no bundle "
            "was written",
            hint="run `verl-bootstrap wheelhouse check` and replace the file",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.part")
    try:
        shutil.copyfile(path, partial)
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    return True


def index_kernel_wheels(root: Path, manifest: Manifest, lock: Lockfile, archive: Path) -> None:
    """Check the unpacked kernel members against the bundle's lockfile, then list them in a
    wheelhouse index under `root`/kernels (the index is the tool's own, never a member)."""
    members = [m for m in manifest.members if m.role == "kernel"]
    if not members:
        return
    recorded = {kernel_arcname(w.file): w for _, w in recorded_kernel_wheels(lock)}
    entries = []
    for member in members:
        wheel = recorded.get(member.path)
        if wheel is None or wheel.sha256 != member.sha256:
            raise Refused(
                f"{archive} holds {member.path} (sha256 {member.sha256}), which is not a kernel "
                "wheel its lockfile records; nothing was installed",
                hint="copy the bundle again from where it was made, or make a new one",
            )
        key = BuildKey.from_mapping(wheel.key.model_dump())
        entries.append(entry_for(wheel.file, wheel.sha256, key))
    atomic_write(root / KERNELS_FOLDER / INDEX_NAME, index_text(entries))
