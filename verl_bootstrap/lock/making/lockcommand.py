"""What the lockfile commands decide, apart from their flags and their output: which lockfiles
`lock` makes and where each goes, one lock with what changed against the lockfile it replaces,
`lock --check`'s verdict on each committed lockfile, and the lockfile `export` and `bundle` read
(the current folder's own, where `lock` wrote it, before the one shipped with the tool).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from verl_bootstrap.errors import BootstrapError, InputError
from verl_bootstrap.lock.diff import VersionChange, version_diff
from verl_bootstrap.lock.drift import Staleness, committed_lockfiles, stale_lockfile
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.contract import (
    UNCHECKED,
    MetadataCheck,
    contract_gaps,
    metadata_gaps,
)
from verl_bootstrap.lock.making.create import (
    AfterLock,
    LockRequest,
    LockResult,
    lock_profile,
    verl_pyproject,
)
from verl_bootstrap.lock.making.declared import declared_extras, extras_gaps
from verl_bootstrap.lock.making.lockstack import recorded_stack, uv_lock_pin_gaps
from verl_bootstrap.lock.making.nativelinks import (
    REPLACED,
    LinkCheck,
    native_link_gaps,
    replacing_wheels,
)
from verl_bootstrap.lock.making.origins import lock_index_settings
from verl_bootstrap.lock.making.reproduce import forced_gaps, regenerate_gaps
from verl_bootstrap.lock.making.uvlock import applies_to, export_uv_lock, unhashed, uv_lock_gaps
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import LOCKFILES_DIR, cache_folder, default_lockfile, project_lockfile
from verl_bootstrap.profile import list_profiles, load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.variants import known_variant

__all__ = [
    "CheckedLock",
    "LockJob",
    "LockTargets",
    "Locked",
    "NamedLock",
    "OptionsFor",
    "check_lockfiles",
    "lock_path",
    "lock_request",
    "lock_targets",
    "lock_variant",
    "named_lockfile",
]

_CHECKERS = 4
OptionsFor = Callable[[str, str], RunOptions]  # (profile, variant) -> a scratch run's options


@dataclass(frozen=True)
class LockJob:
    """What `lock` was asked for besides the profiles: the flags that shape every lockfile."""

    platform: str = "linux-64"
    python: str | None = None
    exclude_newer: str | None = None
    upgrade: bool = False
    glibc: str | None = None
    output: Path | None = None  # one lockfile only
    folder: Path | None = None  # --dir


@dataclass(frozen=True)
class LockTargets:
    """The (profile, variant) pairs to lock, and the profiles --all leaves out (each with why)."""

    pairs: list[tuple[str, str]]
    skipped: list[str]


def lock_targets(profile: str | None, cuda: str | None, *, every: bool) -> LockTargets:
    """(profile, variant) pairs to lock; with `every` (--all), profiles that run a script are
    skipped, and --cuda keeps the profiles that have that variant."""
    if every:
        names = list_profiles()
    elif profile:
        names = [profile]
    else:
        raise InputError("lock: pass --profile NAME or --all")
    targets = LockTargets([], [])
    for name in names:
        loaded = load_profile(name)
        if every and any(stage.kind == "script" for stage in loaded.stages):
            why = "it runs verl's install script (what a script installs cannot be locked)"
            targets.skipped.append(f"{name}: skipped, {why}")
            continue
        if cuda and cuda not in loaded.cuda_variants and every:
            continue  # --all --cuda X: the profiles that have X
        if cuda:  # bad input is refused before anything is resolved
            known_variant(loaded, cuda)
        variants = [cuda] if cuda else list(loaded.cuda_variants)
        targets.pairs.extend((name, v) for v in variants)
    return targets


def lock_path(job: LockJob, profile: str, variant: str, *, single: bool) -> Path:
    """Where one lockfile goes: --output (one lockfile), else its place in --dir, else in the
    current folder's lockfiles/, where the next command in this folder looks first (never the
    tool's own shipped copy, which installs trust)."""
    if job.output is not None and single:
        return Path(job.output)
    if job.folder is not None:
        return default_lockfile(Path(profile).stem, variant, job.platform, job.folder)
    return project_lockfile(profile, variant, job.platform)


def lock_request(
    job: LockJob, options: RunOptions, profile: str, variant: str, *, single: bool
) -> LockRequest:
    """The request of one lockfile. A new lockfile in the current folder keeps the Python, cutoff
    and backend of the tool's own lockfile of that variant, as a re-lock of it did."""
    shipped = default_lockfile(Path(profile).stem, variant, job.platform, LOCKFILES_DIR)
    return LockRequest(
        options=options,
        platform=job.platform,
        python=job.python,
        exclude_newer=job.exclude_newer,
        output=lock_path(job, profile, variant, single=single),
        upgrade=job.upgrade,
        glibc=job.glibc,
        base=None if job.folder or job.output else shipped,
    )


@dataclass(frozen=True)
class Locked:
    """One lock made: the result, its package count, and its changes against the lockfile it
    replaced (None: a new lockfile, none was there to compare with)."""

    result: LockResult
    packages: int
    changes: tuple[VersionChange, ...] | None

    @property
    def state(self) -> str:
        return "wrote" if self.result.changed else "unchanged"


def lock_variant(request: LockRequest, *, after: AfterLock | None = None) -> Locked:
    """Resolve and write one lockfile (`after`: lock_profile's hook); the changes are said
    against the lockfile that was at its path (not the shipped one it was based on)."""
    assert request.output is not None  # lock_request always names it
    existed = request.output.is_file()
    result = lock_profile(request, after=after)
    lock = result.lock
    previous = result.previous if existed else None
    changes = version_diff(previous, lock) if previous is not None else None
    return Locked(result, len(lock.distributions()) + len(lock.conda), changes)


@dataclass(frozen=True)
class CheckedLock:
    """`lock --check`'s verdict on one committed lockfile: its staleness against its profile and
    its gaps from verl's contract (lines; those naming what could not be checked here included)."""

    verdict: Staleness
    gaps: list[str]
    links: list[str] = field(default_factory=list)  # `--links`: what does not link, or unread

    @property
    def differences(self) -> list[str]:
        """The gaps that make the lock stale (not those naming what could not be checked)."""
        return [line for line in self.gaps if not line.startswith(UNCHECKED)]

    @property
    def link_failures(self) -> list[str]:
        """The libraries that do not link (not the wheels that could not be read)."""
        return [line for line in self.links if not line.startswith((UNCHECKED, REPLACED))]

    @property
    def stale(self) -> str | None:
        """Why the lock is stale, or None when it is current."""
        if self.verdict.reason:
            return self.verdict.reason
        said = [
            f"{len(found)} {what}"
            for found, what in (
                (self.differences, "difference(s) found"),
                (self.link_failures, "native link failure(s)"),
            )
            if found
        ]
        return ", ".join(said) or None


def check_lockfiles(
    folder: Path | None,
    profile: str | None,
    options_for: OptionsFor,
    *,
    offline: bool,
    links: bool = False,
) -> list[CheckedLock]:
    """Each committed lockfile (of `profile`, or every one) in `folder` (default: the tool's own),
    checked against its profile, verl's declared contract, its wheels' own requirements and its
    regenerate line; with `links`, its native libraries against each other."""
    paths = committed_lockfiles(folder or LOCKFILES_DIR, profile)
    # each check waits on the index far more than it computes: a few run at once
    with ThreadPoolExecutor(max_workers=_CHECKERS) as pool:
        return list(pool.map(lambda p: _checked(p, options_for, offline, links), paths))


def _link_gaps(path: Path, options_for: OptionsFor, offline: bool) -> list[str]:
    """Where a library of the lock's wheels needs a versioned symbol another one lacks."""
    try:
        lock = read_lockfile(path)
        settings = lock_index_settings(lock, options_for(lock.profile, lock.cuda.variant))
        profile = recorded_stack(lock)
        with tempfile.TemporaryDirectory(prefix="verl-lock-links-") as work:
            check = LinkCheck(settings, Path(work), cache_folder("native-links"), offline)
            return native_link_gaps(lock, check, replacing_wheels(lock, profile))
    except BootstrapError as exc:
        return [f"{UNCHECKED}its native libraries ({exc.message})"]


def _checked(path: Path, options_for: OptionsFor, offline: bool, links: bool) -> CheckedLock:
    verdict = stale_lockfile(path)
    gaps = _extras_gaps(path, options_for, offline, again=not verdict.reason)
    return CheckedLock(verdict, gaps, _link_gaps(path, options_for, offline) if links else [])


def _extras_gaps(path: Path, options_for: OptionsFor, offline: bool, *, again: bool) -> list[str]:
    """What the lockfile lacks or pins otherwise of verl's declared extras, where it leaves
    verl's [tool.uv] contract without a stated substitution, where its pins break their own
    metadata or a locked wheel's own requirement (but for the mismatches it records as forced),
    and, for a lock that is otherwise current, where its regenerate line gives other versions
    (lines)."""
    try:
        lock = read_lockfile(path)
        profile = recorded_stack(lock)
        options = options_for(lock.profile, lock.cuda.variant)
        with tempfile.TemporaryDirectory(prefix="verl-lock-check-") as work:
            pyproject = verl_pyproject(profile, options, Path(work))
            check = MetadataCheck(lock_index_settings(lock, options), Path(work), offline)
            contract = (
                _contract_gaps(lock, profile, pyproject, check)
                if declared_extras(profile, lock.cuda.variant)
                else []
            )
            found = [*contract, *forced_gaps(lock, profile, pyproject, check)]
            found = [*uv_lock_pin_gaps(lock, profile), *found]
            if not again or any(not line.startswith(UNCHECKED) for line in found):
                return found  # stale already: it is regenerated anyway, not resolved again here
            return [*found, *regenerate_gaps(lock, profile, options, check)]
    except BootstrapError as exc:
        return [f"cannot check it: {exc.message}"]


def _contract_gaps(
    lock: Lockfile, profile: Profile, pyproject: Path, check: MetadataCheck
) -> list[str]:
    """verl's declared extras and [tool.uv] contract, its uv.lock, and the pins' metadata."""
    return [
        *(g.line() for g in extras_gaps(lock, profile, pyproject)),
        *contract_gaps(lock, profile, pyproject),
        *_uv_lock_gaps(lock, profile, pyproject.parent, check.work),
        *metadata_gaps(lock, profile, pyproject, check),
    ]


def _uv_lock_gaps(lock: Lockfile, profile: Profile, checkout: Path, work: Path) -> list[str]:
    """Where the lock is not verl's uv.lock, for the stack that lock is made for."""
    variant = lock.cuda.variant
    if not applies_to(profile, variant, lock.python, lock.platform):
        return []
    extras = declared_extras(profile, variant)
    pins = export_uv_lock(checkout, extras, lock.python, lock.platform, work)
    if not pins:
        return []
    subs = [s for s in profile.substitutions if s.applies(variant)]
    unseen = unhashed(pins)
    gap = f"{UNCHECKED}the artifacts of {', '.join(unseen)} (verl's uv.lock records no sha256)"
    return [*uv_lock_gaps(lock.distributions(), pins, subs), *([gap] if unseen else [])]


@dataclass(frozen=True)
class NamedLock:
    """The lockfile a command reads, where it is, and a note when a variant was chosen for it."""

    lock: Lockfile
    path: Path
    note: str | None = None


def named_lockfile(
    command: str, lockfile: Path | None, profile: str | None, cuda: str | None, platform: str
) -> NamedLock:
    """The lockfile --lockfile names, else that of --profile/--cuda/--platform: this folder's
    own (`lock` wrote it here), else the one committed with the tool."""
    if lockfile is not None:
        return NamedLock(read_lockfile(lockfile), lockfile)
    if not profile:
        raise InputError(f"{command}: pass --lockfile PATH or --profile NAME")
    variant, note = (cuda, None) if cuda else _locked_variant(profile, platform)
    path = _profile_lockfile(profile, variant, platform)
    if not path.is_file():
        raise InputError(
            f"no lockfile at {path}",
            hint=f"make it with `verl-bootstrap lock --profile {profile} --cuda {variant} "
            f"--platform {platform}`",
        )
    return NamedLock(read_lockfile(path), path, note)


def _profile_lockfile(profile: str, variant: str, platform: str) -> Path:
    """This folder's lockfile of the profile and variant when it has one, else the committed."""
    own = project_lockfile(profile, variant, platform)
    return own if own.is_file() else default_lockfile(Path(profile).stem, variant, platform)


def _locked_variant(profile_name: str, platform: str) -> tuple[str, str | None]:
    """The profile's first CUDA variant that has a committed lockfile for `platform` (with a note
    when there is a choice); InputError naming the variants when none has one."""
    variants = list(load_profile(profile_name).cuda_variants)
    locked = [v for v in variants if _profile_lockfile(profile_name, v, platform).is_file()]
    if not locked:
        raise InputError(
            f"profile {profile_name!r} has no committed lockfile for {platform} "
            f"(its variants: {', '.join(variants)})",
            hint=f"make one with `verl-bootstrap lock --profile {profile_name} --cuda "
            f"{variants[0]} --platform {platform}`",
        )
    note = (
        f"the {locked[0]} lockfile of {profile_name} (--cuda chooses among {', '.join(locked)})"
        if len(locked) > 1
        else None
    )
    return locked[0], note
