"""Kernel stages of a `--locked` install, decided: the wheel the lockfile records (the same file,
by sha256, from the lab wheelhouse or its release URL), else a wheelhouse wheel of the locked
version whose build key matches the env, else a source build of the locked sdist (published to
the wheelhouse afterwards, so the next node takes it). Pure: the plan and the run both call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from packaging.utils import canonicalize_name

from verl_bootstrap.gpu.model import DriverInfo
from verl_bootstrap.kernels.host import KernelHost
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.planning import KernelDecision, cxx11_abi, decision
from verl_bootstrap.kernels.sources import KernelChoice, candidates, wheelhouse_match
from verl_bootstrap.kernels.wheelhouse import Entry
from verl_bootstrap.lockfile.model import LockedDist, LockedStage, Lockfile
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = ["choose_locked", "kernel_dist", "locked_key", "plan_locked_kernels"]


def locked_key(lock: Lockfile, platform: str | None) -> BuildKey:
    """The key the env of `lock` will have (its torch, CUDA and Python; this host's platform)."""
    torch = lock.cuda.torch.split("+", 1)[0] if lock.cuda.torch else None
    cuda = lock.cuda.torch_cuda or ("cpu" if torch else None)
    major, minor = lock.python.split(".")[:2]
    return BuildKey(torch, cuda, cxx11_abi(torch), f"cp{major}{minor}", platform)


def kernel_dist(stage: LockedStage, kernel: KernelSpec) -> LockedDist | None:
    """The locked distribution of the kernel in `stage`."""
    wanted = canonicalize_name(kernel.distribution)
    return next((d for d in stage.distributions if canonicalize_name(d.name) == wanted), None)


def choose_locked(
    kernel: KernelSpec,
    dist: LockedDist,
    key: BuildKey,
    entries: Sequence[Entry],
    root: str | None,
) -> KernelChoice:
    """Where the locked kernel's wheel comes from, and why."""
    if dist.source == "wheel":
        return KernelChoice("locked", "the locked wheel, hash-checked (nothing is compiled)")
    why_not: list[str] = []
    recorded = _recorded(dist, key, entries, root, why_not)
    if recorded is not None:
        return recorded
    if dist.kernel_wheel is None:
        entry = wheelhouse_match(kernel, dist.version, key, entries, why_not)
        if entry is not None:
            return _from_house(entry, root, "")
    return KernelChoice("build", f"source build of the locked sdist: {'; '.join(why_not)}")


def _recorded(
    dist: LockedDist, key: BuildKey, entries: Sequence[Entry], root: str | None, why: list[str]
) -> KernelChoice | None:
    """The very file the lockfile records, when its key is the env's."""
    wheel = dist.kernel_wheel
    if wheel is None:
        return None
    stated = BuildKey.from_mapping(wheel.key.model_dump())
    if stated.mismatches(key):
        why.append(f"the lockfile's {wheel.file} is built for {stated.describe()}, not this env")
        return None
    entry = next((e for e in entries if e.sha256 == wheel.sha256), None)
    if entry is not None:
        return _from_house(entry, root, " (the file the lockfile records)")
    if wheel.url:
        reason = (
            f"prebuilt release wheel the lockfile records, key {stated.describe()}, "
            f"sha256 {wheel.sha256[:12]}… ({wheel.url})"
        )
        return KernelChoice("release", reason, wheel.url, wheel.sha256, stated)
    why.append(
        f"the lockfile's {wheel.file} (sha256 {wheel.sha256[:12]}…) is not in the wheelhouse"
    )
    return None


def _from_house(entry: Entry, root: str | None, note: str) -> KernelChoice:
    where = f"{root.rstrip('/')}/{entry.file}" if root else entry.file
    reason = (
        f"prebuilt from the lab wheelhouse, key {entry.key.describe()}, "
        f"sha256 {entry.sha256[:12]}…{note}"
    )
    return KernelChoice("wheelhouse", reason, where, entry.sha256, entry.key)


def _unpinned_hint(
    choice: KernelChoice,
    stage: LockedStage,
    kernel: KernelSpec,
    dist: LockedDist,
    key: BuildKey,
    *,
    host: KernelHost,
) -> KernelChoice:
    """A build whose declared sources do have a wheel says so: the lockfile records no sha256
    for it, so a --locked install may not take it (a lock made with the network would, for a
    wheel of the kernel itself; a whole other distribution's, only --resolve takes)."""
    if choice.source != "build" or dist.kernel_wheel is not None:
        return choice
    # the locked versions stand in for the stage's pins (a source's wheel may be of another
    # distribution of the stage: a whole TransformerEngine for its torch extension)
    pins = tuple(f"{d.name}=={d.version}" for d in stage.distributions)
    found, _ = candidates(
        kernel, dist.version, key, (), None, packages=pins, record=host.record, order=host.order
    )
    if not found:
        return choice
    first = found[0]
    if first.distribution:
        hint = (
            f"; {first.origin} has a whole {first.distribution} wheel for this key, which a "
            f"lockfile does not record in place of the locked {first.distribution}: "
            "--resolve takes it"
        )
    else:
        hint = (
            f"; {first.origin} has a prebuilt wheel for this key, but the lockfile records none "
            "(no sha256 to check it against): `verl-bootstrap lock` on a host that reaches it "
            "records it, or --resolve takes it now"
        )
    return replace(choice, reason=choice.reason + hint)


def plan_locked_kernels(
    lock: Lockfile,
    kernels: Mapping[str, KernelSpec],
    *,
    host: KernelHost,
    driver: DriverInfo | None,
    flags: tuple[str, ...],
) -> dict[str, KernelDecision]:
    """stage id -> decision, for each locked stage the profile marks as a kernel stage."""
    key = locked_key(lock, host.platform)
    out = {}
    for stage in lock.stages:
        kernel = kernels.get(stage.id)
        dist = kernel_dist(stage, kernel) if kernel else None
        if kernel is not None and dist is not None:
            choice = choose_locked(kernel, dist, key, host.entries, str(host.wheelhouse))
            choice = _unpinned_hint(choice, stage, kernel, dist, key, host=host)
            out[stage.id] = decision(kernel, key, choice, host=host, driver=driver, flags=flags)
    return out
