"""The one candidate list of a kernel stage, for both routes: what it tries, in order, and why
each other source has nothing for the env. Pure: the plan and the run both call it, with the key
they know.

The list is: the wheel a lockfile records (the same file, by sha256, from the bundle installed
from, the lab wheelhouse or its URL), the lab wheelhouse's wheel for the key, each declared
prebuilt source's wheel (release assets, indexes; as the site config orders and filters them),
the prebuilt index the profile states a key for, and last the stage's own install (a source
build of the pinned version, or as the stage says where it pins none).

A `--locked` install (`KernelQuery.lock`) takes nothing its lockfile does not allow: a locked
wheel is installed as locked; a recorded wheel is the only prebuilt one (absent or for another
key: the locked sdist builds); else a wheelhouse wheel of the locked version (a hash gap: its
sha256 is the wheelhouse's, not the lockfile's), then, online, the declared sources' wheels with
a URL (a hash gap: the lockfile pins the sdist, not that wheel), so that a lab wheel that fails
its load check passes to the next prebuilt source; and last a build of the locked sdist
(published to the wheelhouse afterwards, so the next node takes it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from verl_bootstrap.kernels.host import Bundled
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.lockview import LockedKernelDist, LockedKernelStage, PinnedKernelWheel
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.sources import (
    KernelChoice,
    Passed,
    declared_sources,
    from_source,
    held_parts,
    house_choice,
    index_choice,
    ordered_sources,
    pinned_version,
    wheelhouse_match,
)
from verl_bootstrap.kernels.wheelhouse import Entry
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = [
    "HOLDS",
    "LAST",
    "UNPINNED",
    "WHOLE",
    "Candidates",
    "KernelQuery",
    "LockPins",
    "candidates",
    "choose",
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
LAST = frozenset({"build", "stage", "locked"})  # the stage's own install: the list's last entry


@dataclass(frozen=True)
class LockPins:
    """What a `--locked` install's lockfile allows a kernel stage."""

    dist: LockedKernelDist  # the kernel's locked distribution
    stage: LockedKernelStage | None = None  # its versions stand in for the stage's pins
    bundle: Bundled | None = None  # the kernel wheels of the bundle installed from
    online: bool = True  # False (--offline, a bundle): no declared source is asked


@dataclass(frozen=True)
class KernelQuery:
    """What a kernel stage's sources are asked: a wheel of (kernel, version) for `key`."""

    kernel: KernelSpec
    version: str | None  # the stage's `==` pin (None: it pins none; the stage installs it)
    key: BuildKey
    packages: tuple[str, ...] = ()  # the stage's requirements (a whole wheel's version)
    entries: tuple[Entry, ...] = ()  # the lab wheelhouse's listing
    root: str | None = None  # the lab wheelhouse, as shown
    record: KernelRecord | None = None  # the declared sources' recorded wheel lists
    order: tuple[str, ...] | None = None  # the site config's kernel_sources (None: declared)
    lock: LockPins | None = None  # a --locked install: only what the lockfile allows


@dataclass(frozen=True)
class Candidates:
    """The choices in order (the last is the stage's own install), and why each other source
    has none for the env (the run's notes; the last choice's reason says the same)."""

    choices: tuple[KernelChoice, ...]
    passed: tuple[Passed, ...]

    @property
    def why_not(self) -> tuple[str, ...]:
        """Why each other source has none, as the notes say it."""
        return tuple(p.why for p in self.passed)


def choose(query: KernelQuery) -> KernelChoice:
    """What the plan shows: the first candidate."""
    return candidates(query).choices[0]


def candidates(query: KernelQuery) -> Candidates:
    """Every candidate for the env in order, ending with the stage's own install."""
    why_not: list[Passed] = []
    if query.lock is not None and query.lock.dist.source == "wheel":
        locked = KernelChoice("locked", "the locked wheel, hash-checked (nothing is compiled)")
        return Candidates((locked,), ())
    found = _prebuilt(query, why_not) if query.lock is None else _allowed(query, why_not)
    return Candidates((*found, _last(query, why_not)), tuple(why_not))


def _prebuilt(query: KernelQuery, why_not: list[Passed], house: bool = True) -> list[KernelChoice]:
    """Every source with a wheel for the env, in the order of trust the site keeps; and why each
    other source has none in `why_not`. `house`: False when the lab wheelhouse was asked first
    (a --locked install)."""
    found: list[KernelChoice] = []
    kernel, version, key = query.kernel, query.version, query.key
    for source in ordered_sources(kernel, query.order, why_not):
        if source is None:  # the lab wheelhouse
            if house and version is not None:
                entry = wheelhouse_match(kernel, version, key, query.entries, why_not)
                if entry is not None:
                    found.append(house_choice(entry, query.root))
            continue
        dist = source.distribution or kernel.distribution
        wanted = pinned_version(query.packages, dist, key) if source.distribution else version
        if wanted is not None:
            found.extend(from_source(source, (dist, wanted), key, query.record, why_not))
    if version is not None and (query.order is None or "index" in query.order):
        index = index_choice(kernel, key, why_not)
        if index is not None:
            found.append(index)
    return found


def _last(query: KernelQuery, why_not: list[Passed]) -> KernelChoice:
    """The stage's own install: a source build of the pinned (or locked) version, or the stage's
    install as it says where it pins none."""
    passed = tuple(why_not)
    texts = [p.why for p in passed]
    if query.lock is not None:  # after a recorded or wheelhouse wheel, nothing else was asked
        why = f": {'; '.join(texts)}" if texts else ""
        return KernelChoice("build", f"source build of the locked sdist{why}", passed=passed)
    said = [*texts, query.kernel.on_index] if query.kernel.on_index else texts
    if query.version is None:
        name = query.kernel.distribution
        reason = f"as the stage installs it (it pins no exact version of {name}), sized build"
        return KernelChoice("stage", "; ".join([reason, *said]), passed=passed)
    return KernelChoice("build", f"source build: {'; '.join(said)}", passed=passed)


def _allowed(query: KernelQuery, why_not: list[Passed]) -> list[KernelChoice]:
    """A --locked install's prebuilt candidates: only what its lockfile allows (module doc)."""
    assert query.lock is not None
    dist = query.lock.dist
    recorded = _recorded(query, why_not)
    if recorded is not None or dist.kernel_wheel is not None:
        return [recorded] if recorded else []
    found = []
    entry = wheelhouse_match(query.kernel, dist.version, query.key, query.entries, why_not)
    if entry is not None:  # the wheelhouse's sha256, not the lockfile's: a named gap
        house = _from_house(entry, query.root, "")
        found.append(_unpinned(house))
    if not query.lock.online:
        declared = tuple(s.id for s in declared_sources(query.kernel))
        said = "offline: the declared prebuilt sources are not asked"
        why_not.append(Passed(said, declared, "offline"))
        return found
    # after the lab's wheel, the declared sources' (one that fails its load check passes on)
    return [*found, *_declared(query, why_not)]


def _declared(query: KernelQuery, why_not: list[Passed]) -> list[KernelChoice]:
    """The declared sources' wheels of the locked version for the key, as the resolving route
    finds them (same order, same site-config filter; the lab wheelhouse was asked already), each
    one a wheel the lockfile does not pin. Only a wheel with a URL: its file is fetched, its
    sha256 computed and recorded. A whole wheel of another distribution the stage locks at the
    same version (TransformerEngine, for its torch extension) stands in for that one, and the
    parts it holds are left out of the install."""
    assert query.lock is not None
    stage, order = query.lock.stage, query.order
    # the lab wheelhouse is asked first whatever the site config says, as before
    ordered = None if order is None else ("wheelhouse", *(i for i in order if i != "wheelhouse"))
    pins = tuple(f"{d.name}=={d.version}" for d in stage.distributions) if stage else ()
    asked = replace(query, packages=pins, order=ordered, entries=())
    out = []
    for choice in _prebuilt(asked, why_not, house=False):
        if choice.wheel is None:
            shown = choice.origin or choice.source
            why_not.append(Passed(f"{shown}: no wheel URL to fetch and record", (shown,), "no-url"))
        elif choice.distribution:
            out.append(_whole(choice, query.kernel, stage))
        else:
            out.append(_unpinned(choice))
    return out


def _unpinned(choice: KernelChoice) -> KernelChoice:
    """A wheel the lockfile does not pin (it pins the sdist): a hash gap, said in its reason."""
    notes = (*choice.notes, UNPINNED)
    return replace(choice, reason=choice.reason + UNPINNED, unpinned=True, notes=notes)


def _whole(
    choice: KernelChoice, kernel: KernelSpec, stage: LockedKernelStage | None
) -> KernelChoice:
    """A whole wheel of `choice.distribution` in place of the locked one, with the locked parts
    it holds (the kernel's own distribution, and what its source says it replaces) left out."""
    assert choice.distribution is not None
    names = [d.name for d in stage.distributions] if stage else [kernel.distribution]
    left_out = held_parts(kernel, choice.replaces, names)
    holds = HOLDS.format(whole=choice.distribution, parts=_and(left_out))
    notes = (*choice.notes, holds, WHOLE)
    reason = choice.reason + holds + WHOLE
    return replace(choice, reason=reason, unpinned=True, replaces=left_out, notes=notes)


def _recorded(query: KernelQuery, why: list[Passed]) -> KernelChoice | None:
    """The very file the lockfile records, when its key is the env's: from the bundle, else the
    lab wheelhouse, else its URL."""
    assert query.lock is not None
    wheel = query.lock.dist.kernel_wheel
    if wheel is None:
        return None
    stated = BuildKey.from_mapping(wheel.key.model_dump())
    if stated.mismatches(query.key):
        said = f"the lockfile's {wheel.file} is built for {stated.describe()}, not this env"
        why.append(Passed(said, ("lockfile",), "other-build"))
        return None
    choice = _recorded_choice(wheel, stated, query)
    if choice is None:
        said = f"the lockfile's {wheel.file} (sha256 {wheel.sha256[:12]}…) is not in the wheelhouse"
        why.append(Passed(said, ("lockfile",), "not-found"))
        return None
    if wheel.distribution is None:
        return choice
    holds = HOLDS.format(whole=wheel.distribution, parts=_and(wheel.replaces))
    return replace(
        choice,
        reason=choice.reason + holds,
        distribution=wheel.distribution,
        replaces=wheel.replaces,
        notes=(*choice.notes, holds),
    )


def _and(names: Sequence[str]) -> str:
    """'a, b and c'."""
    if not names:
        return "nothing"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _recorded_choice(
    wheel: PinnedKernelWheel, stated: BuildKey, query: KernelQuery
) -> KernelChoice | None:
    """Where the very file the lockfile records is: the bundle, the lab wheelhouse, its URL."""
    bundle = query.lock.bundle if query.lock else None
    carried = bundle.find(wheel.sha256) if bundle else None
    if bundle is not None and carried is not None:
        reason = (
            f"prebuilt from the bundle, key {stated.describe()}, sha256 {wheel.sha256[:12]}… "
            "(the file the lockfile records; nothing is downloaded)"
        )
        where = str(bundle.root / carried.file)
        return KernelChoice("bundle", reason, where, wheel.sha256, stated)
    entry = next((e for e in query.entries if e.sha256 == wheel.sha256), None)
    if entry is not None:
        return _from_house(entry, query.root, " (the file the lockfile records)")
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
