"""`--locked` / `--frozen`, plan-time: install exactly a lockfile, with no resolution.

`--locked` first checks that the lockfile was made from the profile as it is now (its profile
hash), `--frozen` takes the lockfile as it is. Then, while the plan is compiled and before
anything is written to the prefix, every locked artifact is looked up on the user's configured
indexes and its sha256 compared with the lockfile's; a mismatch refuses the run and names the
package. Each stage then installs the checked files by URL from a requirements file, with
`--no-deps --require-hashes`, so the installer checks the bytes it downloads too.
"""

from __future__ import annotations

import os
import platform as _platform
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from verl_bootstrap.errors import InputError, Refused
from verl_bootstrap.installer.artifact import Artifact, Served
from verl_bootstrap.lock.format import LockedDist, Lockfile, profile_hash
from verl_bootstrap.lock.installing import memo
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.lookup import (
    hashed_dists,
    lookup,
    mismatches,
    refuse_unserved,
    stage_index,
)
from verl_bootstrap.lock.wheelrank import preferred
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.machine.host.interpreters import minor_range
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import default_lockfile
from verl_bootstrap.platforms import MACHINES, host_platform
from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.profile.models import RESERVED_STEP_IDS, Profile, PythonSpec
from verl_bootstrap.profile.stagespec import StageSpec, stage_specs
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.buildvars import not_covered
from verl_bootstrap.safety.urlmatch import url_within
from verl_bootstrap.source.spec import SourceSpec

__all__ = [
    "LockedInstall",
    "locked_source_spec",
    "locked_stage_specs",
    "precheck",
    "prepare_locked",
    "stage_index",
]


@dataclass(frozen=True)
class LockedInstall:
    """The lockfile a run installs, and where it came from."""

    lock: Lockfile
    path: Path
    frozen: bool
    origin: str = "--lockfile"  # whose lockfile: "--lockfile", "lab", "committed"
    artifacts: Mapping[str, Artifact] = field(default_factory=dict)  # name -> the checked file


def prepare_locked(
    profile: Profile,
    options: RunOptions,
    variant: str,
    *,
    path: Path | None = None,
    lock: Lockfile | None = None,
) -> tuple[Profile, LockedInstall]:
    """Check the lockfile at `path` (default: --lockfile, else the committed one of the plan's
    `variant`) against the run; `lock`: its content, when the route already read it. Returns the
    profile narrowed to the lock's Python."""
    path = path or options.lockfile or default_lockfile(profile.name, variant, host_platform())
    if lock is None:
        lock = _read(path, profile, options, variant)
    _check_matches(lock, path, profile, variant, frozen=options.frozen)
    # a range, not "==X.Y.*": conda's match specs refuse "*" after "=="
    python = PythonSpec(requires=minor_range(lock.python), prefer=lock.python)
    narrowed = profile.model_copy(update={"python": python})
    origin = "--lockfile" if options.lockfile is not None else "committed"
    return narrowed, LockedInstall(lock=lock, path=path, frozen=options.frozen, origin=origin)


def _read(path: Path, profile: Profile, options: RunOptions, variant: str) -> Lockfile:
    if not path.is_file():
        raise InputError(
            f"no lockfile for profile {profile.name!r}, variant {variant} at {path}",
            hint=f"make one with `verl-bootstrap lock --profile {options.profile} --cuda {variant}`"
            ", or pass --lockfile PATH",
        )
    return read_lockfile(path)


def _check_matches(
    lock: Lockfile, path: Path, profile: Profile, variant: str, *, frozen: bool
) -> None:
    host = host_platform()
    if lock.platform != host:
        theirs, ours = MACHINES.get(lock.platform, lock.platform), MACHINES.get(host, host)
        raise InputError(
            f"{path} is for {lock.platform} ({theirs} wheels); this machine is {host} ({ours}), "
            "where those wheels cannot load",
            hint=f"install the {host} lockfile of this profile (the default without --lockfile), "
            f"or lock for this machine with `verl-bootstrap lock --platform {host}`",
        )
    _check_glibc(lock, path)
    if lock.cuda.variant != variant:
        raise InputError(
            f"{path} is for CUDA variant {lock.cuda.variant}, this run chose {variant}",
            hint=f"pass --cuda {lock.cuda.variant}, or lock variant {variant}",
        )
    _check_stage_ids(lock, path, profile, variant)
    _check_editables(lock, path, profile, variant)
    _check_stage_env(lock, path, profile, variant)
    _check_kernel_urls(lock, path, profile, variant)
    if frozen:
        return
    if lock.profile != profile.name or lock.profile_hash != profile_hash(profile, variant):
        raise Refused(
            f"{path} is stale: profile {profile.name!r} changed since it was locked",
            hint=f"run `{lock.regenerate}` (or `verl-bootstrap lock --profile {profile.name}`) "
            "to update it, or pass --frozen to install it as it is",
        )


def _check_stage_ids(lock: Lockfile, path: Path, profile: Profile, variant: str) -> None:
    """Every stage the lockfile names is a step this profile runs: a lockfile can add no stage,
    and its stage ids (which name folders and files in the env) are ones the profile declared."""
    known = RESERVED_STEP_IDS | {spec.id for spec in stage_specs(profile, variant)}
    unknown = [stage.id for stage in lock.stages if stage.id not in known]
    if unknown:
        raise InputError(
            f"{path} locks stage(s) {', '.join(unknown)}, which profile {profile.name!r} lacks",
            hint=f"the lockfile was made for another profile; run `verl-bootstrap lock --profile "
            f"{profile.name}`",
        )


_LOCAL = (".", "/", "~", "file:", "-e")  # a profile's requirement of a folder on this machine


def _check_editables(lock: Lockfile, path: Path, profile: Profile, variant: str) -> None:
    """`source: editable` is verl's own checkout, or a stage's local folder: on any other
    distribution it would install nothing (an editable is never hash-checked), so it is refused."""
    local = {s.id for s in stage_specs(profile, variant) if any(_is_local(p) for p in s.packages)}
    odd = [
        f"{stage.id}: {dist.name}"
        for stage in lock.stages
        for dist in stage.distributions
        if dist.source == "editable" and dist.name != "verl" and stage.id not in local
    ]
    if odd:
        raise InputError(
            f"{path}: source: editable on {', '.join(odd)}, which the profile installs from an "
            "index, not from a local folder",
            hint="regenerate the lockfile (its `Regenerate with:` line); only verl's checkout and "
            "a stage's local folder are editable",
        )


def _is_local(requirement: str) -> bool:
    return requirement.startswith(_LOCAL) or " @ file:" in requirement


def _check_stage_env(lock: Lockfile, path: Path, profile: Profile, variant: str) -> None:
    """A lockfile weakens no variable the profile's own stage sets (it may set it only to the
    same value) and sets on its own nothing but sizing (safety/buildvars.py), also under
    --frozen: the profile is the user's, the lockfile may be a lab mate's."""
    own = {spec.id: spec.env for spec in stage_specs(profile, variant)}
    for stage in lock.stages:
        envs = [("env", stage.env)]
        envs += [(f"{d.name}'s build_env", d.build_env) for d in stage.distributions]
        for what, env in envs:
            extra = not_covered(env, own.get(stage.id, {}))
            if extra:
                raise InputError(
                    f"{path}: stage {stage.id}'s {what} sets {'; '.join(w for _, w in extra)} "
                    f"(profile {profile.name!r})",
                    hint="a lockfile may set only what the profile's stage sets, to the same "
                    "value, and sizing (MAX_JOBS, NVCC_THREADS, TORCH_CUDA_ARCH_LIST, ...); "
                    "regenerate it with `verl-bootstrap lock`",
                    data={
                        "file": str(path),
                        "stage": stage.id,
                        "variables": [n for n, _ in extra],
                        "profile": profile.name,
                    },
                )


def _check_kernel_urls(lock: Lockfile, path: Path, profile: Profile, variant: str) -> None:
    """A kernel wheel the lockfile records by URL comes from a source the profile declares for
    that stage (its release pattern, or its index's host), compared as URLs (safety/urlmatch.py:
    no `..` climbs out of the declared repository): a lab mate's lockfile cannot send the
    download (its sha256 is the lockfile's own word) to a host the profile never named."""
    kernels = {s.id: s.kernel for s in stage_specs(profile, variant) if s.kernel}
    urls = {name: index.url for name, index in profile.indexes.items()}
    for stage in lock.stages:
        for dist in stage.distributions:
            url = dist.kernel_wheel.url if dist.kernel_wheel else None
            kernel = kernels.get(stage.id)
            prefixes = kernel.url_prefixes(urls) if kernel else ()
            if url and not any(url_within(url, p) for p in prefixes):
                raise InputError(
                    f"{path}: stage {stage.id}: {dist.name}'s kernel_wheel.url {redact(url)} "
                    f"is not from a source profile {profile.name!r} declares for the stage",
                    hint="take kernel wheels from the profile's declared sources (or the lab "
                    "wheelhouse); regenerate the lockfile from an env that did",
                    data={
                        "file": str(path),
                        "stage": stage.id,
                        "distribution": dist.name,
                        "url": redact(url),
                        "profile": profile.name,
                    },
                )


def _check_glibc(lock: Lockfile, path: Path) -> None:
    """The lock's wheels need the glibc it was solved for (`__glibc`); older cannot load them."""
    wanted = lock.cuda.virtual_packages.get("__glibc")
    libc, have = _platform.libc_ver()
    if not wanted or libc != "glibc" or not have:
        return
    try:
        locked = Version(wanted)
    except InvalidVersion:
        raise InputError(
            f"{path}: cuda.virtual_packages.__glibc {wanted!r} is not a glibc version (X.Y)",
            hint="regenerate the lockfile (its `Regenerate with:` line), with --glibc X.Y",
        ) from None
    if Version(have) < locked:
        raise Refused(
            f"{path} was solved for glibc >= {wanted}; this machine has glibc {have}",
            hint="lock for this machine's glibc (`verl-bootstrap lock --glibc X.Y`)",
        )


def locked_stage_specs(
    lock: Lockfile,
    kernels: Mapping[str, KernelSpec] | None = None,
    envs: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[StageSpec, ...]:
    """The plan's stages, as the lockfile recorded them (install-verl is the plan's own step);
    `kernels` (stage id -> the profile's `kernel:` block) marks the kernel stages, and `envs`
    (stage id -> the profile stage's env) holds what a stage's env may not lose: a lockfile
    that leaves out FLASH_ATTENTION_FORCE_BUILD still builds as the profile says."""
    kernels, envs = kernels or {}, envs or {}
    return tuple(
        StageSpec(
            id=stage.id,
            kind="packages",
            description=f"{len(stage.distributions)} locked distribution(s), hash-checked",
            packages=(),
            index=stage_index(stage),
            no_build_isolation="--no-build-isolation" in stage.options,
            no_deps=True,
            env={**stage.env, **envs.get(stage.id, {})},
            kernel=kernels.get(stage.id),
        )
        for stage in lock.stages
        if stage.kind != "install-verl"
    )


def locked_source_spec(spec: SourceSpec, lock: Lockfile) -> SourceSpec:
    """verl's source at the locked commit (a git lock) or the locked release (an sdist lock)."""
    if lock.verl.kind == "git" and lock.verl.commit:  # a git lock is never served by an sdist
        return replace(spec, ref=lock.verl.commit, sdist_fallback=False)
    return replace(spec, ref=lock.verl.ref)


def _cached_lookup(lock: Lockfile, settings: IndexSettings, work: Path) -> Served | None:
    """The lookup from uv's cache alone (fast); None when the cache cannot answer it.

    A match here is as good as one online: the hashes are the lockfile's, and the installer
    checks the downloaded bytes against them. Anything else is asked of the index itself.
    """
    try:
        return lookup(lock, settings, offline=True, work=work)
    except Refused:
        return None


def precheck(locked: LockedInstall, settings: IndexSettings, *, offline: bool) -> LockedInstall:
    """Look every locked artifact up on the configured indexes; refuse on any sha256 mismatch.

    Runs in a scratch folder, before the prefix is touched. Returns `locked` with the URL of the
    artifact each distribution installs from: of the files whose sha256 the lockfile allows, the one
    an installer would take for the lock's target (lock/wheelrank.py: the most specific
    wheel, else the sdist), so the install resolves nothing and picks no other file. What an
    earlier precheck of the same lockfile on the same indexes chose is taken again
    (lock/installing/memo.py).
    """
    dists = hashed_dists(locked.lock)
    key = memo.memo_key(locked.path, settings, os.environ)
    chosen = memo.recall(key, dists)
    if chosen is None:
        chosen = _look_up(locked, settings, dists, offline=offline)
        memo.remember(key, chosen)
    return replace(locked, artifacts=chosen)


def _look_up(
    locked: LockedInstall, settings: IndexSettings, dists: list[LockedDist], *, offline: bool
) -> dict[str, Artifact]:
    with tempfile.TemporaryDirectory(prefix="verl-precheck-") as tmp:
        served = _cached_lookup(locked.lock, settings, Path(tmp) / "cached")
        if served is None or mismatches(dists, served):
            served = lookup(locked.lock, settings, offline=offline, work=Path(tmp) / "online")
    refuse_unserved(locked.path, dists, served)
    chosen = {}
    for dist in dists:
        allowed = [a for a in served.get(dist.name, ()) if a.sha256 in dist.hashes]
        chosen[dist.name] = preferred(allowed, locked.lock)
    return chosen
