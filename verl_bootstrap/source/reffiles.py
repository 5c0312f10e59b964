"""verl's files at a ref, read before its checkout is made: a plan (and `lock`) reads the ref's
`uv.lock` and `pyproject.toml` to know whether verl's own lock gives the stack, and its Python.

They are read from the source cache's mirror (source.cache), which fetches the ref's one commit
as a checkout would: the checkout made afterwards takes it from there, with no network.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from verl_bootstrap.safety.credentials import lift
from verl_bootstrap.source.cache import GitFailed, read_at_ref
from verl_bootstrap.source.spec import git_url

__all__ = ["PYPROJECT", "UV_LOCK", "RefFiles", "ref_files"]

UV_LOCK = "uv.lock"
PYPROJECT = "pyproject.toml"


@dataclass(frozen=True)
class RefFiles:
    """What a ref holds of verl's lock: the commit, and each file's text (None: not there)."""

    repo: str
    ref: str
    commit: str | None = None
    files: dict[str, str | None] = field(default_factory=dict)
    why_unread: str = ""  # git's words when the ref could not be read (no commit then)

    @property
    def uv_lock(self) -> str | None:
        return self.files.get(UV_LOCK)

    @property
    def pyproject(self) -> str | None:
        return self.files.get(PYPROJECT)


def ref_files(repo: str, ref: str, *, offline: bool) -> RefFiles:
    """`uv.lock` and `pyproject.toml` of verl at `ref` in `repo` (a URL or a local path)."""
    lifted = lift([git_url(repo)], os.environ)  # a URL's credential goes to git's environment
    try:
        commit, files = read_at_ref(
            lifted.argv[0], ref, (UV_LOCK, PYPROJECT), lifted.env, offline=offline
        )
    except GitFailed as exc:
        return RefFiles(repo, ref, why_unread=exc.output.splitlines()[-1] if exc.output else "")
    finally:
        lifted.cleanup()
    return RefFiles(repo, ref, commit, files)
