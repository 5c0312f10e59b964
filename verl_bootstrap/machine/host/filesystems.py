"""Shared filesystems: does the prefix lock hold across nodes, and are the caches remote?

The prefix lock is an flock. On a local disk it only needs to hold on this node. On a network
filesystem it holds across nodes only where the filesystem turns flock into a lock its server
keeps: NFS (unless mounted `local_lock=flock|all` or `nolock`), Lustre mounted with `flock`,
GPFS and CephFS. Elsewhere verl-bootstrap says it cannot promise it. Caches on a network
filesystem work but are slow, and uv cannot hard-link from them into a local env; a node-local
cache is offered instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LockScope",
    "Mount",
    "cache_dirs",
    "lock_scope",
    "mount_of",
    "parse_mountinfo",
    "read_mounts",
    "storage_notes",
]

NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "beegfs",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.sshfs",
        "fuse.cephfs",
        "fuse.juicefs",
        "panfs",
        "wekafs",
        "afs",
        "orangefs",
        "pvfs2",
        "9p",
    }
)
_CLUSTER_WIDE = frozenset({"gpfs", "ceph"})  # flock is a cluster lock there, always


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    mountpoint: str
    fstype: str
    source: str
    options: frozenset[str]  # per-mount and superblock options together

    @property
    def network(self) -> bool:
        """A filesystem other nodes may share."""
        return self.fstype in NETWORK_FS


@dataclass(frozen=True)
class LockScope:
    """Where an flock on this filesystem is seen: `local` (an unshared disk), `cluster`,
    `node` (only by this node), or `unknown`."""

    scope: str
    fstype: str
    reason: str

    @property
    def promised(self) -> bool:
        """The prefix lock keeps two builds apart wherever they run."""
        return self.scope in ("local", "cluster")


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts in /proc/self/mountinfo text (format: proc(5))."""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(rest) < 2:
            continue
        options = {*fields[5].split(","), *(rest[2].split(",") if len(rest) > 2 else ())}
        mounts.append(Mount(_unescape(fields[4]), rest[0], _unescape(rest[1]), frozenset(options)))
    return mounts


def read_mounts(root: Path = Path("/")) -> list[Mount]:
    """This process's mounts (none when /proc cannot be read)."""
    try:
        return parse_mountinfo((root / "proc/self/mountinfo").read_text(encoding="utf-8"))
    except OSError:
        return []


def mount_of(path: Path, mounts: Sequence[Mount]) -> Mount | None:
    """The mount holding `path` (links resolved where they exist), the last of equals winning."""
    target = Path(os.path.realpath(path))
    best: Mount | None = None
    for mount in mounts:
        point = Path(mount.mountpoint)
        inside = target == point or point in target.parents
        if inside and (best is None or len(mount.mountpoint) >= len(best.mountpoint)):
            best = mount
    return best


def lock_scope(mount: Mount | None) -> LockScope:
    """Whether an flock under `mount` is seen by other nodes."""
    if mount is None or not mount.network:
        fstype = mount.fstype if mount else "unknown"
        return LockScope("local", fstype, "a local filesystem: no other node writes here")
    if mount.fstype in ("nfs", "nfs4"):
        return _nfs_scope(mount)
    if mount.fstype == "lustre":
        return _lustre_scope(mount)
    if mount.fstype in _CLUSTER_WIDE:
        return LockScope("cluster", mount.fstype, f"{mount.fstype} keeps flocks cluster-wide")
    return LockScope("unknown", mount.fstype, f"{mount.fstype} may keep flocks on each node only")


def _nfs_scope(mount: Mount) -> LockScope:
    local = {"local_lock=flock", "local_lock=all", "nolock"} & mount.options
    if local:
        why = f"mounted with {sorted(local)[0]}: flocks stay on this node"
        return LockScope("node", mount.fstype, why)
    return LockScope("cluster", mount.fstype, "NFS turns flock into locks the server holds")


def _lustre_scope(mount: Mount) -> LockScope:
    if "flock" in mount.options:
        return LockScope("cluster", "lustre", "mounted with flock: locks are cluster-wide")
    if "localflock" in mount.options:
        return LockScope("node", "lustre", "mounted with localflock: flocks stay on this node")
    return LockScope("node", "lustre", "mounted without flock: flock is refused or node-local")


def cache_dirs(environ: Mapping[str, str]) -> dict[str, Path]:
    """The caches a run fills, by the variable that moves each."""
    home = Path(environ.get("HOME") or Path.home())
    cache = Path(environ.get("XDG_CACHE_HOME") or home / ".cache")
    return {
        "UV_CACHE_DIR": Path(environ.get("UV_CACHE_DIR") or cache / "uv"),
        "PIP_CACHE_DIR": Path(environ.get("PIP_CACHE_DIR") or cache / "pip"),
        "VERL_BOOTSTRAP_CACHE": Path(
            environ.get("VERL_BOOTSTRAP_CACHE") or cache / "verl-bootstrap"
        ),
    }


def storage_notes(
    prefix: Path, environ: Mapping[str, str] | None = None, *, mounts: Sequence[Mount] | None = None
) -> list[str]:
    """What the plan should say about a prefix or caches on a network filesystem."""
    env = dict(os.environ if environ is None else environ)
    table = read_mounts() if mounts is None else mounts
    notes = []
    scope = lock_scope(mount_of(prefix, table))
    if scope.scope != "local":
        notes.append(_prefix_note(prefix, scope))
    for variable, folder in cache_dirs(env).items():
        mount = mount_of(folder, table)
        if mount is not None and mount.network:
            notes.append(
                f"the cache {folder} is on {mount.fstype} (a network filesystem): installs read it "
                f"over the network and cannot hard-link from it; use a node-local cache only you "
                f"can write, e.g. {variable}=$(mktemp -d) (a new 0700 folder; a fixed name in "
                "/tmp another user could make first, and verl-bootstrap refuses a cache folder "
                "another user owns or can write) or the site config's `caches:`"
            )
    return notes


def _prefix_note(prefix: Path, scope: LockScope) -> str:
    if scope.promised:
        return (
            f"{prefix} is on a shared filesystem ({scope.fstype}; {scope.reason}): the env is "
            "built once, and a run on another node waits for this one (--wait) and reuses it"
        )
    return (
        f"{prefix} is on a shared filesystem ({scope.fstype}), and verl-bootstrap cannot promise "
        f"that its prefix lock holds across nodes ({scope.reason}): build it from one node only "
        "(`verl-bootstrap cluster install` does), never from two at once"
    )
