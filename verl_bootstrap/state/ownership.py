"""Whose an env is. The tool uses the env at a prefix (runs, activates, verifies, plans, installs,
updates, removes, lists or describes it) only when the prefix, its `.verl-bootstrap/` and the
files it runs or reads there are this user's or root's and writable by no one else: the rule the
caches follow (paths.not_private), ACLs included.

A /tmp or /scratch prefix is purged now and then, and anyone may make the folder again: with a
`bin/python`, a conda activation hook and a `state.json` of theirs, it would otherwise run their
code as you (`run NAME`), or name the program your next `plan` runs (a recorded `--python`).
The folders above the prefix are not held to this: an env in a lab's group-writable folder stays
usable, and a lab mate who moves it away and puts a folder or link of theirs there is refused,
since the prefix is then theirs.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import Refused
from verl_bootstrap.paths import (
    activation_file,
    env_lockfile,
    others_can_write,
    state_dir,
    state_file,
)

__all__ = ["Foreign", "check_file", "check_yours", "not_yours", "owner_of", "someone_elses"]

# the folders on the way to what the tool runs or reads in an env, then what it runs or reads
_FOLDERS = ("bin", "etc", "etc/conda", "etc/conda/activate.d", "etc/conda/deactivate.d")
_HOOKS = ("etc/conda/activate.d", "etc/conda/deactivate.d")  # activation sources each file
_MAX_LINKS = 40  # as the kernel's own limit on links followed in one path


@dataclass(frozen=True)
class Foreign:
    """The first part of an env that is not this user's: which, why, and whether the prefix
    folder itself is another user's (made again after a purge, say)."""

    prefix: Path
    part: Path
    why: str  # "belongs to another user, nobody (uid 65534)", "is writable by others (mode 777)"
    theirs: bool

    @property
    def reason(self) -> str:
        return f"{self.part} {self.why}"

    @property
    def hint(self) -> str:
        if self.theirs:
            return (
                "another user made that folder (a purged /tmp or /scratch prefix made again, "
                "say): build your own env under another --prefix; `verl-bootstrap envs prune` "
                "forgets this one"
            )
        return (
            "an env is used only when its folder and what the tool runs or reads there are yours "
            f"(or root's) and no one else can write them: make {self.part} so (`chmod go-w`, "
            "`setfacl -b`), or delete it if you did not put it there"
        )


def not_yours(prefix: Path) -> Foreign | None:
    """Why the env at `prefix` is not this user's to use (None: it is, or nothing is there): its
    folder, then what inside it the tool runs or reads, first found first."""
    for part in _parts(prefix):
        why = _foreign(part, 0)
        if why is not None:
            return Foreign(prefix, part, why, theirs=someone_elses(prefix))
    return None


def check_yours(prefix: Path, *, command: str = "") -> None:
    """Refused (exit 3), naming the part and its owner, unless the env at `prefix` is this
    user's (not_yours)."""
    found = not_yours(prefix)
    if found is not None:
        said = f"{command}: " if command else ""
        raise Refused(f"{said}the env at {prefix} is not yours: {found.reason}", hint=found.hint)


def check_file(path: Path, *, what: str) -> None:
    """Refused unless the file at `path` and its folder are this user's or root's and writable
    by no one else: a file the tool reads as the user's own (a state file, the list of envs)."""
    for part in (path.parent, path):
        why = _foreign(part, 0)
        if why is not None:
            raise Refused(
                f"the {what} {path} is not yours: {part} {why}",
                hint="the tool reads it only when only you (or root) can have written it: "
                "delete it if you did not put it there, or make it so (`chmod go-w`)",
            )


def owner_of(uid: int) -> str:
    """A user as a message names them: their name and uid (the uid alone when unknown)."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def someone_elses(prefix: Path) -> bool:
    """The prefix folder itself (or a link there, or the folder it leads to) is another user's."""
    try:
        owners = {prefix.lstat().st_uid, prefix.stat().st_uid}
    except OSError:
        return False
    return bool(owners - {os.geteuid(), 0})


def _parts(prefix: Path) -> Iterator[Path]:
    """The prefix, its state folder and files, the folders to its python and activation hooks,
    the python, then each hook (listed only once its folder was found to be yours)."""
    yield prefix
    yield state_dir(prefix)
    yield state_file(prefix)
    yield activation_file(prefix, "bash")
    yield activation_file(prefix, "fish")
    yield env_lockfile(prefix)
    yield from (prefix / folder for folder in _FOLDERS)
    yield prefix / "bin" / "python"
    for folder in _HOOKS:
        yield from _entries(prefix / folder)


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:  # not there (or not a folder): nothing in it is sourced
        return []


def _foreign(path: Path, hops: int) -> str | None:
    """Why `path` is not this user's (None: it is, or it is not there): another user's (a link
    counts as its own owner's, then as its target's and the target's folder's), or writable by
    others."""
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None  # not there (a prefix that is a file is said as such), or out of your reach
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if info.st_uid not in {os.geteuid(), 0}:
        return f"belongs to another user, {owner_of(info.st_uid)}"
    if stat.S_ISLNK(info.st_mode):
        return _link(path, hops)
    why = others_can_write(path, info)
    return None if why is None else f"is writable by others ({why})"


def _link(path: Path, hops: int) -> str | None:
    """A link of this user's (or root's): its target, and the folder the target is in."""
    if hops >= _MAX_LINKS:
        return "is a link that leads through too many links"
    target = path.parent / path.readlink()
    for hop in (Path(os.path.realpath(target.parent)), target):
        why = _foreign(hop, hops + 1)
        if why is not None:
            return f"links to {hop}, which {why}"
    return None
