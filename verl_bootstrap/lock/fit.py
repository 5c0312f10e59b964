"""Which lockfile a run installs by default, and why the others do not fit. Pure: no I/O.

A lockfile fits a run when it was made from this profile's content (its profile hash), for the
variant, platform and verl ref the run chose, for a Python X.Y the run can use, for a glibc no
newer than this machine's, and, for a git lock, the ref still names the locked commit (a moved
tag or an advanced branch makes it stale). The candidates come in order of precedence (the
`--lockfile` given, the lab's, the profile's committed one): the first that fits wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from verl_bootstrap.lock.format import Lockfile

__all__ = ["Candidate", "Choice", "Wanted", "choose", "why_not"]


@dataclass(frozen=True)
class Wanted:
    """What the run needs of a lockfile (gathered from the profile, the options and the host)."""

    profile: str
    profile_hash: str  # of the profile as this run resolves it (its stack for the ref, variant)
    variant: str
    platform: str
    ref: str  # the verl ref the run asks for
    pythons: tuple[str, ...] | None = None  # the X.Y the run can use; None: any (conda brings it)
    glibc: str | None = None  # this machine's; None: not a glibc machine, or unknown
    ref_commit: str | None = None  # what the ref names in the repository now; None: not known
    blocker: str = ""  # an option no lockfile can serve (--with-tests): never fits
    own_source: str = ""  # the --verl-source the user gave ("" when none)
    backend: str | None = None  # the env backend the run makes (None: not known, any fits)


@dataclass(frozen=True)
class Candidate:
    """One lockfile the run could install: where it is, whose it is, and its content."""

    path: Path
    origin: str  # "--lockfile", "lab", "committed"
    lock: Lockfile | None  # None: missing or unreadable (`problem` says which)
    problem: str = ""
    label: str = ""  # how to show the path (a committed lockfile as lockfiles/…)


@dataclass(frozen=True)
class Choice:
    """The lockfile chosen (None: resolve) and, for each candidate passed over, why."""

    chosen: Candidate | None
    passed_over: tuple[tuple[Candidate, str], ...]

    def why_resolving(self) -> str:
        """One line: why no lockfile is used (the most specific candidate's reason)."""
        if self.chosen is not None:
            return ""
        if not self.passed_over:
            return "no lockfile for this profile"
        return self.passed_over[0][1]


def choose(candidates: Sequence[Candidate], wanted: Wanted) -> Choice:
    """The first candidate that fits; every one before it with its reason."""
    passed: list[tuple[Candidate, str]] = []
    for candidate in candidates:
        reason = _reason(candidate, wanted)
        if reason is None:
            return Choice(chosen=candidate, passed_over=tuple(passed))
        passed.append((candidate, reason))
    return Choice(chosen=None, passed_over=tuple(_most_telling(passed)))


def _most_telling(passed: list[tuple[Candidate, str]]) -> list[tuple[Candidate, str]]:
    """Candidates that exist first: "the lab's lock is for v0.9.1" says more than "none there"."""
    return sorted(passed, key=lambda item: item[0].lock is None)


def _reason(candidate: Candidate, wanted: Wanted) -> str | None:
    if wanted.blocker:
        return wanted.blocker
    if candidate.lock is None:
        return candidate.problem or f"no lockfile at {candidate.path}"
    lock = candidate.lock
    reason = why_not(lock, wanted)
    if reason is None:
        return None
    where = f"the {candidate.origin} lockfile {candidate.label or candidate.path}"
    if lock.verl.ref != wanted.ref and lock.profile == wanted.profile:
        return f"no lockfile for {wanted.ref}: {where} locks {lock.verl.ref}"
    return f"{where} {reason}"


def why_not(lock: Lockfile, wanted: Wanted) -> str | None:
    """Why `lock` does not fit the run (None: it fits). The first reason, in the order a user
    would look: which profile and machine, which verl, which Python, then the profile's content."""
    checks = (
        _profile,
        _platform,
        _variant,
        _ref,
        _source,
        _moved,
        _backend,
        _python,
        _glibc,
        _content,
    )
    for check in checks:
        reason = check(lock, wanted)
        if reason:
            return reason
    return None


def _profile(lock: Lockfile, wanted: Wanted) -> str:
    if lock.profile == wanted.profile:
        return ""
    return f"locks profile {lock.profile}, not {wanted.profile}"


def _platform(lock: Lockfile, wanted: Wanted) -> str:
    if lock.platform == wanted.platform:
        return ""
    return f"is for {lock.platform}; this machine is {wanted.platform}"


def _variant(lock: Lockfile, wanted: Wanted) -> str:
    if lock.cuda.variant == wanted.variant:
        return ""
    return f"locks variant {lock.cuda.variant}; this run chose {wanted.variant}"


def _ref(lock: Lockfile, wanted: Wanted) -> str:
    if lock.verl.ref == wanted.ref:
        return ""
    return f"locks verl {lock.verl.ref}, not {wanted.ref}"


def _source(lock: Lockfile, wanted: Wanted) -> str:
    """An sdist lock pins verl's release archive: a source the user names is not that."""
    if not wanted.own_source or lock.verl.kind != "sdist":
        return ""
    return f"pins verl's release sdist; --verl-source asks for {wanted.own_source}"


def _moved(lock: Lockfile, wanted: Wanted) -> str:
    """A git lock whose ref names another commit now is stale (an sdist lock is its archive)."""
    locked = lock.verl.commit
    if lock.verl.kind != "git" or not locked or not wanted.ref_commit:
        return ""
    if locked in (wanted.ref_commit, wanted.ref):
        return ""
    return (
        f"is stale: {wanted.ref} now names commit {wanted.ref_commit[:12]}, it locks "
        f"{locked[:12]} (the tag moved or the branch advanced)"
    )


def _backend(lock: Lockfile, wanted: Wanted) -> str:
    """A venv lock holds no conda part; a conda lock's Python comes from conda: neither stands
    in for the other."""
    if wanted.backend is None or lock.backend == wanted.backend:
        return ""
    return f"was made for the {lock.backend} backend; this run makes a {wanted.backend} env"


def _python(lock: Lockfile, wanted: Wanted) -> str:
    if wanted.pythons is None or lock.python in wanted.pythons:
        return ""
    have = ", ".join(wanted.pythons) or "none"
    return f"locks Python {lock.python}; this run can use {have}"


def _glibc(lock: Lockfile, wanted: Wanted) -> str:
    needs = lock.cuda.virtual_packages.get("__glibc")
    if not needs or not wanted.glibc:
        return ""
    try:
        older = Version(wanted.glibc) < Version(needs)
    except InvalidVersion:
        return ""
    return f"needs glibc >= {needs}; this machine has {wanted.glibc}" if older else ""


def _content(lock: Lockfile, wanted: Wanted) -> str:
    if lock.profile_hash == wanted.profile_hash:
        return ""
    return f"is stale: profile {wanted.profile} changed since it was locked"
