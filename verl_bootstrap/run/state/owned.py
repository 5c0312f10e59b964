"""Which files inside a prefix the tool made, so `remove` deletes an env only when nothing else is
in it.

What the tool knows it made: its own state folder, verl's checkout (whose uncommitted work is
checked apart, by git), the env backend's own files (a venv's interpreter links, activation
scripts and config; a conda prefix's conda-meta, whose records list every file each package
installed), and every Python distribution installed into the env (each lists its files in its
RECORD). Byte-code caches are the interpreter's. Anything else, at any depth, is the user's.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from pathlib import Path

from verl_bootstrap.errors import Refused
from verl_bootstrap.paths import STATE_DIRNAME, checkout_dir
from verl_bootstrap.safety import jsontext

__all__ = ["MAX_ENTRIES", "foreign_files"]

MAX_ENTRIES = 2_000_000  # an env with torch and vLLM holds ~100k; more is no env of ours
_VENV_TOP = frozenset({"pyvenv.cfg", "CACHEDIR.TAG", ".gitignore", ".lock", "lib64"})
_VENV_BIN = re.compile(r"(activate.*|deactivate.*|pydoc.*|python[0-9.]*|activate_this\.py)")
_VENV_SITE = frozenset({"_virtualenv.py", "_virtualenv.pth"})


def foreign_files(prefix: Path) -> list[str]:
    """The files (and links) under `prefix` the tool did not make, relative, sorted.

    Links are listed, never followed; at most MAX_ENTRIES entries are looked at (Refused beyond).
    """
    known = _known_files(prefix)
    trees = _whole_trees(prefix)
    return sorted(
        rel for rel in _walk(prefix, trees) if rel not in known and not _backend_file(rel)
    )


def _whole_trees(prefix: Path) -> frozenset[str]:
    """Folders that are the tool's as a whole (relative)."""
    checkout = checkout_dir(prefix).relative_to(prefix).as_posix()
    return frozenset({STATE_DIRNAME, checkout, "conda-meta"})


def _walk(prefix: Path, trees: frozenset[str]) -> Iterator[str]:
    """Every non-folder entry under `prefix` as a relative POSIX path, without following links.

    Paths stay strings: a cpu env holds ~35k files, and Path objects would triple the time.
    """
    seen = 0
    stack = [""]
    root = str(prefix)
    while stack:
        folder = stack.pop()
        with os.scandir(f"{root}/{folder}" if folder else root) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    raise Refused(
                        f"{prefix} holds more than {MAX_ENTRIES} entries: too many to check "
                        "that each is the tool's; nothing was deleted",
                        hint="check its contents and delete it yourself",
                    )
                rel = f"{folder}/{entry.name}" if folder else entry.name
                if not entry.is_dir(follow_symlinks=False):
                    yield rel
                elif rel not in trees and not _generated_tree(entry.name):
                    stack.append(rel)


def _generated_tree(name: str) -> bool:
    """Byte-code caches, and a distribution's metadata folder (its files are in its RECORD)."""
    return name == "__pycache__" or name.endswith(".dist-info")


def _backend_file(rel: str) -> bool:
    """A venv's own files (`uv venv` and the venv module write them), and byte-code."""
    folder, _, name = rel.rpartition("/")
    if not folder:
        return name in _VENV_TOP
    if name.endswith(".pyc"):
        return True
    if folder == "bin":
        return _VENV_BIN.fullmatch(name) is not None
    return folder.endswith("/site-packages") and name in _VENV_SITE


def _known_files(prefix: Path) -> set[str]:
    """Every file an installed distribution or conda package lists, relative to `prefix`."""
    known: set[str] = set()
    for site in prefix.glob("lib/python*/site-packages"):
        if site.is_symlink():
            continue
        base = site.relative_to(prefix).as_posix()
        for record in site.glob("*.dist-info/RECORD"):
            known.update(_record_paths(record, base))
    for meta in (prefix / "conda-meta").glob("*.json"):
        known.update(_conda_paths(meta))
    return known


def _record_paths(record: Path, base: str) -> Iterator[str]:
    with record.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle):
            if row and row[0]:
                rel = os.path.normpath(f"{base}/{row[0]}")
                if not rel.startswith(".."):
                    yield rel


def _conda_paths(meta: Path) -> Iterator[str]:
    try:
        data = jsontext.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # an unreadable record lists nothing: its files then count as the user's
    files = data.get("files") if isinstance(data, dict) else None
    for name in files if isinstance(files, list) else ():
        if isinstance(name, str):
            yield os.path.normpath(name)
