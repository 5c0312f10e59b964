"""Wheels built from locked sdists, kept per user: a later env that locks the same sdist, built
with the same locked build env by the same Python, takes the wheel an earlier env built.

Only pure-Python wheels (`*-none-any`) from an isolated build are kept. What such a build gives
depends on the sdist (its sha256), its build dependencies (hash-locked, the build constraints
file) and the interpreter's version, which together are the key. A compiled wheel also depends on
the host's compilers and libraries, and a build without isolation on whatever the env holds: those
are built every time (a kernel's wheel has the wheelhouse for that).

The cache is read as untrusted: an entry is used only when it holds one wheel of the pure shape
whose sha256 is the one written beside it when it was kept, and when the folder, the entry and
both files are this user's and writable by no one else (the folder is made 0700, as the bytecode
store is); anything else is built again and the entry replaced (it is the tool's own folder).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path

from verl_bootstrap.paths import file_sha256, not_private, private_folder
from verl_bootstrap.safety.shapes import inside

__all__ = ["build_key", "keep", "kept_wheel"]

_PURE = re.compile(
    r"[A-Za-z0-9_.+]+-[A-Za-z0-9_.+!]+(-[0-9][A-Za-z0-9_.]*)?-[a-z0-9_.]+-none-any\.whl"
)
_SHA = re.compile(r"[0-9a-f]{64}")
_DIGEST = "sha256"


def build_key(sdist_sha256: str, build_constraints: bytes, python: str) -> str:
    """The key of one build: the sdist, its locked build env and the interpreter's X.Y.Z."""
    build = hashlib.sha256(build_constraints).hexdigest()  # bytes as written, whatever they hold
    body = {"sdist": sdist_sha256, "build": build, "python": python}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def kept_wheel(cache: Path, key: str) -> Path | None:
    """The wheel kept under `key`, checked against the sha256 written beside it; else None."""
    root = _private_root(cache, make=False)
    if root is None:
        return None
    entry = inside(root, key, what="build key")
    if not _mine(entry, folder=True):
        return None
    wheels = [p for p in entry.iterdir() if p.name != _DIGEST]
    digest_file = entry / _DIGEST
    if len(wheels) != 1 or not _PURE.fullmatch(wheels[0].name):
        return None
    wheel = wheels[0]
    if not _mine(wheel) or not _mine(digest_file):
        return None
    digest = digest_file.read_text(encoding="ascii", errors="replace").strip()
    if not _SHA.fullmatch(digest) or file_sha256(wheel) != digest:
        return None
    return wheel


def keep(cache: Path, key: str, wheel: Path) -> bool:
    """Keep a pure wheel under `key` (written aside, then renamed in); False when not pure, or
    when the cache's folder cannot be used (another user's, writable by others, not writable)."""
    if not _PURE.fullmatch(wheel.name):
        return False
    root = _private_root(cache, make=True)
    if root is None:
        return False
    entry = inside(root, key, what="build key")
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}.", dir=root))  # made 0700
    except OSError:
        return False
    try:
        shutil.copyfile(wheel, staging / wheel.name)
        (staging / _DIGEST).write_text(file_sha256(wheel) + "\n", encoding="ascii")
        for path in staging.iterdir():
            path.chmod(0o644)
        if entry.is_dir() and not entry.is_symlink():  # one that failed its check: replaced
            shutil.rmtree(entry)
        staging.rename(entry)
    except OSError:  # another run kept the same build first, or the cache cannot be written
        return False
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True


def _private_root(cache: Path, *, make: bool) -> Path | None:
    """The kept wheels' folder, made 0700: None when it is not there (and not to be made), a
    symlink, another user's, or writable by others. A kept wheel is code that later envs install
    on the strength of the sha256 beside it, so only this user may have written either."""
    root = cache / "built"
    why = private_folder(root) if make else not_private(root, folder=True)
    return root if why is None else None


def _mine(path: Path, *, folder: bool = False) -> bool:
    """`path` is this user's own folder or file (not a symlink), writable by no one else."""
    return not_private(path, folder=folder) is None
