"""Runs INSIDE the target env's interpreter: restores or harvests bytecode from the user's store.

uv compiles no bytecode at install time, so an env's first import compiles every module it
touches. The store keeps each compiled module once per user, keyed by the interpreter's cache tag
and magic number and by the sha256 of the source, as a checked-hash pyc (PEP 552): Python hashes
the source on import and uses the pyc only for exactly the source it was compiled from, whatever
the file's mtime (uv links or copies files, so mtimes say nothing).

- restore: for each source whose sha256 (from its dist's RECORD, or hashed for the given trees)
  is in the store and that has no pyc yet, hard-link the stored pyc into place (a copy across
  filesystems). An existing pyc is never replaced; a stale one is simply recompiled by Python.
- harvest: for each source whose pyc Python wrote (a timestamp pyc valid for the source as it
  is), store it with its header rewritten to a checked-hash one. Nothing is compiled.

This must run in the env's own Python: the hash in a checked pyc and the cache tag are its own.
Standard library only. Never follows a symlink inside the store; never raises for one file.
Usage: python -I bytecode.py '<json request: {"mode", "store", "trees"}>'
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import importlib.util
import json
import os
import stat
import sys
import tempfile
import time

MARK = "@@BYTECODE@@"
CHECKED_HASH = (0b11).to_bytes(4, "little")  # flags: hash-based, check the source
TIMESTAMP = (0).to_bytes(4, "little")
MAGIC = importlib.util.MAGIC_NUMBER
TAG = f"{sys.implementation.cache_tag}-{MAGIC.hex()}"


def _sha256_hex(record_value):
    """RECORD's `sha256=<urlsafe base64, no padding>` value as hex."""
    return base64.urlsafe_b64decode(record_value + "=" * (-len(record_value) % 4)).hex()


def _record_sources():
    """(source path, sha256 hex from RECORD) for every .py file of every installed dist.

    RECORD is read directly: importlib.metadata builds a Path per file, several times slower."""
    seen = set()
    for folder in sys.path:
        for record in _records(folder):
            for relative, digest in _record_rows(record):
                path = os.path.normpath(os.path.join(folder, relative))
                if path not in seen:
                    seen.add(path)
                    yield path, _sha256_hex(digest)


def _records(folder):
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:  # a zip or a missing entry of sys.path
        return []
    found = (os.path.join(folder, n, "RECORD") for n in names if n.endswith(".dist-info"))
    return [record for record in found if os.path.isfile(record)]


def _record_rows(record):
    """(path, urlsafe b64 sha256) of each .py row of one RECORD file."""
    with open(record, newline="", encoding="utf-8") as handle:
        for row in csv.reader(handle):
            if len(row) >= 2 and row[0].endswith(".py") and row[1].startswith("sha256="):
                yield row[0], row[1][len("sha256=") :]


def _tree_sources(root):
    """(source path, None) for every .py file under `root`, hidden folders left out."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name), None


def _pyc_path(source):
    """Where Python's import writes the source's pyc (importlib.util.cache_from_source without
    its per-call overhead; no pycache prefix, no optimisation level)."""
    folder, name = os.path.split(source)
    return os.path.join(folder, "__pycache__", f"{name[:-3]}.{sys.implementation.cache_tag}.pyc")


def _file_sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


class Store:
    """One interpreter's folder of the store: TAG/<sha256[:2]>/<sha256>.pyc, no symlinks.

    Every folder is opened (never followed if a symlink) and checked through its descriptor:
    this user's, writable by no one else; what is read, linked or written inside it goes
    through that descriptor, so a folder swapped for a link after the check is never used."""

    def __init__(self, root):
        self.root = _open_private(root)
        self.folders = {}  # name under the root ("TAG", "TAG/ab") -> its descriptor, or None

    def folder(self, key, create=False):
        """The descriptor of the folder holding `key`'s entry (None: not there yet)."""
        tag = self._sub(self.root, TAG, TAG, create)
        return None if tag is None else self._sub(tag, key[:2], f"{TAG}/{key[:2]}", create)

    def _sub(self, parent, name, label, create):
        if self.folders.get(label) is None:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent)
            try:
                self.folders[label] = _open_private(name, parent)
            except FileNotFoundError:
                return None  # not cached: a harvest may make it later
        return self.folders[label]

    def lookup(self, key):
        """(folder descriptor, name) of the stored pyc for `key` when it is a plain file of this
        user's that no one else can write, else None."""
        folder = self.folder(key)
        name = key + ".pyc"
        if folder is None:
            return None
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return (folder, name) if _own_file(info) else None

    def put(self, key, data):
        """Store `data` under `key` atomically: a new temp file then a rename (two harvests may
        race; each rename installs a whole file, and the rename replaces a planted symlink)."""
        folder = self.folder(key, create=True)
        if folder is None:
            raise OSError(f"the store's folder for {key[:2]} cannot be made")
        tmp = f".tmp-{os.getpid()}-{os.urandom(6).hex()}.pyc"
        # read-only: an env's hard link to it must not write through
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444, dir_fd=folder
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, key + ".pyc", src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise


def _open_private(name, parent=None):
    """A folder's descriptor, opened without following a link, when it is this user's and no one
    else can write it; else PermissionError (its contents could be anyone's code)."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        os.close(fd)
        raise PermissionError(f"{name} is another user's or writable by others")
    return fd


def _unlink(path):
    with contextlib.suppress(OSError):
        os.unlink(path)


def _read_stored(stored):
    folder, name = stored
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _is_checked_pyc(stored):
    head = _read_stored(stored)[:16]
    return len(head) == 16 and head[:4] == MAGIC and head[4:8] == CHECKED_HASH


def _place(stored, pyc):
    """Link (else copy) the stored pyc to `pyc`; False when a pyc is already there."""
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    folder, name = stored
    try:
        os.link(name, pyc, src_dir_fd=folder, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    except OSError:  # another filesystem (EXDEV) or no hard links there: a copy, never a replace
        return _copy_new(stored, pyc)


def _copy_new(stored, pyc):
    data = _read_stored(stored)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(pyc))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o444)  # as the store's entries (and readable where the env is shared)
        os.link(tmp, pyc)
        return True
    except FileExistsError:
        return False
    finally:
        _unlink(tmp)


def restore_one(store, source, key, counts):
    pyc = _pyc_path(source)
    if os.path.lexists(pyc):
        counts["present"] += 1
        return
    if key is None:
        key = _file_sha256(source)
    stored = store.lookup(key)
    if stored is None or not os.path.isfile(source) or not _is_checked_pyc(stored):
        return
    if _place(stored, pyc):
        counts["restored"] += 1


def _valid_timestamp_pyc(data, source_stat):
    """A pyc Python wrote for the source as it is now (the checks Python makes on import)."""
    if len(data) < 16 or data[:4] != MAGIC or data[4:8] != TIMESTAMP:
        return False
    mtime = int.from_bytes(data[8:12], "little")
    size = int.from_bytes(data[12:16], "little")
    mask = 0xFFFFFFFF
    return mtime == int(source_stat.st_mtime) & mask and size == source_stat.st_size & mask


def _own_file(info):
    """A plain file this user wrote and no one else can change: only such a pyc is stored (the
    code in a pyc is not checked against its source; another user's pyc could be anything)."""
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def harvest_one(store, source, key, counts):
    pyc = _pyc_path(source)
    try:
        info = os.lstat(pyc)
    except FileNotFoundError:
        return
    if not _own_file(info):
        counts["not_own"] += 1
        return
    if key is not None and store.lookup(key) is not None:
        return  # already stored (a source that differs from RECORD is left out: no harm)
    with open(pyc, "rb") as handle:
        data = handle.read()
    with open(source, "rb") as handle:
        source_stat = os.fstat(handle.fileno())
        source_bytes = handle.read()
    if not _valid_timestamp_pyc(data, source_stat):
        return
    digest = hashlib.sha256(source_bytes).hexdigest()  # the key is what is there, not RECORD
    if store.lookup(digest) is not None:
        return
    header = MAGIC + CHECKED_HASH + importlib.util.source_hash(source_bytes)
    store.put(digest, header + data[16:])
    counts["stored"] += 1


def run(request):
    started = time.monotonic()
    try:
        store = Store(request["store"])
    except OSError as exc:  # not private (or not there): nothing is restored from it or stored
        error = f"{request['store']} not used: {exc}"
        return {"mode": request["mode"], "tag": TAG, "error": error, "first_error": None}
    action = restore_one if request["mode"] == "restore" else harvest_one
    counts = {"sources": 0, "restored": 0, "stored": 0, "present": 0, "not_own": 0, "errors": 0}
    sources = [*_record_sources()]
    for tree in request.get("trees", ()):
        sources.extend(_tree_sources(tree))
    first_error = None
    for source, key in sources:
        counts["sources"] += 1
        try:
            action(store, source, key, counts)
        except (OSError, ValueError) as exc:
            counts["errors"] += 1
            first_error = first_error or f"{source}: {exc}"
    counts["seconds"] = round(time.monotonic() - started, 2)
    return {"mode": request["mode"], "tag": TAG, "first_error": first_error, **counts}


def main():
    answer = run(json.loads(sys.argv[1]))
    shown = {k: v for k, v in answer.items() if k != "first_error"}
    sys.stdout.write(f"bytecode {answer['mode']}: {json.dumps(shown)}\n")
    if answer["first_error"]:
        sys.stdout.write(f"first error: {answer['first_error']}\n")
    sys.stdout.write(MARK + json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
