"""Every path the tool uses: its home, an env's prefix and the files it keeps there.

One module so that a file the tool writes has one name, and a reader of any module can find
where things live. Also the one atomic write, since every file here is written that way.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import sysconfig
import tempfile
from collections.abc import Mapping
from pathlib import Path

from verl_bootstrap.errors import CannotWrite
from verl_bootstrap.safety.shapes import inside

__all__ = [
    "LOCKFILES_DIR",
    "PROBES",
    "PROFILES_DIR",
    "STATE_DIRNAME",
    "activation_file",
    "atomic_write",
    "built_wheels_dir",
    "bytecode_store",
    "cache_root",
    "cannot_write",
    "checkout_dir",
    "default_lockfile",
    "default_prefix",
    "env_lockfile",
    "file_sha256",
    "guard_file",
    "locked_requirements_file",
    "logs_dir",
    "override_file",
    "protected_file",
    "state_dir",
    "state_file",
    "tool_home",
    "update_lockfile",
]

STATE_DIRNAME = ".verl-bootstrap"
ENV_LOCK_NAME = "verl-bootstrap.lock.yaml"
PROBES = Path(__file__).resolve().parent / "probes"  # scripts run inside a target env


def _shipped(name: str) -> Path:
    """A folder shipped with the tool: beside the package in a checkout, else the installed copy.

    A wheel carries profiles/ and lockfiles/ as data files under <prefix>/share/verl-bootstrap.
    """
    checkout = Path(__file__).resolve().parents[1] / name
    if checkout.is_dir():
        return checkout
    return Path(sysconfig.get_path("data")) / "share" / "verl-bootstrap" / name


PROFILES_DIR = _shipped("profiles")
LOCKFILES_DIR = _shipped("lockfiles")


def default_lockfile(profile: str, variant: str, platform: str, root: Path = LOCKFILES_DIR) -> Path:
    """Where one profile's lockfile for a variant and platform lives.

    Layout: lockfiles/PROFILE/VARIANT-PLATFORM.lock.yaml.
    """
    return root / profile / f"{variant}-{platform}.lock.yaml"


def tool_home(environ: Mapping[str, str] | None = None) -> Path:
    """The tool's own folder for this user: $VERL_BOOTSTRAP_HOME, else ~/.verl-bootstrap."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())  # onboarding acts for the user in `environ`
    return Path(env.get("VERL_BOOTSTRAP_HOME") or home / STATE_DIRNAME)


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """The tool's download cache (conda packages, checked sdists): $VERL_BOOTSTRAP_CACHE, else the
    user cache folder."""
    env = os.environ if environ is None else environ
    if env.get("VERL_BOOTSTRAP_CACHE"):
        return Path(env["VERL_BOOTSTRAP_CACHE"]).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verl-bootstrap"


def bytecode_store(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user store of compiled modules (verify/bytecode.py): safe to delete."""
    return cache_root(environ) / "bytecode"


def default_prefix(profile: str) -> Path:
    """Where envs go without --prefix: the tool home's envs/PROFILE."""
    return tool_home() / "envs" / profile


def state_dir(prefix: Path) -> Path:
    """Everything the tool keeps about an env lives inside it."""
    return prefix / STATE_DIRNAME


def checkout_dir(prefix: Path) -> Path:
    """verl's git checkout (installed editable, so users edit it in place)."""
    return prefix / "src" / "verl"


def state_file(prefix: Path) -> Path:
    return state_dir(prefix) / "state.json"


def guard_file(prefix: Path) -> Path:
    """The file whose exclusive lock keeps two runs on one prefix apart."""
    return state_dir(prefix) / "lock"


def logs_dir(prefix: Path) -> Path:
    return state_dir(prefix) / "logs"


def env_lockfile(prefix: Path) -> Path:
    """The lockfile of what the env holds, written by the record-lock step."""
    return state_dir(prefix) / ENV_LOCK_NAME


def update_lockfile(prefix: Path, digest: str) -> Path:
    """A lockfile `update` resolved and applied, named by its content's digest (hex)."""
    return state_dir(prefix) / "updates" / f"{digest}.lock.yaml"


def activation_file(prefix: Path, shell: str) -> Path:
    return state_dir(prefix) / ("activate.fish" if shell == "fish" else "activate")


def protected_file(prefix: Path, stage_id: str) -> Path:
    """The protected-package pins a stage resolved under (constraints for later stages)."""
    return state_dir(prefix) / "protected" / f"{stage_id}.txt"


def override_file(prefix: Path, stage_id: str) -> Path:
    return state_dir(prefix) / "overrides" / f"{stage_id}.txt"


def locked_requirements_file(prefix: Path, stage_id: str) -> Path:
    """The hash-pinned requirements a --locked install gives one stage."""
    return state_dir(prefix) / "locked" / f"{stage_id}.txt"


def locked_build_file(prefix: Path, stage_id: str) -> Path:
    """The locked build dependencies (with sha256) a --locked install builds one stage's sources
    with."""
    return state_dir(prefix) / "locked" / f"{stage_id}.build.txt"


def built_wheels_dir(prefix: Path, stage_id: str) -> Path:
    """Wheels a --locked install built from locked sdists, kept for the record (it is removed
    and made again: the stage id, from the lockfile, must name a folder inside)."""
    return inside(state_dir(prefix) / "wheels", stage_id, what="stage id")


def kernel_dir(prefix: Path, stage_id: str) -> Path:
    """A kernel stage's wheels (built here, or downloaded from a release or an index)."""
    return state_dir(prefix) / "kernels" / stage_id


def default_wheelhouse(environ: Mapping[str, str] | None = None) -> Path:
    """The lab wheelhouse when the site config names none: the tool home's wheelhouse/."""
    return tool_home(environ) / "wheelhouse"


def atomic_write(path: Path, text: str) -> None:
    """Write through a temp file in the same folder, then rename: readers never see half a file.

    A full disk, a read-only folder or a missing permission is a CannotWrite naming the file;
    the file it would have replaced is left as it was."""
    try:
        _write_then_rename(path, text)
    except OSError as exc:
        raise cannot_write(path, exc) from None


def atomic_copy(source: Path, dest: Path, mode: int = 0o644) -> None:
    """Copy `source` to `dest` through a temp file in `dest`'s folder, then rename: a symlink
    at `dest` is replaced, never written through onto its target."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        Path(tmp).chmod(mode)
        Path(tmp).replace(dest)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise cannot_write(dest, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cannot_write(path: Path, exc: OSError) -> CannotWrite:
    """The error for a file or folder of the tool's that the machine would not let it write."""
    return CannotWrite(
        f"cannot write {path}: {exc.strerror or exc}",
        hint=_WRITE_HINTS.get(exc.errno or 0, "check the folder's permissions")
        + "; a re-run resumes where this one stopped",
    )


_WRITE_HINTS = {
    errno.ENOSPC: "free space on that filesystem (or move the env with --prefix)",
    errno.EDQUOT: "your disk quota is used up; free some space",
    errno.EROFS: "that filesystem is mounted read-only; choose another --prefix",
}


def _write_then_rename(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: Path) -> str:
    """A file's sha256, read in blocks: wheels and bundles can be gigabytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def not_private(path: Path, *, folder: bool) -> str | None:
    """Why `path` may not be trusted as this user's own cache entry (None: it may): not there,
    a symlink or of the other kind, another user's, or writable by others. What a per-user cache
    holds (a pyc, a kept wheel) is code later envs run, so only this user may have written it."""
    try:
        info = path.lstat()
    except OSError:
        return "is not there"
    if not (stat.S_ISDIR(info.st_mode) if folder else stat.S_ISREG(info.st_mode)):
        return f"is not a {'folder' if folder else 'file'} (a symlink or another kind)"
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return "is another user's or writable by others"
    return None


def private_folder(path: Path) -> str | None:
    """Make `path` (0700, its parents as usual) unless it exists; why it is not private, or None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        return f"cannot be made ({exc.strerror or exc})"
    return not_private(path, folder=True)
