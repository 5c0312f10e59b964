"""Whose an env is, and who besides its owner may write a file: the one rule, applied by the tool
on this host (run/state/ownership.py; the caches through paths.others_can_write) and by the node
report on each node of a cluster, before anything of the env runs there.

Standard library only, Python 3.8+, self-contained: the tool imports it, and sends it as source
to the nodes (probes/node_report.py runs it in a namespace of its own), so both judge by the same
lines.

An env is yours when its prefix, its `.verl-bootstrap/` and the files kept there, the folders on
the way to its python and its conda activation hooks, the python (a link: what it leads to, and
the folder that is in) and each hook are yours or root's and writable by no one else.

Writable by others: mode o+w; group write for a group other than the owner's private group (the
group of one user, named after them, that umask 002 systems give each user: their ~/.cache is then
0775 and still only theirs); or a user or group that a POSIX ACL lets write. With an extended ACL
(`setfacl -m u:bob:rwx DIR`) the mode's group bits are the ACL's mask, which hides whom it lets
write, so the ACL is read as getfacl reads it: the `system.posix_acl_access` attribute (a version
word, then one (tag, permission, id) entry each), each entry counting only as far as the mask
lets it. A filesystem without POSIX ACLs has no such attribute and is judged by its mode.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

STATE_DIRNAME = ".verl-bootstrap"
# what the tool keeps in the state folder and reads back: its record, the activation scripts, the
# env's lockfile
STATE_FILES = ("state.json", "activate", "activate.fish", "verl-bootstrap.lock.yaml")
# the folders on the way to what is run in an env, then the python, then the folders whose every
# file conda's activation sources
FOLDERS = ("bin", "etc", "etc/conda", "etc/conda/activate.d", "etc/conda/deactivate.d")
PYTHON = "bin/python"
HOOKS = ("etc/conda/activate.d", "etc/conda/deactivate.d")
MAX_LINKS = 40  # as the kernel's own limit on links followed in one path

ACL_ATTRIBUTE = "system.posix_acl_access"
_ACL_VERSION = 2  # POSIX_ACL_XATTR_VERSION
_HEADER, _ENTRY = struct.Struct("<I"), struct.Struct("<HHI")
_USER, _GROUP_OBJ, _GROUP, _MASK = 0x02, 0x04, 0x08, 0x10  # the tags that name someone else
_WRITE = 0x02
_NO_ACL = frozenset({errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP})


def env_parts(prefix: Path) -> Iterator[Path]:
    """The prefix, its state folder and files, the folders to its python and activation hooks,
    the python, then each hook (listed only when asked for, after its folder was judged)."""
    yield prefix
    state = prefix / STATE_DIRNAME
    yield state
    yield from (state / name for name in STATE_FILES)
    yield from (prefix / folder for folder in FOLDERS)
    yield prefix / PYTHON
    for folder in HOOKS:
        yield from _listed(prefix / folder)


def not_yours(prefix: Path) -> tuple[Path, str] | None:
    """The first part of the env at `prefix` that is not this user's, and why (None: every part
    is theirs or root's and writable by no one else, or nothing is there)."""
    for part in env_parts(prefix):
        why = foreign(part)
        if why is not None:
            return part, why
    return None


def someone_elses(prefix: Path) -> bool:
    """The prefix folder itself (or a link there, or the folder it leads to) is another user's."""
    try:
        owners = {prefix.lstat().st_uid, prefix.stat().st_uid}
    except OSError:
        return False
    return bool(owners - {os.geteuid(), 0})


def owner_of(uid: int) -> str:
    """A user as a message names them: their name and uid (the uid alone when unknown)."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def foreign(path: Path, hops: int = 0) -> str | None:
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


def others_can_write(path: Path, info: os.stat_result) -> str | None:
    """Who besides its owner can write `path`, whose lstat is `info`, said for a message (None:
    no one): all (mode o+w), a group not the owner's private group, or whom its ACL names."""
    mode = f"mode {stat.S_IMODE(info.st_mode):o}"
    if info.st_mode & 0o002:
        return mode
    found = acl_writers(path, info)
    if found is None:
        return "its ACL cannot be read"
    for kind, ident in found:
        if kind == "user" and ident not in (info.st_uid, 0):  # root writes anything anyway
            return f"its ACL lets user {_name(pwd.getpwuid, ident)} write"
        if kind == "group" and not private_group(info.st_uid, ident):
            named = ident != info.st_gid
            return f"its ACL lets group {_name(grp.getgrgid, ident)} write" if named else mode
    return None


def acl_writers(path: Path, info: os.stat_result) -> list[tuple[str, int]] | None:
    """Who other than the owner and "others" may write `path` (whose lstat is `info`): the owning
    group and, through an ACL, named users and groups, each ("user", uid) or ("group", gid).
    None: its ACL cannot be read, which is taken as anyone (a check that cannot tell must not
    pass)."""
    try:
        raw = os.getxattr(path, ACL_ATTRIBUTE, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_ACL:
            return None
        return [("group", info.st_gid)] if info.st_mode & 0o020 else []
    entries = _acl_entries(raw)
    return None if entries is None else _acl_writing(entries, info.st_gid)


def private_group(uid: int, gid: int) -> bool:
    """`gid` is `uid`'s own group: its primary group, named after it, with no other member."""
    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    if user.pw_gid != gid or group.gr_name != user.pw_name or set(group.gr_mem) - {user.pw_name}:
        return False
    return not any(u.pw_gid == gid and u.pw_uid != uid for u in pwd.getpwall())


def _listed(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:  # not there (or not a folder): nothing in it is sourced
        return []


def _link(path: Path, hops: int) -> str | None:
    """A link of this user's (or root's): its target, and the folder the target is in."""
    if hops >= MAX_LINKS:
        return "is a link that leads through too many links"
    target = path.parent / os.readlink(path)  # noqa: PTH115 (Path.readlink: Python 3.9+)
    for hop in (Path(os.path.realpath(target.parent)), target):
        why = foreign(hop, hops + 1)
        if why is not None:
            return f"links to {hop}, which {why}"
    return None


def _acl_entries(raw: bytes) -> list[tuple[int, int, int]] | None:
    """The (tag, permission, id) entries of an ACL attribute, or None when it is malformed."""
    body = raw[_HEADER.size :]
    if len(raw) < _HEADER.size or _HEADER.unpack_from(raw)[0] != _ACL_VERSION:
        return None
    if len(body) % _ENTRY.size:
        return None
    return [_ENTRY.unpack_from(body, at) for at in range(0, len(body), _ENTRY.size)]


def _acl_writing(entries: list[tuple[int, int, int]], owning_gid: int) -> list[tuple[str, int]]:
    """The entries whose write the mask lets through (no mask: a minimal ACL, nothing masked)."""
    mask = next((perm for tag, perm, _ in entries if tag == _MASK), 0x07)
    found: list[tuple[str, int]] = []
    for tag, perm, ident in entries:
        if not perm & mask & _WRITE:
            continue
        if tag == _USER:
            found.append(("user", ident))
        elif tag == _GROUP_OBJ:
            found.append(("group", owning_gid))
        elif tag == _GROUP:
            found.append(("group", ident))
    return found


def _name(lookup: Callable[[int], Any], ident: int) -> str:
    """A user's or group's name with its id (the id alone when the system knows no name)."""
    try:
        return f"{lookup(ident)[0]} ({ident})"
    except KeyError:
        return str(ident)
