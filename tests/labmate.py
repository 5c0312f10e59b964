"""The lab mate: a second real user on this host, `nobody` (uid 65534), entered with setpriv (the
tests run as root, as CI does; the victim is the test's own user). What she does is done for
real: folders and files of hers, in a sticky folder everyone may write (as /tmp and /scratch
are), and real POSIX ACLs that the kernel enforces."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = [
    "NOBODY",
    "THEIRS",
    "as_nobody",
    "clear_acl",
    "need_two_users",
    "nobody_can_write_in",
    "plant_env",
    "set_acl",
    "sticky_folder",
]

NOBODY = 65534
THEIRS = "belongs to another user, nobody (uid 65534)"


def need_two_users() -> None:
    """Two real users need root (to become the second one with setpriv), as CI runs."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("run as root with setpriv (util-linux), as CI does: a second user is needed")


@contextmanager
def sticky_folder() -> Iterator[Path]:
    """A sticky folder everyone may write, as /tmp and /scratch are (removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix="vb-sticky-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def as_nobody(script: str, *, umask: str = "022") -> subprocess.CompletedProcess[str]:
    """`sh -c SCRIPT` as the lab mate (umask 022 unless said: her files are hers alone to
    write, so only their owner gives them away)."""
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run(
        [*argv, "sh", "-c", f"umask {umask}; {script}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def plant_env(prefix: Path, marker: Path) -> None:
    """What the lab mate makes at a purged prefix: a conda-looking env whose python and
    activation hook each write a line to `marker` (a file only the victim can write: a line
    there means her code ran as the victim)."""
    script = f"""
        mkdir -p {prefix}/.verl-bootstrap {prefix}/bin {prefix}/conda-meta \
            {prefix}/etc/conda/activate.d
        printf '#!/bin/sh\\necho python >> {marker}\\n' > {prefix}/bin/python
        chmod 755 {prefix}/bin/python
        printf 'echo hook >> {marker}\\n' > {prefix}/etc/conda/activate.d/x.sh
        printf '{{"version": 1}}\\n' > {prefix}/.verl-bootstrap/state.json
    """
    done = as_nobody(script)
    assert done.returncode == 0, done.stderr
    assert prefix.stat().st_uid == NOBODY and prefix.stat().st_mode & 0o777 == 0o755


_NAMED = {"u": 0x02, "g": 0x08}  # ACL_USER, ACL_GROUP: `nobody` and `nogroup` are both 65534
_NO_ID = 0xFFFFFFFF


def set_acl(path: Path, *entries: str) -> None:
    """`setfacl -m ENTRY,...` (Debian's `acl` package), else the same ACL written as setfacl
    writes it (the `system.posix_acl_access` attribute, entries in the kernel's order): a real
    ACL either way, which the kernel enforces (the tests check that the lab mate can, or
    cannot, write)."""
    if shutil.which("setfacl"):
        subprocess.run(["setfacl", "-m", ",".join(entries), str(path)], check=True)
        return
    mode = path.stat().st_mode
    own = {"u": (mode >> 6) & 7, "g": (mode >> 3) & 7, "o": mode & 7}
    named: list[tuple[int, int, int]] = []
    for entry in entries:
        kind, who, bits = entry.split(":")
        perm = sum(v for c, v in zip("rwx", (4, 2, 1), strict=True) if c in bits)
        if who:
            named.append((_NAMED[kind], perm, NOBODY))
        else:
            own[kind] = perm
    mask = own.get("m", own["g"] | max((p for _, p, _ in named), default=0))
    rows = [(0x01, own["u"], _NO_ID), *[r for r in named if r[0] == 0x02]]
    rows += [(0x04, own["g"], _NO_ID), *[r for r in named if r[0] == 0x08]]
    rows += [(0x10, mask, _NO_ID), (0x20, own["o"], _NO_ID)]
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *row) for row in rows)
    os.setxattr(path, "system.posix_acl_access", raw)


def clear_acl(path: Path, mode: int) -> None:
    """`setfacl -b`: the ACL removed (the attribute itself, without setfacl), then `mode`."""
    os.removexattr(path, "system.posix_acl_access")
    path.chmod(mode)


def nobody_can_write_in(folder: Path) -> bool:
    """The lab mate, for real, makes a file in `folder` (then it is removed)."""
    made = as_nobody(f"touch {folder}/hers").returncode == 0
    if made:
        (folder / "hers").unlink()
    return made
