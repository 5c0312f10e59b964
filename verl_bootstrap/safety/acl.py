"""Who besides its owner may write a file or folder: its mode bits and, where it has one, its
POSIX ACL.

With an extended ACL (`setfacl -m u:bob:rwx DIR`) the group bits of the mode are the ACL's mask,
not the owning group's permission: a folder 0770 of the owner's private group that grants bob
write through its ACL reads, from the mode alone, as private. The ACL is read as getfacl reads
it, from the `system.posix_acl_access` attribute (the kernel's binary form: a version word,
then one (tag, permission, id) entry each), and each entry counts only as far as the mask lets
it. A filesystem without POSIX ACLs has no such attribute and is judged by its mode.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

__all__ = ["ACL_ATTRIBUTE", "Writer", "writers"]

ACL_ATTRIBUTE = "system.posix_acl_access"
_VERSION = 2  # POSIX_ACL_XATTR_VERSION
_HEADER, _ENTRY = struct.Struct("<I"), struct.Struct("<HHI")
_USER, _GROUP_OBJ, _GROUP, _MASK = 0x02, 0x04, 0x08, 0x10  # the tags that name someone else
_WRITE = 0x02
_NO_ACL = frozenset({errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP})

Writer = tuple[str, int]  # ("user", uid) or ("group", gid): one who may write besides the owner


def writers(path: Path, info: os.stat_result) -> list[Writer] | None:
    """Who other than the owner and "others" may write `path` (whose lstat is `info`): the owning
    group and, through an ACL, named users and groups. None: its ACL cannot be read, which is
    taken as anyone (a check that cannot tell must not pass)."""
    try:
        raw = os.getxattr(path, ACL_ATTRIBUTE, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_ACL:
            return None
        return [("group", info.st_gid)] if info.st_mode & 0o020 else []
    entries = _entries(raw)
    if entries is None:
        return None
    return _writing(entries, info.st_gid)


def _entries(raw: bytes) -> list[tuple[int, int, int]] | None:
    """The (tag, permission, id) entries of an ACL attribute, or None when it is malformed."""
    body = raw[_HEADER.size :]
    if len(raw) < _HEADER.size or _HEADER.unpack_from(raw)[0] != _VERSION:
        return None
    if len(body) % _ENTRY.size:
        return None
    return [_ENTRY.unpack_from(body, at) for at in range(0, len(body), _ENTRY.size)]


def _writing(entries: list[tuple[int, int, int]], owning_gid: int) -> list[Writer]:
    """The entries whose write the mask lets through (no mask: a minimal ACL, nothing masked)."""
    mask = next((perm for tag, perm, _ in entries if tag == _MASK), 0x07)
    found: list[Writer] = []
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
