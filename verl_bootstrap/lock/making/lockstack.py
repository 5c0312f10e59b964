"""The stack `lock` resolves at its verl ref (lock.making.refstack), and the stack a lockfile was
made from, made again to check it: a lockfile of verl's uv.lock replays what it recorded (the
sources it substituted were not reached, and the releases it holds stood in), so its staleness
asks no index and no git host beyond verl's own repository."""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.making.refstack import (
    RefStack,
    StackTarget,
    asked_stack,
    replayed,
    stack_at_ref,
)
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.profile.variants import known_variant
from verl_bootstrap.source.reffiles import ref_files

__all__ = ["lock_stack", "recorded_stack", "uv_lock_pin_gaps"]


def lock_stack(options: RunOptions, platform: str, python: str | None) -> tuple[RefStack, str]:
    """The profile `lock` resolves at --verl-ref for `platform` (`python`: the one asked for,
    else the previous lock's), and its variant."""
    base = load_profile(options.profile)
    own = apply_stack(base, options.verl_ref, allow_unsupported=True)
    variant = known_variant(own, options.cuda)
    # lock resolves no test extra: a lockfile is the stack a run installs
    return asked_stack(base, options, (variant, platform, python)), variant


def recorded_stack(lock: Lockfile, *, offline: bool = False) -> Profile:
    """The profile `lock` was made from, at its verl ref (see the module docstring)."""
    base = load_profile(lock.profile)
    use = lock.uv_lock
    if use is None:
        return apply_stack(base, lock.verl.ref, allow_unsupported=lock.allow_unsupported_ref)
    versions = {n: d.version for n, d in lock.distributions().items()}
    indexes = {name: spec.url for name, spec in base.indexes.items()}
    target = StackTarget(
        lock.cuda.variant,
        lock.platform,
        ".".join(lock.python.split(".")[:2]),  # an env's own lockfile records X.Y.Z
        lambda _ref: ref_files(lock.verl.repo, use.commit, offline=offline),
        replayed(use, versions, indexes=indexes),
    )
    return stack_at_ref(base, lock.verl.ref, target).profile


def uv_lock_pin_gaps(lock: Lockfile, profile: Profile) -> list[str]:
    """Where a lockfile of verl's uv.lock (`profile`: its stack, recorded_stack) lacks or
    pins otherwise one of that lock's pins (a substituted one: the release that stood in)."""
    if lock.uv_lock is None:
        return []
    locked = lock.distributions()
    gaps = []
    for line in profile.constraints:
        req = Requirement(line)
        name, want = canonicalize_name(req.name), next(iter(req.specifier)).version
        dist = locked.get(name)
        if dist is None:
            gaps.append(f"lacks {name}, which verl's uv.lock pins at {want}")
        elif not _same(dist.version, want):
            gaps.append(f"pins {name}=={dist.version}, verl's uv.lock has {want}")
    return gaps


def _same(locked: str, wanted: str) -> bool:
    """The same version; a pin with no local label (`2.13.0`, a substitution's release) is met
    by any build of that release (`2.13.0+cpu`)."""
    try:
        have, want = Version(locked), Version(wanted)
    except InvalidVersion:
        return locked == wanted
    return have == want or (want.local is None and have.public == want.public)
