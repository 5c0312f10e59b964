"""Every path the tool uses: its home, an env's prefix and the files it keeps there.

One module so that a file the tool writes has one name, and a reader of any module can find
where things live. Also the one atomic write, since every file here is written that way.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import sysconfig
import tempfile
from collections.abc import Mapping
from pathlib import Path

from verl_bootstrap.errors import CannotWrite, Refused
from verl_bootstrap.probes import envowner
from verl_bootstrap.safety.shapes import inside

__all__ = [
    "LOCKFILES_DIR",
    "PROBES",
    "PROFILES_DIR",
    "PROJECT_LOCKFILES",
    "STATE_DIRNAME",
    "activation_file",
    "atomic_write",
    "built_wheels_dir",
    "bytecode_store",
    "cache_folder",
    "cache_root",
    "cannot_write",
    "checked_folder",
    "checkout_dir",
    "default_lockfile",
    "default_prefix",
    "env_lockfile",
    "file_sha256",
    "guard_file",
    "locked_requirements_file",
    "logs_dir",
    "not_private",
    "others_can_write",
    "override_file",
    "private_folder",
    "project_lockfile",
    "protected_file",
    "shared_path",
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
PROJECT_LOCKFILES = Path("lockfiles")  # a folder's own lockfiles, relative to it


def default_lockfile(profile: str, variant: str, platform: str, root: Path = LOCKFILES_DIR) -> Path:
    """Where one profile's lockfile for a variant and platform lives.

    Layout: lockfiles/PROFILE/VARIANT-PLATFORM.lock.yaml.
    """
    return root / profile / f"{variant}-{platform}.lock.yaml"


def project_lockfile(profile: str, variant: str, platform: str) -> Path:
    """The current folder's own lockfile of `profile` (a name or a YAML file, as the user gives
    it): where `lock` writes by default, and the first lockfile a run in that folder looks at."""
    return default_lockfile(Path(profile).stem, variant, platform, Path.cwd() / PROJECT_LOCKFILES)


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


def atomic_write(path: Path, text: str | bytes) -> None:
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


def _write_then_rename(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp: a new file (O_EXCL), never a link someone planted; the rename replaces one
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    data = text.encode() if isinstance(text, str) else text
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
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
    if info.st_uid != os.geteuid() or others_can_write(path, info):
        return "is another user's or writable by others"
    return None


def others_can_write(path: Path, info: os.stat_result) -> str | None:
    """Who besides its owner can write `path`, whose lstat is `info`, said for a message (None:
    no one): all (mode o+w), a group that is not the owner's private group, or a user or group
    its POSIX ACL names. The one rule of what private means, which each node of a cluster applies
    too: probes/envowner.py."""
    return envowner.others_can_write(path, info)


def private_folder(path: Path) -> str | None:
    """Make `path` and any missing parent (each 0700) unless there; why it is not private, or
    None. Private: this user's folder, no symlink, writable by no one else, and every folder on
    the way to it (as written and as resolved) root's or this user's and writable by no one
    else but for a sticky one (/tmp), whose entries only their owners can move. Checked after
    making it: a folder another user planted first in a sticky /tmp is theirs, and refused."""
    there = next(p for p in [path, *path.parents] if os.path.lexists(p))
    why = shared_path(there, own=there == path)  # nothing is made inside another's folder
    if why:
        return why
    try:
        _make_private(path)
    except OSError as exc:
        return f"cannot be made ({exc.strerror or exc})"
    return shared_path(path) or not_private(path, folder=True)


def cache_folder(*parts: str, environ: Mapping[str, str] | None = None) -> Path:
    """A folder of the user's cache (cache_root/PARTS), made private (private_folder), or
    Refused naming what another user could change: what a cache holds is code later runs use."""
    return checked_folder(cache_root(environ).joinpath(*parts))


def checked_folder(path: Path) -> Path:
    """`path`, made private (private_folder), or Refused naming what is not."""
    why = private_folder(path)
    if why is not None:
        raise Refused(
            f"the cache folder {path} is not private: {why}",
            hint="point VERL_BOOTSTRAP_CACHE at a folder only you can write (one you made, mode "
            "0700, e.g. `mkdir -m 700 DIR` on a node-local disk), or remove the one in the way",
        )
    return path


def _make_private(path: Path) -> None:
    missing = [p for p in [path, *path.parents] if not os.path.lexists(p)]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)


def shared_path(path: Path, *, own: bool = True) -> str | None:
    """Why another user could change what is at `path` (None: no one but root and this user):
    a folder on its way (as written, then as resolved) of another user's, or writable by others
    and not sticky; `path` itself must be this user's (with `own`; else root's will do)."""
    written = Path.cwd() / path  # as written (absolute), links not resolved
    for chain in (written, written.resolve()):
        for folder in [*reversed(chain.parents), chain]:
            why = _loose(folder, last=own and folder == chain)
            if why:
                return why
    return None


def _loose(folder: Path, *, last: bool) -> str | None:
    try:
        info = folder.lstat()
    except OSError as exc:
        return f"{folder} cannot be read ({exc.strerror or exc})"
    me = os.geteuid()
    if info.st_uid != me and (last or info.st_uid != 0):
        return f"{folder} belongs to another user (uid {info.st_uid})"
    if stat.S_ISLNK(info.st_mode):
        return None  # a link's own mode means nothing; its target's folders are checked too
    sticky = info.st_mode & stat.S_ISVTX and not last
    why = None if sticky else others_can_write(folder, info)
    if why:
        return f"{folder} is writable by others ({why})"
    return None
