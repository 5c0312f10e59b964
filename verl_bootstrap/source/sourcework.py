"""Which files in verl's checkout are the user's work, so the tool never deletes, replaces or
moves it: people edit verl's editable checkout and run from it (checkpoints, outputs, logs).

A file is the tool's only when it is exactly what the tool put there: in a git checkout, what git
tracks, unchanged; in a checkout unpacked from the release sdist, a file of the sdist's list with
its recorded sha256 (written when it was unpacked). Everything else is the user's, whatever git
ignores: verl's `.gitignore` covers exactly where runs write. What the tool's own editable build
writes (the `*.egg-info` metadata) and byte-code are not work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.paths import file_sha256
from verl_bootstrap.safety import jsontext
from verl_bootstrap.source import gitquery
from verl_bootstrap.source.gitquery import GitQueryFailed

if TYPE_CHECKING:
    from git import Repo

__all__ = ["MARK", "SDIST_FILES", "SDIST_MARK", "checkout_work", "record_unpacked"]

MARK = "verl-bootstrap-checkout"  # in .git: the commit the tool checked out (source/checkout)

SDIST_MARK = ".verl-bootstrap-sdist"  # in a checkout unpacked from the release sdist
SDIST_FILES = ".verl-bootstrap-sdist-files.json"  # beside it: each unpacked file's sha256
_OWN = frozenset({SDIST_MARK, SDIST_FILES})
_LINK = "link:"  # a symbolic link's entry in the list: its target, not a hash


def record_unpacked(checkout: Path) -> None:
    """List every file just unpacked into `checkout` with its sha256 (a link with its target)."""
    body = {"schema": "verl-bootstrap.sdist-files/1", "files": dict(_fingerprints(checkout))}
    (checkout / SDIST_FILES).write_text(json.dumps(body, sort_keys=True) + "\n", encoding="utf-8")


def checkout_work(checkout: Path) -> list[str]:
    """The user's files in verl's checkout, each `path (why)`, sorted; empty when it has none
    (or does not exist)."""
    if not checkout.exists() and not checkout.is_symlink():
        return []
    if checkout.is_symlink() or not checkout.is_dir():
        return [f"{checkout.name} (not a folder verl-bootstrap made)"]
    if (checkout / ".git").exists():
        return _git(checkout)
    if (checkout / SDIST_MARK).is_file():
        return _sdist_work(checkout)
    return ["(every file: this is not a checkout verl-bootstrap made)"]


def _git(checkout: Path) -> list[str]:
    """The user's work git knows of: what it keeps beyond the files, then the files. A question
    git cannot answer is listed too: what it would have shown is not known to be nothing."""
    work: list[str] = []
    try:
        with gitquery.opened(checkout) as repo:
            for question in (partial(_git_history, repo), partial(_git_work, repo)):
                try:
                    work += question()
                except GitQueryFailed as exc:
                    work.append(f"({exc})")
    except GitQueryFailed as exc:  # not a repository git can open
        work.append(f"({exc})")
    return work


def _git_work(repo: Repo) -> list[str]:
    """Modified, staged, untracked and ignored files, from git's own status."""
    work = []
    for code, path in gitquery.changed_paths(repo):
        why = _GIT_WHY.get(code, "modified")
        if why and not _generated(path):
            work.append(f"{path} ({why})")
    return sorted(work)


def _git_history(repo: Repo) -> list[str]:
    """What git keeps beyond the files: local branches other than the checked-out one, stash
    entries, and commits on no remote branch or tag (nor the commit the tool checked out)."""
    current = gitquery.current_branch(repo)  # none on a detached HEAD, as the tool leaves it
    work = [f"branch {b} (a local branch)" for b in gitquery.local_branches(repo) if b != current]
    work += [f"{entry} (stashed: {what})" for entry, what in gitquery.stash_entries(repo)]
    for commit, subject in gitquery.unpushed_commits(repo, _made(repo)):
        work.append(f"commit {commit} (on no remote branch: {subject})")
    return work


def _made(repo: Repo) -> list[str]:
    """The commit the tool checked out, from its mark in the repository (none: no mark)."""
    try:
        commit = (Path(repo.git_dir) / MARK).read_text(encoding="utf-8").strip()
    except OSError:
        return []
    return [commit] if commit and all(c in "0123456789abcdef" for c in commit) else []


# a deletion loses nothing; every other change (staged or not) is an edit
_GIT_WHY = {"??": "untracked", "!!": "ignored by git", " D": "", "D ": ""}


def _sdist_work(checkout: Path) -> list[str]:
    listed = _listed(checkout)
    if listed is None:
        return [
            "(every file: it was unpacked before verl-bootstrap recorded the sdist's files, so "
            "edits cannot be told apart)"
        ]
    work = []
    for path, rel in _entries(checkout):
        if rel in _OWN or _generated(rel):
            continue
        if rel not in listed:  # not hashed: a checkpoint may be gigabytes
            work.append(f"{rel} (not in the sdist)")
        elif listed[rel] != _fingerprint(path):
            work.append(f"{rel} (modified)")
    return sorted(work)


def _listed(checkout: Path) -> dict[str, str] | None:
    try:
        body = jsontext.loads((checkout / SDIST_FILES).read_text(encoding="utf-8"))
        files = body["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(files, dict):
        return None
    return {str(k): str(v) for k, v in files.items()}


def _fingerprints(root: Path) -> Iterator[tuple[str, str]]:
    """(relative path, sha256 or link target) of every non-folder entry, links not followed."""
    for path, rel in _entries(root):
        yield rel, _fingerprint(path)


def _entries(root: Path) -> Iterator[tuple[Path, str]]:
    """Every non-folder entry under `root` (a link to a folder too, not followed), with its
    relative POSIX path; a folder that cannot be read is an OSError naming it."""
    for folder, dirs, files in os.walk(root, onerror=_raise):
        base = Path(folder)
        for name in sorted(files + [d for d in dirs if (base / d).is_symlink()]):
            path = base / name
            yield path, path.relative_to(root).as_posix()


def _fingerprint(path: Path) -> str:
    return _LINK + str(path.readlink()) if path.is_symlink() else file_sha256(path)


def _raise(exc: OSError) -> None:
    raise exc


def _generated(rel: str) -> bool:
    """What the tool's editable build writes (its metadata) and the interpreter's byte-code."""
    parts = rel.rstrip("/").split("/")
    return rel.endswith(".pyc") or any(p == "__pycache__" or p.endswith(".egg-info") for p in parts)
