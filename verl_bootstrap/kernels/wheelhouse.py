"""A lab wheelhouse: a folder of wheels the tool built (or a person added), each with its sha256
and build key in `index.json`, shared by every env and node that can read the folder.

Publishing takes an flock on `.lock` first, then copies the wheel in under a temporary name and
renames it, and rewrites the index the same way, so two nodes publishing at once both land and a
reader never sees half a file. A folder this user cannot write is used, never written.

Many users share one folder: each file the tool writes there is readable by whoever can read the
folder (the folder's read bits, as far as the writer's umask allows; the folder's group, which a
setgid folder gives by itself), and the lock file is opened read-only, so another user's lock file
serves as well (flock needs no write access). A `.lock` that is not a regular file (a FIFO) is
refused rather than waited on.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from verl_bootstrap.errors import InputError, Refused
from verl_bootstrap.events import emit
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.wheeltags import HouseCheck, contradictions
from verl_bootstrap.paths import cannot_write, file_sha256
from verl_bootstrap.safety import jsontext
from verl_bootstrap.safety.shapes import SHA256, control_char_at, inside

__all__ = [
    "INDEX_NAME",
    "Entry",
    "Wheelhouse",
    "check_key",
    "entry_for",
    "index_text",
    "parse_index",
    "read_index",
]

INDEX_NAME = "index.json"
SCHEMA = "verl-bootstrap.wheelhouse/1"


@dataclass(frozen=True)
class Entry:
    """One wheel the wheelhouse holds."""

    file: str
    name: str
    version: str
    sha256: str
    key: BuildKey

    def to_json(self) -> dict[str, Any]:
        """As the index stores it."""
        return {
            "file": self.file,
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "key": self.key.to_json(),
        }


class Wheelhouse:
    """The wheelhouse at `root` (it need not exist until the first publish)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def index_path(self) -> Path:
        """The index file."""
        return self.root / INDEX_NAME

    def writable(self) -> bool:
        """This user may publish here (the folder, or the first existing parent, is writable)."""
        at = self.root
        while not at.exists() and at != at.parent:
            at = at.parent
        return os.access(at, os.W_OK | os.X_OK)

    def entries(self) -> tuple[Entry, ...]:
        """What the index lists (empty when there is no index yet); a bad entry is skipped."""
        return tuple(e for e in self._rows(note=True) if isinstance(e, Entry))

    def _rows(self, *, note: bool = False) -> list[Entry | str]:
        if not self.index_path.is_file():
            return []
        try:
            text = self.index_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{self.index_path}: not a wheelhouse index (not UTF-8 text, byte {exc.start})",
                hint="run `verl-bootstrap wheelhouse check`, or move the file aside",
            ) from None
        except OSError as exc:
            raise InputError(
                f"{self.index_path}: cannot be read ({exc.strerror or exc})",
                hint="ask the wheelhouse's owner to make it readable to you (chmod a+r)",
            ) from None
        if note:
            return list(parse_index(text, str(self.index_path)))
        return read_index(text, str(self.index_path))

    def lookup(self, name: str, version: str, key: BuildKey) -> Entry | None:
        """The wheel for (name, version) whose key matches `key` in every field."""
        wanted = canonicalize_name(name)
        for entry in self.entries():
            same = canonicalize_name(entry.name) == wanted and entry.version == version
            if same and not entry.key.mismatches(key):
                return entry
        return None

    def path_of(self, entry: Entry) -> Path:
        """Where an entry's wheel lies (its name was checked to stay inside the folder)."""
        return self.root / entry.file

    def local_wheel(self, file: str, work: Path) -> Path:
        """The listed wheel `file` as a local file (here: where it lies)."""
        return inside(self.root, file, what="wheel file name")

    def shown(self) -> str:
        """The wheelhouse as plans and logs name it."""
        return str(self.root)

    def publish(self, wheel: Path, key: BuildKey) -> Entry:
        """Copy `wheel` in and list it with its sha256 and key (replacing the same file name)."""
        if not self.writable():
            raise Refused(
                f"the wheelhouse {self.root} is read-only for you: nothing was added",
                hint="ask its owner to add the wheel, or to make the folder group-writable",
            )
        name, version = _wheel_name(wheel.name, where=str(wheel))
        check_key(key.to_json(), "the key")
        self.root.mkdir(parents=True, exist_ok=True)
        digest = file_sha256(wheel)
        entry = Entry(wheel.name, name, version, digest, key)
        with self._locked():  # before anything is copied: a lock we cannot take leaves nothing
            self._copy_in(wheel)
            kept = [e for e in self.entries() if e.file != wheel.name]
            self._write([*kept, entry])
        return entry

    def check(self) -> HouseCheck:
        """Every problem found by rehashing each listed wheel, and each wheel whose tags or
        contents contradict its key (none of either: all is well)."""
        found = HouseCheck([f"{e} (skipped)" for e in self._rows() if isinstance(e, str)])
        for entry in self.entries():
            path = self.path_of(entry)
            if not path.is_file():
                found.problems.append(f"{entry.file}: listed in {INDEX_NAME} but missing")
            elif file_sha256(path) != entry.sha256:
                found.problems.append(
                    f"{entry.file}: sha256 differs from the index (the file changed)"
                )
            else:
                found.misfiled.extend(contradictions(path, entry.key, file=entry.file))
        return found

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = self._open_lock()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes
            yield
        finally:
            os.close(fd)

    def _open_lock(self) -> int:
        """`.lock`, opened read-only (any user's will do) and never waited on when it is not a
        regular file: a FIFO would block the open, a link could point anywhere."""
        path = self.root / ".lock"
        flags = os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, self._file_mode())
        except OSError as exc:
            raise Refused(
                f"cannot take the wheelhouse's lock {path} ({exc.strerror or exc}): nothing "
                "was added",
                hint="it must be a regular file you can read (not a link); ask its owner",
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Refused(
                f"the wheelhouse's lock {path} is not a regular file: nothing was added",
                hint="ask the wheelhouse's owner to delete it (the tool makes a new one)",
            )
        self._share(path, fd)
        return fd

    def _file_mode(self) -> int:
        """Read and write for the writer; read for whoever can read the folder (umask applies)."""
        readers = stat.S_IMODE(self.root.stat().st_mode) & 0o044
        return (0o600 | readers) & ~_umask()

    def _share(self, path: Path, fd: int | None = None) -> None:
        """Give a file the tool just made here its mode and the folder's group (a setgid folder
        gives the group by itself; elsewhere only when the writer is in that group)."""
        info = os.fstat(fd) if fd is not None else path.lstat()
        if info.st_uid != os.getuid():
            return  # another user's file (their lock): theirs to set
        folder_gid = self.root.stat().st_gid
        try:
            if info.st_gid != folder_gid and folder_gid in os.getgroups():
                os.chown(path, -1, folder_gid, follow_symlinks=False)
            path.chmod(self._file_mode())
        except OSError:
            pass  # not ours to change: readers get what the umask gave

    def _copy_in(self, wheel: Path) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{wheel.name}.", dir=self.root)
        os.close(fd)
        try:
            shutil.copyfile(wheel, tmp)
            self._share(Path(tmp))
            Path(tmp).replace(self.root / wheel.name)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise cannot_write(self.root / wheel.name, exc) from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _write(self, entries: list[Entry]) -> None:
        text = index_text(entries)
        fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_NAME}.", dir=self.root)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            self._share(Path(tmp))
            Path(tmp).replace(self.index_path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise cannot_write(self.index_path, exc) from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:  # noqa: PTH123 - a proc file
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def index_text(entries: Iterable[Entry]) -> str:
    """An index's text listing `entries`."""
    body = {"schema": SCHEMA, "wheels": [e.to_json() for e in entries]}
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def entry_for(file: str, sha256: str, key: BuildKey) -> Entry:
    """The entry of the wheel `file` (its name and version read from the file name)."""
    name, version = _wheel_name(file, where=file)
    return Entry(file, name, version, sha256, key)


def _wheel_name(filename: str, *, where: str) -> tuple[str, str]:
    if "/" in filename or filename.startswith("."):
        raise InputError(f"{where}: {filename!r} is not a wheel file name inside the wheelhouse")
    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise InputError(f"{where}: {filename!r} is not a wheel file name ({exc})") from None
    return str(name), str(version)


def parse_index(text: str, path: str) -> Iterator[Entry]:
    """The usable entries of an index's text (`path` names it in messages). A text that is no
    index is an InputError; one bad entry is skipped with a note (a `("note", "wheelhouse")`
    event): anyone who can write a shared index could otherwise deny it to everyone."""
    for entry in read_index(text, path):
        if isinstance(entry, Entry):
            yield entry
        else:
            emit(f"skipped an entry of the wheelhouse index: {entry}", kind=("note", "wheelhouse"))


def read_index(text: str, path: str) -> list[Entry | str]:
    """Each entry of an index's text, or for a bad one the reason it is not used."""
    try:
        body = jsontext.loads(text)
        rows = body["wheels"]
        assert isinstance(rows, list)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise InputError(
            f"{path}: not a wheelhouse index (expected JSON with a 'wheels' list)",
            hint="run `verl-bootstrap wheelhouse check`, or move the file aside",
        ) from None
    out: list[Entry | str] = []
    for number, row in enumerate(rows):
        try:
            out.append(_entry(row, f"{path}: wheels[{number}]"))
        except InputError as exc:
            out.append(exc.message)
    return out


def _entry(row: Any, where: str) -> Entry:
    _check_row(row, where)
    try:
        name, version = _wheel_name(str(row["file"]), where=where)
        return Entry(
            row["file"], name, version, str(row["sha256"]), BuildKey.from_mapping(row["key"])
        )
    except (KeyError, TypeError, AttributeError):
        raise InputError(f"{where}: needs file, sha256 and key") from None


def check_key(fields: Mapping[str, object], where: str) -> None:
    """Refuse a key whose fields lack their shapes before it is written into an index (where
    every reader would skip it): `--key 'torch=;rm'` is an InputError naming the field."""
    _check_key(fields, where)
    at = control_char_at(dict(fields), "")
    if at is not None:
        raise InputError(f"{where}{at}: holds a line break or control character")


def _check_row(row: object, where: str) -> None:
    """Every value of an entry is one line (it is printed and becomes file names), the sha256
    has its shape: an index is written by whoever can write the folder."""
    at = control_char_at(row, "")
    if at is not None:
        raise InputError(
            f"{where}{at}: holds a line break or control character",
            hint="the index was edited by hand; restore it or move it aside",
        )
    digest = row.get("sha256") if isinstance(row, dict) else None
    if digest is not None and not SHA256.fullmatch(str(digest)):
        raise InputError(f"{where}.sha256: not a sha256 (64 hex digits)")
    key = row.get("key") if isinstance(row, dict) else None
    if isinstance(key, dict):
        _check_key(key, f"{where}.key")


def _check_key(key: Mapping[str, object], where: str) -> None:
    for field, (shape, what) in _KEY_SHAPES.items():
        value = key.get(field)
        if value is not None and not (isinstance(value, str) and shape.fullmatch(value)):
            raise InputError(f"{where}.{field}: {value!r} is not {what}")
    abi = key.get("cxx11abi")
    if abi is not None and not (isinstance(abi, bool) or str(abi).upper() in _ABI_WORDS):
        raise InputError(f"{where}.cxx11abi: {abi!r} is not true or false")


_ABI_WORDS = {"TRUE", "FALSE", "1", "0", "YES", "NO"}
# The shapes of a build key's fields, as `--key` and the env's probe give them (None: unknown).
_KEY_SHAPES = {
    "torch": (re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,63}"), "a torch version"),
    "cuda": (re.compile(r"cpu|[0-9]{1,3}(\.[0-9]{1,3})?"), "a CUDA version (X.Y) or cpu"),
    "python": (re.compile(r"cp3[0-9]{1,3}"), "a Python tag (cp3XX)"),
    "platform": (re.compile(r"[a-z0-9_]{1,64}"), "a platform tag"),
}
