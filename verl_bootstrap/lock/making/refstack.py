"""The stack a profile has at a verl ref, and where it comes from: a committed stack (the
profile's own ref, or one of its `stacks:`), else verl's own `uv.lock` where the ref ships one
(locking.uvstack), else, with --allow-unsupported-ref, the profile's own stack at that ref.

Install, plan and `lock` ask here once per run; `lock --check`, a lockfile's staleness and
`verify --prefix` ask again for a lock or an env made so, replaying what it recorded (which
indexes and git sources were reached, which release stood in) rather than asking the network.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import index_args
from verl_bootstrap.lock.format import UvLockUse
from verl_bootstrap.lock.lockcheckout import remote_commit
from verl_bootstrap.lock.making.uvstack import Reach, Uncovered, uv_lock_stack
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.platforms import DEFAULT_GLIBC, uv_platform
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack, stack_for
from verl_bootstrap.siteconfig.apply import index_settings
from verl_bootstrap.source.reffiles import RefFiles, ref_files

__all__ = [
    "RefStack",
    "StackTarget",
    "asked_stack",
    "committed_stack",
    "replayed",
    "run_reach",
    "stack_at_ref",
]

_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class RefStack:
    """The profile at the ref, what a lockfile records of a uv.lock stack, and what is said."""

    profile: Profile
    uv_lock: UvLockUse | None = None
    said: str = ""  # where the stack comes from (empty: a committed stack, as before)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StackTarget:
    """What a uv.lock stack is made for, and how the ref's files and the run's reach are had."""

    variant: str
    platform: str
    python: str | None  # X.Y asked for (None: the profile's preferred, where the lock allows)
    files: Callable[[str], RefFiles]
    reach: Reach
    options: frozenset[str] = field(default_factory=frozenset)  # stage options (`tests`)


def committed_stack(profile: Profile, ref: str | None) -> bool:
    """Whether the profile has its own stack for `ref` (its own ref, or one of `stacks:`)."""
    return ref is None or ref == profile.verl.ref or stack_for(profile, ref) is not None


def stack_at_ref(
    base: Profile, ref: str | None, target: StackTarget, *, allow_unsupported: bool = False
) -> RefStack:
    """`base` at `ref` for `target` (see the module docstring)."""
    if ref is None or committed_stack(base, ref):
        kept = apply_stack(base, ref, allow_unsupported=allow_unsupported, options=target.options)
        return RefStack(kept)
    own = apply_stack(base, ref, allow_unsupported=True, options=target.options)
    files = target.files(ref)
    if files.uv_lock is None or files.pyproject is None or files.commit is None:
        return _without_lock(base, ref, own, files, allow_unsupported=allow_unsupported)
    found = uv_lock_stack(
        own,
        ref,
        (files.uv_lock, files.pyproject, files.commit),
        variant=target.variant,
        platform=target.platform,
        python=target.python,
        reach=target.reach,
    )
    if isinstance(found, Uncovered):
        return RefStack(own, said=f"{found.why}: the profile's own stack resolves at {ref}")
    return RefStack(found.profile, found.use, found.summary, found.notes)


def asked_stack(
    base: Profile,
    options: RunOptions,
    target: tuple[str, str, str | None],
    *,
    tests: bool = False,
    check_optional: bool = True,
) -> RefStack:
    """`base` at the run's --verl-ref for `target` (variant, platform, Python X.Y or None), read
    from the source the run names (--verl-source, else the profile's repo) with the run's
    indexes: the one rule by which install, plan and `lock` find the stack they use. `tests`:
    the stack takes verl's test extra too (`install --with-tests`)."""
    variant, platform, python = target
    repo = options.verl_source or base.verl.repo

    def files(ref: str) -> RefFiles:
        return ref_files(repo, ref, offline=options.offline)

    settings, _ = index_settings(base, options, check_optional=check_optional)
    with tempfile.TemporaryDirectory(prefix="verl-ref-stack-") as work:
        reach = run_reach(
            settings,
            python=python or base.python.prefer,
            platform=platform,
            offline=options.offline,
            work=Path(work),
        )
        extras = frozenset({"tests"} if tests else ())
        asked = StackTarget(variant, platform, python, files, reach, extras)
        return stack_at_ref(
            base, options.verl_ref, asked, allow_unsupported=options.allow_unsupported_ref
        )


def _without_lock(
    base: Profile, ref: str, own: Profile, files: RefFiles, *, allow_unsupported: bool
) -> RefStack:
    """A ref with neither a stack nor a uv.lock: refused, or today's stack with the flag."""
    why = (
        f"verl {ref} ships no uv.lock"
        if files.commit
        else f"verl {ref}'s files could not be read ({files.why_unread or 'no answer'})"
    )
    if allow_unsupported:
        said = f"{why}, and profile {base.name!r} has no stack for it: its own stack at {ref}"
        return RefStack(own, said=said + " (--allow-unsupported-ref)")
    try:
        apply_stack(base, ref, options=frozenset())
    except InputError as exc:
        raise InputError(f"{exc.message}, and {why}", hint=exc.hint) from None
    return RefStack(own)  # pragma: no cover - apply_stack refuses a ref with no stack


def run_reach(
    settings: IndexSettings, *, python: str, platform: str, offline: bool, work: Path
) -> Reach:
    """What this run reaches: the named indexes it has, the git hosts that answer (none
    offline), and the configured indexes' releases (asked of uv)."""

    def git(url: str) -> bool:
        return not offline and remote_commit(url, "HEAD") is not None

    def nearest(name: str, version: str) -> str:
        where = (python, platform)
        return nearest_release(name, version, where, settings=settings, work=work, offline=offline)

    return Reach(indexes=dict(settings.named), git=git, nearest=nearest)


def nearest_release(
    name: str,
    version: str,
    where: tuple[str, str],
    *,
    settings: IndexSettings,
    work: Path,
    offline: bool = False,
) -> str:
    """The configured indexes' release nearest `version`: that one, else the lowest after it,
    else the highest before it (uv asked, for `where`: the target Python and platform)."""
    python, platform = where
    target = ["--python-version", python, "--python-platform", uv_platform(platform, DEFAULT_GLIBC)]
    for spec, how in ((f">={version}", "lowest"), (f"<{version}", "highest")):
        wanted = work / f"nearest-{name}.in"
        wanted.write_text(f"{name}{spec}\n", encoding="utf-8")
        argv = [uv_binary(), "pip", "compile", str(wanted), "--no-deps", "--no-header", "--quiet"]
        argv += [*target, "--resolution", how, *index_args(settings, None)]
        argv += ["--offline"] if offline else []
        done = proc.capture(argv, timeout=300)
        found = _PIN.search(done.stdout) if done.returncode == 0 else None
        if found:
            return found.group(1)
    raise InputError(
        f"{name}: verl's uv.lock builds it from git, which this run cannot reach, and the "
        "configured indexes have no release of it",
        hint="run where that git host is reachable, or add an index that serves it (--index)",
    )


def replayed(use: UvLockUse, versions: Mapping[str, str], *, indexes: Mapping[str, str]) -> Reach:
    """The reach a lock or an env recorded: a source it substituted was not reached, and the
    release that stood in is the one it holds (`versions`: name -> version)."""

    def git(url: str) -> bool:
        return not any(url in line for line in use.substitutions)

    def nearest(name: str, version: str) -> str:
        return versions.get(name, version)

    reached = {n: u for n, u in indexes.items() if not any(u in s for s in use.substitutions)}
    return Reach(indexes=reached, git=git, nearest=nearest)
