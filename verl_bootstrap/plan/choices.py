"""The decisions a plan rests on, each made once and in order: the stack, the CUDA variant, the
route (with its lockfile read and hash-checked), then the host facts that depend on them.

Every later reader (the compiler, the record, the route line) takes them from `Choices`; none
works one out again. The user's options are never rewritten: what the run chose lives here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.format import UvLockUse, profile_hash
from verl_bootstrap.lock.installing.prepare import LockedInstall, precheck, prepare_locked
from verl_bootstrap.lock.lockroute import Route, choose_route
from verl_bootstrap.lock.lookup import NotServed
from verl_bootstrap.lock.making.refstack import RefStack
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.facts import HostFacts, gather_host
from verl_bootstrap.plan.refroute import run_stack
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.profile.variants import choose_variant
from verl_bootstrap.siteconfig.apply import index_settings

if TYPE_CHECKING:
    from verl_bootstrap.lock.bundle.bundleinstall import OpenedBundle

__all__ = ["Bundle", "Choices", "make_choices"]


@dataclass(frozen=True)
class Bundle:
    """`--bundle ARCHIVE`: the bundle a run installs from, and where it is unpacked (None: the
    tool's cache, kept for the next env from it; `plan` gives a scratch folder it removes)."""

    archive: Path
    into: Path | None = None


@dataclass(frozen=True)
class Choices:
    """What this run installs and where, each decided once (see the module docstring)."""

    options: RunOptions  # the user's; with --bundle, locked to the bundle (bundle.bundleinstall)
    profile: Profile  # its stack applied; narrowed to the lockfile's Python on a lockfile route
    host: HostFacts  # the variant and why, the interpreter, the indexes, the kernel sources
    locked: LockedInstall | None  # the lockfile installed, hash-checked (None: resolve)
    reason: str  # why the run resolves ("" when it installs a lockfile)
    digest: str  # the profile hash of `profile` before a lockfile narrowed its Python
    passed_over: tuple[str, ...] = ()  # notes: this folder's or the lab's lockfile not taken
    # the lockfile the env's record names: --lockfile, or the lab's that --locked/--frozen took
    # (a resume then installs that same file); None when the route chose one by default
    named_lockfile: Path | None = None
    opened: OpenedBundle | None = None  # --bundle: the bundle checked and unpacked for the run
    uv_lock: UvLockUse | None = None  # the stack is verl's uv.lock's slice: what a lock records


def make_choices(
    options: RunOptions,
    driver: DriverInfo | None,
    *,
    bundle: Bundle | None = None,
    check_optional: bool = True,
    planning: bool = False,
) -> Choices:
    """The stack, variant, route and host facts for `options` on a host with `driver`; with a
    bundle, it is checked against the variant and unpacked before the route is chosen.
    `planning`: for `plan` alone, which takes a GPU profile's default variant with no driver."""
    base = load_profile(options.profile)
    own = apply_stack(base, options.verl_ref, allow_unsupported=True)  # its variants at the ref
    variant = choose_variant(own, driver, options.cuda, planning=planning)
    at_ref = run_stack(base, options, variant[0], check_optional=check_optional)
    profile = at_ref.profile
    opened = None
    if bundle is not None:  # a step of planning: the options never unpack anything
        # loaded only when a bundle is named: `plan` and a plain install start without it
        from verl_bootstrap.lock.bundle.bundleinstall import open_bundle  # noqa: PLC0415 - see above

        opened = open_bundle(bundle.archive, options, profile, variant[0], into=bundle.into)
        options = opened.options
    indexes = index_settings(profile, options, check_optional=check_optional)
    route, narrowed, locked = _checked_route(profile, options, variant[0], indexes[0])
    route = _with_stack(route, at_ref)
    host = gather_host(narrowed, options, driver=driver, variant=variant, indexes=indexes)
    named = _named(options, route)
    digest = profile_hash(profile, variant[0])  # the one a lockfile of this profile carries
    return Choices(
        options,
        narrowed,
        host,
        locked,
        route.reason,
        digest,
        route.passed_over,
        named,
        opened,
        at_ref.uv_lock,
    )


def _checked_route(
    profile: Profile, options: RunOptions, variant: str, settings: IndexSettings
) -> tuple[Route, Profile, LockedInstall | None]:
    """The route with its lockfile hash-checked on the indexes (before the plan is compiled, so
    it is compiled once): a lockfile chosen by default whose files the indexes lack gives way to
    resolving, and says why; a required one is refused."""
    route, narrowed, locked = _lock_route(profile, options, variant)
    if locked is None:
        return route, narrowed, None
    try:
        return route, narrowed, precheck(locked, settings, offline=options.offline)
    except NotServed as exc:
        if lock_required(options):
            raise
        return replace(route, reason=exc.message), profile, None


def _with_stack(route: Route, at_ref: RefStack) -> Route:
    """The route with where the stack comes from (verl's uv.lock, say) and its notes."""
    if not at_ref.said:
        return route
    reason = f"{route.reason}; {at_ref.said}" if route.reason else route.reason
    return replace(route, reason=reason, passed_over=(*route.passed_over, *at_ref.notes))


def _named(options: RunOptions, route: Route) -> Path | None:
    """The lockfile the record names: the user's --lockfile, else the lab's one that a
    --locked/--frozen run took, else the folder's own that the run took (a resume, from any
    folder, must install it again), else none."""
    lab = lock_required(options) and route.origin == "lab"
    return options.lockfile or (route.lockfile if lab or route.origin == "folder" else None)


def lock_required(options: RunOptions) -> bool:
    """--locked, --frozen and --lockfile: a lockfile must fit, or the run fails."""
    return options.locked or options.frozen or options.lockfile is not None


def _lock_route(
    profile: Profile, options: RunOptions, variant: str
) -> tuple[Route, Profile, LockedInstall | None]:
    """The lockfile the run installs (the profile narrowed to its Python), or None and why not.

    By default the lab's lockfile, else the committed one, when it fits; `--locked`, `--frozen`
    and `--lockfile` require one (the lab's first when it fits); `--resolve` takes none.
    """
    required = lock_required(options)
    if required and options.resolve:
        raise InputError(
            "--resolve cannot be combined with --locked, --frozen or --lockfile",
            hint="--resolve resolves against today's index; the others install a lockfile",
        )
    if options.resolve:
        return Route(None, "", "--resolve given"), profile, None
    route = choose_route(profile, options, variant)
    if required:
        return _required(profile, options, variant, route)
    if route.lockfile is None:
        return route, profile, None
    narrowed, locked = prepare_locked(
        profile, options, variant, path=route.lockfile, lock=route.lock
    )
    return replace(route, reason=""), narrowed, replace(locked, origin=route.origin)


def _required(
    profile: Profile, options: RunOptions, variant: str, route: Route
) -> tuple[Route, Profile, LockedInstall]:
    """A lockfile must fit, or the run fails: the user's --lockfile, else the lab's that fits,
    else the committed one (checked, and refused with why when it does not fit)."""
    if options.with_tests:  # lockfiles hold the default selection of stages only
        raise InputError(
            "--with-tests cannot be combined with a lockfile install",
            hint="install the lockfile, then run the same command again without --locked "
            "and with --with-tests to add the test tools",
        )
    if options.lockfile is not None:  # the user's own choice: the lab's is not asked for
        route = replace(route, passed_over=())
    path = options.lockfile or route.lockfile  # None: the committed one, checked to say why
    read = route.lock if path == route.lockfile else None
    narrowed, locked = prepare_locked(profile, options, variant, path=path, lock=read)
    if route.origin and options.lockfile in (None, route.lockfile):
        locked = replace(locked, origin=route.origin)
    return replace(route, reason=""), narrowed, locked
