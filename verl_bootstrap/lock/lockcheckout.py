"""Where `lock` keeps verl's checkouts: the tool's cache, keyed by the repository, the ref and the
commit the ref names there now, so a moved tag or an advanced branch is locked at its new commit
instead of the commit an older lock cached; and the lockfile's view of a fetched source.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.lock.format import LockedSource
from verl_bootstrap.paths import cache_folder
from verl_bootstrap.redact import shareable
from verl_bootstrap.source.spec import SourceResult

__all__ = ["lock_checkout", "locked_source", "remote_commit"]

_LS_REMOTE_TIMEOUT = 120  # seconds: one round trip; an unreachable host must not hang the lock


def lock_checkout(repo: str, ref: str, *, offline: bool) -> Path:
    """The cached checkout of `repo` at `ref` as the repository names it now.

    The repository is asked what `ref` names (`git ls-remote`, one round trip, no clone). When
    it cannot answer (offline, unreachable, or `ref` is a commit, which never moves), the key is
    the repository and ref alone: the last checkout of them (or the release sdist) serves.
    """
    names = "" if offline else _remote_names(repo, ref)
    key = hashlib.sha256(f"{repo}@{ref}".encode() + (f"@{names}".encode() if names else b""))
    return cache_folder("lock-sources") / key.hexdigest()[:16] / "verl"


def _remote_names(repo: str, ref: str) -> str:
    """The `<commit> <ref>` lines the repository gives for `ref` (empty when it cannot say)."""
    try:
        done = proc.capture(
            ["git", "ls-remote", "--", repo, ref],
            env={"GIT_TERMINAL_PROMPT": "0"},
            timeout=_LS_REMOTE_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def locked_source(source: SourceResult) -> LockedSource:
    """The lockfile's view of verl's source."""
    return LockedSource(
        repo=shareable(source.repo),  # a lockfile is shared: the netrc gives the login
        ref=source.ref,
        kind="sdist" if source.kind == "sdist" else "git",
        commit=source.commit,
        sdist=source.sdist_name,
        sdist_sha256=source.sdist_sha256,
    )


def remote_commit(repo: str, ref: str) -> str | None:
    """The commit `ref` names in `repo` now (a tag's peeled commit); None when it cannot say."""
    found: dict[str, str] = {}
    for line in _remote_names(repo, ref).splitlines():
        sha, _, name = line.partition("\t")
        found[name.strip()] = sha.strip()
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in found:
            return found[name]
    return next(iter(found.values()), None)
