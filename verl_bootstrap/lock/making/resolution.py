"""A profile's stages resolved for one target: verl's checkout fetched, its extras and overrides
read, verl's own uv.lock taken where it is made for this stack, and every stage locked in
install order with the bounds an override erased restored where a release meets both
(lock/making/bounds). `lock` makes a lockfile of it; `lock --check` resolves a lock's own target
again and compares (locking.reproduce).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import pip_launcher
from verl_bootstrap.installer.resolve import Resolved, Target
from verl_bootstrap.lock.format import ForcedMismatch, LockedStage
from verl_bootstrap.lock.lockcheckout import lock_checkout
from verl_bootstrap.lock.making.bounds import forced_of, lock_with_bounds
from verl_bootstrap.lock.making.stages import StageInputs, verl_version
from verl_bootstrap.lock.making.uvlock import (
    UvLockPin,
    applies_to,
    export_uv_lock,
    unhashed,
    uv_lock_gaps,
)
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import StageSpec, stage_specs
from verl_bootstrap.profile.verlextras import marker_env, stage_pins
from verl_bootstrap.source.fetch import fetch_source
from verl_bootstrap.source.spec import SourceResult, SourceSpec

__all__ = ["Resolution", "fetch_verl", "resolve_stages"]


@dataclass(frozen=True)
class Resolution:
    """The stages of one lock: verl's source, each stage's distributions, every distribution
    resolved, and the mismatches overrides force."""

    source: SourceResult
    stages: tuple[LockedStage, ...]
    resolved: list[Resolved]
    forced: tuple[ForcedMismatch, ...]


def resolve_stages(
    profile: Profile,
    variant: str,
    target: Target,
    settings: IndexSettings,
    options: RunOptions,
    *,
    work: Path,
    kept: Mapping[str, str],
    notes: list[str],
) -> Resolution:
    """Lock the profile's stages for `target`, keeping the versions of `kept` where they fit."""
    source = fetch_verl(profile, options, settings, work)
    inputs = StageInputs(
        target=target,
        settings=settings,
        checkout=_scratch_copy(source.path, work),
        verl_version=verl_version(source.path, source.ref),
        protected=frozenset(canonicalize_name(n) for n in profile.protected),
        work=work,
        preferences=kept,
        constraints=profile.constraints,
    )
    env = marker_env(target.python, target.platform)
    specs = tuple(stage_pins(s, inputs.checkout, env) for s in stage_specs(profile, variant))
    pins = _uv_lock(profile, variant, target, specs, inputs, notes=notes)
    inputs = replace(inputs, uv_pins=pins)
    stages, resolved, forced, said = lock_with_bounds(specs, inputs, restore=not pins)
    notes.extend([*said, *forced_of(forced)])
    _check_uv_lock(stages, pins, profile, variant)
    return Resolution(source, stages, resolved, forced)


def fetch_verl(
    profile: Profile, options: RunOptions, settings: IndexSettings, work: Path
) -> SourceResult:
    """verl's checkout in the tool's cache (git at the commit the ref names now, else the
    release sdist)."""

    spec = SourceSpec.from_profile(profile, options, work)
    checkout = lock_checkout(spec.repo, spec.ref, offline=options.offline)
    spec = replace(spec, checkout=checkout)
    return fetch_source(spec, settings, pip=pip_launcher(), log_path=work / "fetch-source.log")


def _scratch_copy(checkout: Path, work: Path) -> Path:
    """A copy of verl's checkout to resolve from: reading its metadata builds it in place."""
    copy = work / "verl-src"
    shutil.copytree(checkout, copy, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)
    return copy


def _uv_lock(
    profile: Profile,
    variant: str,
    target: Target,
    specs: Sequence[StageSpec],
    inputs: StageInputs,
    *,
    notes: list[str],
) -> dict[str, UvLockPin]:
    """verl's uv.lock, exported for the deps stage's extras, where its stack is this one (the
    pins it records no sha256 for named in `notes`)."""
    if not applies_to(profile, variant, target.python, target.platform):
        return {}
    extras = next((s.extras for s in specs if s.kind == "verl-deps"), ())
    found = export_uv_lock(inputs.checkout, extras, target.python, target.platform, inputs.work)
    if found and unhashed(found):
        notes.append(
            "verl's uv.lock records no sha256 for "
            + ", ".join(unhashed(found))
            + " (an index that lists none, such as verl's wheelhouse): the lock takes their "
            "versions, and their artifacts are not compared with uv.lock's"
        )
    return found or {}


def _check_uv_lock(
    stages: Sequence[LockedStage],
    pins: Mapping[str, UvLockPin],
    profile: Profile,
    variant: str,
) -> None:
    """A lock made under verl's uv.lock holds its versions and artifacts, or says where not."""
    if not pins:
        return
    locked = {d.name: d for s in stages for d in s.distributions}
    subs = [s for s in profile.substitutions if s.applies(variant)]
    gaps = uv_lock_gaps(locked, pins, subs)
    if gaps:
        raise InputError(
            "the lock is not verl's uv.lock: " + "; ".join(gaps),
            hint="state a substitution with its reason in the profile where it must differ",
        )
