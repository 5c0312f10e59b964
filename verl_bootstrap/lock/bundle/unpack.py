"""Open a bundle on the node: check the host fits (from the manifest alone), then unpack every
member while hashing it; a member that is not listed, not a plain file (a link, a device, a
sparse file), not its listed size (checked before a byte is read) or sha256, or missing refuses
the whole bundle before anything is installed. A member's `.part` file never outlives an error.

The unpacked artifacts are served to the installer as a local find-links folder, so a `--locked`
install looks them up and checks their hashes exactly as it does on a network index; the conda
packages (conda locks) are checked against the lockfile as well and indexed as a local channel,
and so are the kernel wheels, listed as a read-only wheelhouse the locked kernel stages search
by sha256 (lock/bundle/bundlekernels.py).
"""

from __future__ import annotations

import hashlib
import os
import platform as _platform
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from packaging.version import Version

from verl_bootstrap import proc
from verl_bootstrap.errors import Refused
from verl_bootstrap.lock.bundle.bundleconda import CONDA_FOLDER, check_conda_files, index_channel
from verl_bootstrap.lock.bundle.bundlekernels import KERNELS_FOLDER, index_kernel_wheels
from verl_bootstrap.lock.bundle.manifest import (
    MANIFEST_NAME,
    Manifest,
    Member,
    dump_manifest,
    regular_member,
)
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.platforms import host_platform

__all__ = ["Unpacked", "misfits", "unpack_bundle", "unpack_folder"]

_BLOCK = 1 << 20


@dataclass(frozen=True)
class Unpacked:
    """A checked, unpacked bundle."""

    root: Path
    manifest: Manifest

    @property
    def lockfile(self) -> Path:
        """The bundle's lockfile."""
        return self.root / self.manifest.lockfile

    @property
    def index_url(self) -> str:
        """The run's index: an empty local one (the artifacts are in `find_links`)."""
        return (self.root / "simple").as_uri()

    @property
    def find_links(self) -> Path:
        """The folder of the bundle's artifacts (locked ones and build requirements)."""
        return self.root / "artifacts"

    @property
    def conda_channel(self) -> Path | None:
        """The local channel of the lock's conda packages (conda locks), checked and indexed."""
        channel = self.root / CONDA_FOLDER
        return channel if channel.is_dir() else None

    @property
    def kernel_wheels(self) -> Path | None:
        """The wheelhouse of the kernel wheels the lockfile records (checked and indexed)."""
        if not any(m.role == "kernel" for m in self.manifest.members):
            return None
        return self.root / KERNELS_FOLDER

    @property
    def verl_source(self) -> Path | None:
        """A bare clone of verl at the locked commit (git locks)."""
        clone = self.root / "verl.git"
        return clone if clone.is_dir() else None


def misfits(manifest: Manifest, *, variant: str, python_found: bool) -> list[tuple[str, str]]:
    """Why this host cannot take the bundle, as (the manifest's field, why) (empty: it fits)."""
    problems = []
    host = host_platform()
    if manifest.platform != host:
        problems.append(("platform", f"it is for {manifest.platform}; this machine is {host}"))
    libc, have = _platform.libc_ver()
    if manifest.glibc and libc == "glibc" and have and Version(have) < Version(manifest.glibc):
        problems.append(("glibc", f"it needs glibc >= {manifest.glibc}; this machine has {have}"))
    if manifest.variant != variant:
        why = f"it is for CUDA variant {manifest.variant}; this run chose {variant}"
        problems.append(("variant", why))
    if not python_found:
        why = f"it needs Python {manifest.python}, which this machine does not have"
        problems.append(("python", why))
    return problems


def unpack_bundle(archive: Path, manifest: Manifest, dest: Path) -> Unpacked:
    """Unpack and check every member into `dest` (the same folder for the same bundle: what an
    earlier run left there is checked again like the rest)."""
    expected = manifest.by_path()
    try:
        _unpack_members(archive, expected, dest)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        raise Refused(
            f"{archive} could not be read to its end ({exc}); nothing was installed",
            hint="it is damaged or was cut short: copy it again from where it was made",
            data={"problem": "cut-short", "members": []},
        ) from None
    if expected:
        lacks = sorted(expected)
        raise _tampered(archive, f"it lacks {', '.join(lacks)}", "missing", lacks)
    _write_index(dest)
    _index_against_lock(dest, manifest, archive)
    if manifest.verl_kind == "git":
        bundle = dest / "verl" / "verl.gitbundle"
        shutil.rmtree(dest / "verl.git", ignore_errors=True)  # our own clone of an earlier run
        proc.run(
            ["git", "clone", "--bare", "--quiet", str(bundle), str(dest / "verl.git")],
            log_path=dest / "unpack.log",
        )
    return Unpacked(root=dest, manifest=manifest)


def _unpack_members(archive: Path, expected: dict[str, Member], dest: Path) -> None:
    """Each member checked, in the archive's order; what is found is popped off `expected`."""
    with tarfile.open(archive, mode="r|") as tar:
        for number, info in enumerate(tar):
            if number == 0 and info.name == MANIFEST_NAME:
                continue
            member = expected.pop(info.name, None)
            if member is None or not regular_member(info):
                why = f"{info.name!r} is not a plain file its manifest lists"
                raise _tampered(archive, why, "not-listed", [info.name])
            if info.size != member.size:
                why = f"{member.path} is {info.size} bytes, its manifest says {member.size}"
                raise _tampered(archive, why, "size", [member.path])
            _extract(tar, info, member, dest / member.path, archive)


def _index_against_lock(dest: Path, manifest: Manifest, archive: Path) -> None:
    """Check the conda packages and the kernel wheels against the bundle's lockfile too, then
    index them (a local channel; a read-only wheelhouse)."""
    roles = {m.role for m in manifest.members}
    if not roles & {"conda", "kernel"}:
        return
    lock = read_lockfile(dest / manifest.lockfile)
    if "conda" in roles:
        check_conda_files(dest / CONDA_FOLDER, lock.conda, archive)
        index_channel(dest / CONDA_FOLDER)
    index_kernel_wheels(dest, manifest, lock, archive)


def _extract(
    tar: tarfile.TarFile, info: tarfile.TarInfo, member: Member, to: Path, archive: Path
) -> None:
    """Write the member beside its place, check it, then move it in; a file already there with
    the same bytes is kept as it is, so an installer's cache of it (by path and time) still hits."""
    handle = tar.extractfile(info)
    assert handle is not None  # a regular file
    to.parent.mkdir(parents=True, exist_ok=True)
    part = to.with_name(f".{to.name}.{os.getpid()}.part")
    try:
        digest = _copy(handle, part)
    except BaseException:
        part.unlink(missing_ok=True)  # a read cut short, a full disk, an interrupt
        raise
    if digest != member.sha256:
        part.unlink()
        why = f"{member.path} has sha256 {digest}, its manifest says {member.sha256}"
        raise _tampered(archive, why, "sha256", [member.path])
    if to.is_file() and to.stat().st_size == member.size and file_sha256(to) == digest:
        part.unlink()
    else:
        part.replace(to)


def _copy(source: IO[bytes], to: Path) -> str:
    digest = hashlib.sha256()
    with to.open("wb") as out:
        for block in iter(lambda: source.read(_BLOCK), b""):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def unpack_folder(cache: Path, manifest: Manifest) -> Path:
    """Where a bundle is unpacked: in the tool's cache, one folder per manifest, kept after the
    install so the next env from the same bundle finds its files where uv's cache knows them."""
    return cache / "bundles" / hashlib.sha256(dump_manifest(manifest)).hexdigest()[:16]


def _tampered(archive: Path, why: str, problem: str, members: list[str]) -> Refused:
    """`problem` (missing, not-listed, size, sha256) of `members`, for the refusal's data."""
    return Refused(
        f"{archive} was altered after it was made: {why}; nothing was installed",
        hint="copy the bundle again from where it was made, or make a new one",
        data={"problem": problem, "members": members},
    )


def _write_index(root: Path) -> None:
    """An empty PEP 503 index: the run's only index, so nothing is asked of any other.

    The artifacts are served from a flat folder (find-links) instead: an installer filters the
    files of an index by upload time (the lock's cutoff), which a local page cannot give.
    """
    (root / "simple").mkdir(parents=True, exist_ok=True)
    (root / "simple" / "index.html").write_text(_page(""), encoding="utf-8")


def _page(body: str) -> str:
    return f"<!DOCTYPE html><html><body>\n{body}</body></html>\n"
