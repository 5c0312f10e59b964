"""`bundle`: one archive that installs a lockfile's env on a node with no network.

Layout (the manifest first, then the tool's wheels, so install.sh reads only the start):
  manifest.json       what the bundle holds (sha256 of every member) and the host it fits
  tool/*.whl          verl-bootstrap's wheel and its dependencies' wheels (uv included)
  install.sh          for a node without the tool: installs it from tool/, then runs it
  lockfile/NAME       the lockfile
  artifacts/*         every locked artifact, and the build requirements of the locked sdists
  kernels/*.whl       the prebuilt kernel wheels the lockfile records (`kernel_wheel`)
  conda/SUBDIR/*      the conda part's packages (conda locks), a channel the node indexes
  verl/verl.gitbundle verl's checkout at the locked commit (git locks; an sdist lock's verl
                      sdist is an artifact)
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from verl_bootstrap import __version__
from verl_bootstrap.errors import InputError
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse
from verl_bootstrap.lock.bundle.bundleconda import collect_conda, conda_arcname
from verl_bootstrap.lock.bundle.bundlekernels import collect_kernel_wheels, kernel_arcname
from verl_bootstrap.lock.bundle.bundlesources import tool_wheels, verl_git_bundle, verl_pyproject
from verl_bootstrap.lock.bundle.collect import Collected, collect_locked, resolve_build
from verl_bootstrap.lock.bundle.manifest import MANIFEST_NAME, Manifest, Member, Role, dump_manifest
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.buildlock import build_requirements, sdist_pyproject
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import cannot_write, checked_folder, file_sha256

__all__ = ["BundleRequest", "BundleResult", "create_bundle", "install_script"]


@dataclass(frozen=True)
class BundleRequest:
    """What to bundle, and from where."""

    lockfile: Path
    output: Path
    settings: IndexSettings
    cache: Path
    verl_source: str | None = None  # a clone with the locked commit (default: the lock's repo)
    with_tool: bool = True
    channels: Mapping[str, str] = field(default_factory=dict)  # the lock's channel names -> URLs
    wheelhouse: AnyWheelhouse | None = None  # the lab's: kernel wheels recorded with no URL


@dataclass(frozen=True)
class BundleResult:
    """A written bundle."""

    path: Path
    manifest: Manifest
    size: int
    seconds: float
    notes: tuple[str, ...] = ()  # what was left out, and why


@dataclass(frozen=True)
class _File:
    arcname: str
    path: Path
    role: Role
    name: str | None = None


def create_bundle(request: BundleRequest) -> BundleResult:
    """Collect, check and write the bundle (atomically: a failed run leaves no archive)."""
    started = time.monotonic()
    lock = read_lockfile(request.lockfile)
    partial = _claim(request.output)  # a place it cannot write is said before any download
    try:
        with tempfile.TemporaryDirectory(prefix="verl-bundle-") as tmp:
            files, notes = _gather(lock, request, Path(tmp))
            manifest = _manifest(lock, request.lockfile, files)
            _write(partial, manifest, files)
        partial.replace(request.output)
    except OSError as exc:
        raise cannot_write(request.output, exc) from None
    finally:
        partial.unlink(missing_ok=True)  # whatever stopped the run: no .part is left
    size = request.output.stat().st_size
    return BundleResult(request.output, manifest, size, time.monotonic() - started, tuple(notes))


def _gather(lock: Lockfile, request: BundleRequest, work: Path) -> tuple[list[_File], list[str]]:
    cache, settings = checked_folder(request.cache), request.settings
    files = [_File(f"lockfile/{request.lockfile.name}", request.lockfile, "lockfile")]
    # first: a recorded wheel that is another file now refuses the bundle before the rest is got
    kernels, notes = collect_kernel_wheels(lock, cache=cache, house=request.wheelhouse, work=work)
    files += [_File(kernel_arcname(k.path.name), k.path, "kernel", k.name) for k in kernels]
    if request.with_tool:
        tool = tool_wheels(lock, settings, cache=cache, work=work)
        files += [_File(f"tool/{c.path.name}", c.path, "tool", c.name) for c in tool]
        files.append(_File("install.sh", _script(lock, work), "script"))
    locked = collect_locked(lock, request.lockfile, settings, cache=cache, work=work)
    files += _artifacts(locked, "artifact")
    conda = collect_conda(lock.conda, request.channels, cache)
    files += [_File(conda_arcname(c.package), c.path, "conda", c.package.name) for c in conda]
    pyprojects = [(c.path.name, sdist_pyproject(c.path)) for c in locked if _is_sdist(c)]
    if lock.verl.kind == "git" and lock.verl.commit:
        source = verl_git_bundle(
            request.verl_source or lock.verl.repo,
            lock.verl.commit,
            work / "verl.gitbundle",
            work=work,
        )
        files.append(_File("verl/verl.gitbundle", source, "verl-source"))
        pyprojects.append(("verl", verl_pyproject(work / "verl.git", lock.verl.commit, work=work)))
    if pyprojects:
        build = resolve_build(
            build_requirements(pyprojects), lock, settings, cache=cache, work=work / "build"
        )
        have = {f.arcname for f in files}
        files += [f for f in _artifacts(build, "build") if f.arcname not in have]
    return files, notes


def _is_sdist(collected: Collected) -> bool:
    return not collected.path.name.endswith(".whl")


def _artifacts(collected: list[Collected], role: Role) -> list[_File]:
    unique = {c.path.name: c for c in collected}
    return [_File(f"artifacts/{n}", c.path, role, c.name) for n, c in sorted(unique.items())]


def install_script(lock: Lockfile) -> str:
    """install.sh for this lock: the tool's Python is the lock's (its wheels were chosen for it)."""
    text = (
        resources.files("verl_bootstrap.lock.bundle")
        .joinpath("install.sh")
        .read_text(encoding="utf-8")
    )
    return text.replace("@PYTHON@", f"python{lock.python}").replace("@VERSION@", __version__)


def _script(lock: Lockfile, work: Path) -> Path:
    path = work / "install.sh"
    path.write_text(install_script(lock), encoding="utf-8")
    return path


def _manifest(lock: Lockfile, lockfile: Path, files: list[_File]) -> Manifest:
    members = tuple(
        Member(
            path=f.arcname,
            sha256=file_sha256(f.path),
            size=f.path.stat().st_size,
            role=f.role,
            name=f.name,
        )
        for f in files
    )
    return Manifest(
        created_by=f"verl-bootstrap {__version__}",
        lockfile=files[0].arcname,
        lockfile_sha256=members[0].sha256,
        profile=lock.profile,
        variant=lock.cuda.variant,
        platform=lock.platform,
        python=lock.python,
        glibc=lock.cuda.virtual_packages.get("__glibc"),
        backend=lock.backend,
        verl_kind=lock.verl.kind,
        verl_commit=lock.verl.commit,
        members=members,
    )


def _claim(output: Path) -> Path:
    """The `.part` file the archive is written to beside `output`, created now (empty)."""
    if output.is_dir():
        raise InputError(f"--output {output} is a folder", hint="name the archive file to write")
    partial = output.with_name(f".{output.name}.part")
    try:
        partial.unlink(missing_ok=True)  # the tool's own, from a run that was killed
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        os.close(fd)
    except OSError as exc:
        raise InputError(
            f"--output {output}: cannot write there ({exc.strerror or exc})",
            hint="choose a folder you can write to",
        ) from None
    return partial


def _write(partial: Path, manifest: Manifest, files: list[_File]) -> None:
    """The tar: the manifest first, then the tool's wheels and the rest; fixed owners and times."""
    order = sorted(files, key=lambda f: (f.role not in ("tool", "script"), f.arcname))
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        body = dump_manifest(manifest)
        tar.addfile(_info(MANIFEST_NAME, len(body)), io.BytesIO(body))
        for file in order:
            with file.path.open("rb") as handle:
                tar.addfile(_info(file.arcname, file.path.stat().st_size), handle)


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info
