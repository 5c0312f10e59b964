"""Where verl's source comes from: the repository, the ref, and where its checkout goes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile.models import Profile

__all__ = ["SourceResult", "SourceSpec", "git_url"]

_RELEASE_TAG = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)$")


@dataclass(frozen=True)
class SourceSpec:
    """Where verl comes from, which ref, and where its checkout goes."""

    repo: str
    ref: str
    checkout: Path
    sdist_fallback: bool

    @classmethod
    def from_profile(cls, profile: Profile, options: RunOptions, state: Path) -> SourceSpec:
        """The source the run uses: --verl-source over the profile's repo; the profile's ref
        (`profile` has its stack applied, which set --verl-ref there)."""
        del state  # the checkout sits beside the env, where users can find and edit it
        repo = options.verl_source or profile.verl.repo
        needs_repo = any(s.kind == "script" for s in profile.stages)
        return cls(
            repo=git_url(repo),
            ref=profile.verl.ref,
            checkout=options.prefix / "src" / "verl",
            sdist_fallback=profile.verl.sdist_fallback and not needs_repo,
        )

    @property
    def release(self) -> str | None:
        """The release version a tag such as v0.9.1 names, else None."""
        found = _RELEASE_TAG.match(self.ref)
        return found.group(1) if found else None


@dataclass(frozen=True)
class SourceResult:
    """What fetch-source produced."""

    kind: str  # git | sdist
    repo: str
    ref: str
    path: Path
    commit: str | None = None
    sdist_sha256: str | None = None
    sdist_name: str | None = None
    note: str = ""


def git_url(repo: str) -> str:
    """Local paths become file:// URLs so that shallow clones work on them too."""
    if "://" in repo or repo.startswith("git@"):
        return repo
    path = Path(repo).expanduser()
    if not path.exists():
        raise InputError(f"--verl-source {repo!r} is neither a URL nor an existing path")
    return path.resolve().as_uri()
