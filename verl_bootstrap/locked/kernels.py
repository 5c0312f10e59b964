"""Kernel stages of a `--locked` install, decided: the wheel the lockfile records (the same file,
by sha256, from the bundle installed from, the lab wheelhouse or its release URL), else a
wheelhouse wheel of the locked version whose build key matches the env (a hash gap: its sha256
is the wheelhouse's, not the lockfile's), else (the lockfile
records no wheel) the first declared prebuilt source that serves the locked version for the
env's key, as the resolving route chooses it (a hash gap: the lockfile pins the sdist, not that
wheel), else a source build of the locked sdist (published to the wheelhouse afterwards, so the
next node takes it). Pure: the plan and the run both call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from verl_bootstrap.gpu.model import DriverInfo
from verl_bootstrap.kernels.host import Bundled, KernelHost
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.planning import KernelDecision, cxx11_abi, decision
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.sources import KernelChoice, candidates, held_parts, wheelhouse_match
from verl_bootstrap.kernels.wheelhouse import Entry
from verl_bootstrap.lockfile.model import KernelWheel, LockedDist, LockedStage, Lockfile
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = [
    "HOLDS",
    "UNPINNED",
    "WHOLE",
    "choose_locked",
    "kernel_dist",
    "locked_choices",
    "locked_key",
    "plan_locked_kernels",
]

UNPINNED = (
    "; the lockfile pins the sdist, not this wheel: its key is checked against the env, and its "
    "sha256 is recorded in the env's lock"
)
HOLDS = (
    "; a whole {whole} wheel, installed in place of the locked {whole}, with the locked {parts} "
    "left out (it holds them)"
)
WHOLE = (
    ": the lockfile pins none of it as this wheel, so its key is checked against the env, and "
    "its sha256 is recorded in the env's lock"
)


def locked_key(lock: Lockfile, platform: str | None) -> BuildKey:
    """The key the env of `lock` will have (its torch, CUDA and Python; this host's platform)."""
    torch = lock.cuda.torch.split("+", 1)[0] if lock.cuda.torch else None
    cuda = lock.cuda.torch_cuda or ("cpu" if torch else None)
    major, minor = lock.python.split(".")[:2]
    return BuildKey(torch, cuda, cxx11_abi(torch), f"cp{major}{minor}", platform)


def kernel_dist(stage: LockedStage, kernel: KernelSpec) -> LockedDist | None:
    """The locked distribution of the kernel in `stage`."""
    return stage.find(kernel.distribution)


def choose_locked(
    kernel: KernelSpec,
    dist: LockedDist,
    key: BuildKey,
    entries: Sequence[Entry],
    root: str | None,
    *,
    record: KernelRecord | None = None,
    order: Sequence[str] | None = None,
    online: bool = True,
    stage: LockedStage | None = None,
    bundle: Bundled | None = None,
) -> KernelChoice:
    """Where the locked kernel's wheel comes from, and why."""
    return locked_choices(
        kernel,
        dist,
        key,
        entries,
        root,
        record=record,
        order=order,
        online=online,
        stage=stage,
        bundle=bundle,
    )[0]


def locked_choices(
    kernel: KernelSpec,
    dist: LockedDist,
    key: BuildKey,
    entries: Sequence[Entry],
    root: str | None,
    *,
    record: KernelRecord | None = None,
    order: Sequence[str] | None = None,
    online: bool = True,
    stage: LockedStage | None = None,
    bundle: Bundled | None = None,
) -> list[KernelChoice]:
    """What the stage tries, in order: the locked wheel, the recorded one, a wheelhouse wheel, or
    each declared source's wheel (the run falls through them when a download fails) and then a
    build of the locked sdist. `record`, `order`: the sources' recorded lists and the site
    config's kernel_sources; `online`: False (--offline, a bundle) asks no declared source;
    `stage`: the locked stage, whose versions stand in for its pins (a source's whole wheel of
    another distribution of the stage is named, not taken); `bundle`: the kernel wheels of the
    bundle installed from, searched by sha256 first."""
    if dist.source == "wheel":
        return [KernelChoice("locked", "the locked wheel, hash-checked (nothing is compiled)")]
    why_not: list[str] = []
    recorded = _recorded(dist, key, why_not, entries=entries, root=root, bundle=bundle)
    if recorded is not None:
        return [recorded]
    found: list[KernelChoice] = []
    if dist.kernel_wheel is None:
        entry = wheelhouse_match(kernel, dist.version, key, entries, why_not)
        if entry is not None:  # the wheelhouse's sha256, not the lockfile's: a named gap
            house = _from_house(entry, root, "")
            return [replace(house, reason=house.reason + UNPINNED, unpinned=True)]
        if online:
            found = _declared(
                kernel, dist.version, key, why_not, stage=stage, record=record, order=order
            )
        else:
            why_not.append("offline: the declared prebuilt sources are not asked")
    build = KernelChoice("build", f"source build of the locked sdist: {'; '.join(why_not)}")
    return [*found, build]


def _declared(
    kernel: KernelSpec,
    version: str,
    key: BuildKey,
    why_not: list[str],
    *,
    stage: LockedStage | None,
    record: KernelRecord | None,
    order: Sequence[str] | None,
) -> list[KernelChoice]:
    """The declared sources' wheels of the locked version for `key`, as the resolving route
    finds them (same order, same site-config filter; the lab wheelhouse was asked already), each
    one a wheel the lockfile does not pin. Only a wheel with a URL: its file is fetched, its
    sha256 computed and recorded. A whole wheel of another distribution the stage locks at the
    same version (TransformerEngine, for its torch extension) stands in for that one, and the
    parts it holds are left out of the install."""
    # the lab wheelhouse is asked first whatever the site config says, as before
    ordered = None if order is None else ("wheelhouse", *(i for i in order if i != "wheelhouse"))
    pins = tuple(f"{d.name}=={d.version}" for d in stage.distributions) if stage else ()
    found, why = candidates(
        kernel, version, key, (), None, packages=pins, record=record, order=ordered, house=False
    )
    why_not.extend(why)
    out = []
    for choice in found:
        if choice.wheel is None:
            why_not.append(f"{choice.origin or choice.source}: no wheel URL to fetch and record")
        elif choice.distribution:
            out.append(_whole(choice, kernel, stage))
        else:
            out.append(replace(choice, reason=choice.reason + UNPINNED, unpinned=True))
    return out


def _whole(choice: KernelChoice, kernel: KernelSpec, stage: LockedStage | None) -> KernelChoice:
    """A whole wheel of `choice.distribution` in place of the locked one, with the locked parts
    it holds (the kernel's own distribution, and what its source says it replaces) left out."""
    assert choice.distribution is not None
    names = [d.name for d in stage.distributions] if stage else [kernel.distribution]
    left_out = held_parts(kernel, choice.replaces, names)
    reason = choice.reason + HOLDS.format(whole=choice.distribution, parts=_and(left_out)) + WHOLE
    return replace(choice, reason=reason, unpinned=True, replaces=left_out)


def _recorded(
    dist: LockedDist,
    key: BuildKey,
    why: list[str],
    *,
    entries: Sequence[Entry],
    root: str | None,
    bundle: Bundled | None,
) -> KernelChoice | None:
    """The very file the lockfile records, when its key is the env's: from the bundle, else the
    lab wheelhouse, else its URL."""
    wheel = dist.kernel_wheel
    if wheel is None:
        return None
    stated = BuildKey.from_mapping(wheel.key.model_dump())
    if stated.mismatches(key):
        why.append(f"the lockfile's {wheel.file} is built for {stated.describe()}, not this env")
        return None
    choice = _recorded_choice(wheel, stated, entries=entries, root=root, bundle=bundle)
    if choice is None:
        why.append(
            f"the lockfile's {wheel.file} (sha256 {wheel.sha256[:12]}…) is not in the wheelhouse"
        )
        return None
    if wheel.distribution is None:
        return choice
    reason = choice.reason + HOLDS.format(whole=wheel.distribution, parts=_and(wheel.replaces))
    return replace(choice, reason=reason, distribution=wheel.distribution, replaces=wheel.replaces)


def _and(names: Sequence[str]) -> str:
    """'a, b and c'."""
    if not names:
        return "nothing"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _recorded_choice(
    wheel: KernelWheel,
    stated: BuildKey,
    *,
    entries: Sequence[Entry],
    root: str | None,
    bundle: Bundled | None,
) -> KernelChoice | None:
    """Where the very file the lockfile records is: the bundle, the lab wheelhouse, its URL."""
    carried = bundle.find(wheel.sha256) if bundle else None
    if bundle is not None and carried is not None:
        reason = (
            f"prebuilt from the bundle, key {stated.describe()}, sha256 {wheel.sha256[:12]}… "
            "(the file the lockfile records; nothing is downloaded)"
        )
        where = str(bundle.root / carried.file)
        return KernelChoice("bundle", reason, where, wheel.sha256, stated)
    entry = next((e for e in entries if e.sha256 == wheel.sha256), None)
    if entry is not None:
        return _from_house(entry, root, " (the file the lockfile records)")
    if wheel.url:
        reason = (
            f"prebuilt release wheel the lockfile records, key {stated.describe()}, "
            f"sha256 {wheel.sha256[:12]}… ({wheel.url})"
        )
        return KernelChoice("release", reason, wheel.url, wheel.sha256, stated)
    return None


def _from_house(entry: Entry, root: str | None, note: str) -> KernelChoice:
    where = f"{root.rstrip('/')}/{entry.file}" if root else entry.file
    reason = (
        f"prebuilt from the lab wheelhouse, key {entry.key.describe()}, "
        f"sha256 {entry.sha256[:12]}…{note}"
    )
    return KernelChoice("wheelhouse", reason, where, entry.sha256, entry.key)


def plan_locked_kernels(
    lock: Lockfile,
    kernels: Mapping[str, KernelSpec],
    *,
    host: KernelHost,
    driver: DriverInfo | None,
    flags: tuple[str, ...],
    online: bool = True,
) -> dict[str, KernelDecision]:
    """stage id -> decision, for each locked stage the profile marks as a kernel stage."""
    key = locked_key(lock, host.platform)
    out = {}
    for stage in lock.stages:
        kernel = kernels.get(stage.id)
        dist = kernel_dist(stage, kernel) if kernel else None
        if kernel is not None and dist is not None:
            choice = choose_locked(
                kernel,
                dist,
                key,
                host.entries,
                str(host.wheelhouse),
                record=host.record,
                order=host.order,
                online=online,
                stage=stage,
                bundle=host.bundled,
            )
            out[stage.id] = decision(kernel, key, choice, host=host, driver=driver, flags=flags)
    return out
