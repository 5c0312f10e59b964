"""Each kernel source on its own: the lab wheelhouse's wheel for a key, a declared prebuilt
source's wheels (release wheels whose names encode the key; a recorded list), the index whose key
the profile states, and why a source has none. `kernels/choices` puts them in one ordered list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from verl_bootstrap.kernels.key import BuildKey, render_template
from verl_bootstrap.kernels.record import KernelRecord, Listed, listed_wheels
from verl_bootstrap.kernels.wheelhouse import Entry
from verl_bootstrap.profile.kernel import KernelSpec, PrebuiltSource

__all__ = [
    "UNNAMED_GAP",
    "KernelChoice",
    "Passed",
    "declared_sources",
    "from_source",
    "held_parts",
    "house_choice",
    "index_choice",
    "ordered_sources",
    "pinned_version",
    "wheelhouse_match",
]


@dataclass(frozen=True)
class Passed:
    """A source (or sources) the candidate list passes over for the env: `why` is the text the
    reasons say; `sources` and `cause` are the same as data, for `--json` and tests."""

    why: str
    sources: tuple[str, ...]  # "wheelhouse", a declared source's id, "index", "lockfile"
    # off (the site config) | offline | no-list | no-version | other-build | no-url | not-found
    cause: str

    def to_json(self) -> dict[str, object]:
        return {"sources": list(self.sources), "cause": self.cause}


@dataclass(frozen=True)
class KernelChoice:
    """The source, where its wheel is (path or URL), and why it was chosen."""

    source: str  # wheelhouse | release | index | build | stage | locked
    reason: str
    wheel: str | None = None
    sha256: str | None = None
    built_for: BuildKey | None = None  # the key the wheel's source states
    origin: str | None = None  # the declared source's id (official, verl-wheelhouse, community)
    trust: str | None = None  # lab | upstream | project | community
    distribution: str | None = None  # the wheel's distribution, when not the kernel's
    listed: str | None = None  # the day the recorded list showed the wheel
    unpinned: bool = False  # a --locked install's wheel the lockfile does not pin (a hash gap)
    replaces: tuple[str, ...] = ()  # with distribution: the stage's parts that whole wheel holds
    # the key fields (torch, cuda) that only the profile states for the wheel: its file name
    # does not, so a source that re-uploads under the same name (verl's wheelhouse) goes unseen
    unnamed: tuple[str, ...] = ()
    # what the reason says of a gap and of the parts a whole wheel holds, as appended to it: a
    # locked plan states these in its hash gaps and the stage's line, so its kernel line omits them
    notes: tuple[str, ...] = ()
    # the stage's own install (the list's last entry): the sources passed over, as its reason says
    passed: tuple[Passed, ...] = ()

    def plain_reason(self) -> str:
        """The reason without its `notes`."""
        reason = self.reason
        for note in self.notes:
            reason = reason.replace(note, "")
        return reason


# what the plan says of a wheel whose file name states no torch or CUDA (none recorded its sha256)
UNNAMED_GAP = (
    "; a gap: its file name states no {fields}, so only the key the profile states for {source} "
    "and the load check after install vouch for it (that source may re-upload other builds under "
    "the same name)"
)
_NAME_FIELDS = ("torch", "cuda")  # what a keyed wheel name states beyond its Python and platform


def unnamed_fields(stated: dict[str, str]) -> tuple[str, ...]:
    """The key fields a source's profile entry states because its wheels' names do not."""
    return tuple(f for f in _NAME_FIELDS if f in stated)


def _gap(source_id: str, unnamed: tuple[str, ...]) -> str:
    return UNNAMED_GAP.format(fields=" or ".join(unnamed), source=source_id) if unnamed else ""


def held_parts(
    kernel: KernelSpec, replaces: Sequence[str], names: Sequence[str]
) -> tuple[str, ...]:
    """Of the stage's locked distributions (`names`, in order), those a source's whole wheel
    holds: the kernel's own, and those its source says it replaces."""
    holds = {canonicalize_name(n) for n in (kernel.distribution, *replaces)}
    return tuple(n for n in names if canonicalize_name(n) in holds)


def pinned_version(
    packages: Sequence[str], distribution: str, key: BuildKey | None = None
) -> str | None:
    """The `==` version the stage pins for the kernel's distribution; with `key`, a requirement
    whose marker leaves out the key's platform or Python (`; platform_machine == 'x86_64'`) is
    passed over, as the installer passes it over on that machine."""
    wanted = canonicalize_name(distribution)
    for spec in packages:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != wanted or not _applies(req, key):
            continue
        pins = [s.version for s in req.specifier if s.operator in {"==", "==="}]
        return pins[0] if pins else None
    return None


def _applies(req: Requirement, key: BuildKey | None) -> bool:
    """Whether `req`'s marker holds for the key's platform and Python (a field the key does not
    know is this interpreter's, as the marker's own default)."""
    if req.marker is None or key is None:
        return True
    env: dict[str, str] = {}
    if key.platform and key.platform.startswith("linux_"):
        machine = key.platform.removeprefix("linux_")
        env.update(sys_platform="linux", platform_system="Linux", platform_machine=machine)
    if key.python and key.python.startswith("cp") and len(key.python) > 3:
        version = f"{key.python[2]}.{key.python[3:]}"
        env.update(python_version=version, python_full_version=f"{version}.0")
    return req.marker.evaluate(env)


def ordered_sources(
    kernel: KernelSpec, order: Sequence[str] | None, why_not: list[Passed]
) -> list[PrebuiltSource | None]:
    """The lab wheelhouse (None) and the declared sources, as the site config orders them (a
    source it leaves out is off, and said so)."""
    declared = {s.id: s for s in declared_sources(kernel)}
    if order is None:
        return [None, *declared.values()]
    off = [i for i in ["wheelhouse", *declared] if i not in order]
    if off:
        said = f"the site config's kernel_sources turns off {', '.join(off)}"
        why_not.append(Passed(said, tuple(off), "off"))
    known = {"wheelhouse", *declared}
    return [None if i == "wheelhouse" else declared[i] for i in order if i in known]


def declared_sources(kernel: KernelSpec) -> tuple[PrebuiltSource, ...]:
    """The stage's declared sources; a profile's older `release_wheels` patterns count as
    upstream release sources after them (named release, release-2, ...)."""
    older = tuple(
        PrebuiltSource(id=f"release-{i + 1}" if i else "release", trust="upstream", release=pattern)
        for i, pattern in enumerate(kernel.release_wheels)
    )
    return (*kernel.sources, *older)


def house_choice(entry: Entry, root: str | None) -> KernelChoice:
    where = f"{root}/{entry.file}" if root else entry.file
    reason = (
        f"prebuilt from the lab wheelhouse, built for {entry.key.describe()}, "
        f"sha256 {entry.sha256[:12]}… (trust: lab)"
    )
    return KernelChoice("wheelhouse", reason, where, entry.sha256, entry.key, "wheelhouse", "lab")


def from_source(
    source: PrebuiltSource,
    pinned: tuple[str, str],
    key: BuildKey,
    record: KernelRecord | None,
    why_not: list[Passed],
) -> list[KernelChoice]:
    """The wheels of `source` for (dist, version, key): from its recorded list, else (a release
    pattern with no list) the URL its pattern names, to be tried. `pinned`: (dist, version)."""
    dist, version = pinned
    listed = listed_wheels(source, dist, record) if record is not None else None
    kind = "release" if source.release else "index"
    if listed is None:
        url = render_template(source.release, version, key) if source.release else None
        if url is None:
            why_not.append(
                Passed(f"{source.id}: no recorded list of its wheels", (source.id,), "no-list")
            )
            return []
        reason = (
            f"prebuilt from {source.id} (trust: {source.trust}) for {key.describe()}, if its "
            f"release has one (not in the recorded list): {url}"
        )
        choice = KernelChoice(
            kind,
            reason,
            url,
            None,
            key,
            source.id,
            source.trust,
            source.distribution,
            replaces=source.replaces,
        )
        return [choice]
    fits = [w for w in listed if w.version == version and not w.key.mismatches(key)]
    if not fits:
        why_not.append(_none_from(source, pinned, key, listed, record))
        return []
    return [_listed_choice(source, kind, w) for w in fits]


def _listed_choice(source: PrebuiltSource, kind: str, wheel: Listed) -> KernelChoice:
    about = f"; {source.about}" if source.about else ""
    unnamed = unnamed_fields(source.key)
    gap = _gap(source.id, unnamed)
    reason = (
        f"prebuilt from {source.id} (trust: {source.trust}{about}), key {wheel.key.describe()}, "
        f"listed {wheel.recorded.isoformat()}: {wheel.url}{gap}"
    )
    return KernelChoice(
        kind,
        reason,
        wheel.url,
        None,
        wheel.key,
        source.id,
        source.trust,
        source.distribution,
        wheel.recorded.isoformat(),
        replaces=source.replaces,
        unnamed=unnamed,
        notes=(gap,) if gap else (),
    )


def _none_from(
    source: PrebuiltSource,
    pinned: tuple[str, str],
    key: BuildKey,
    listed: Sequence[Listed],
    record: KernelRecord | None,
) -> Passed:
    """Why `source` has no wheel: what it does have of that version, or that it has none."""
    dist, version = pinned
    seen = record.sources[source.id] if record else None
    when = f" (recorded {seen.recorded.isoformat()})" if seen else ""
    same = [w for w in listed if w.version == version]
    if not same:
        versions = sorted({w.version for w in listed})
        if not versions:
            said = f"{source.id} has no {dist} {version}{when}; it has none"
        else:
            said = (
                f"{source.id} has no {dist} {version}{when}; it has {', '.join(versions)}, "
                f"built for {_builds(listed)}"
            )
        return Passed(said, (source.id,), "no-version")
    said = f"{source.id} has {dist} {version} for no build of {key.describe()}{when}; " + (
        f"it has builds for {_builds(same)}"
    )
    return Passed(said, (source.id,), "other-build")


def _builds(wheels: Sequence[Listed]) -> str:
    """What the wheels are built for: 'torch 2.11.0+cu130 on linux_x86_64 only'."""
    torches = sorted({f"{w.key.torch}+{_tag(w.key.cuda)}" for w in wheels})
    platforms = sorted({w.key.platform or "?" for w in wheels})
    only = " only" if len(platforms) == 1 else ""
    return f"torch {', '.join(torches)} on {', '.join(platforms)}{only}"


def _tag(cuda: str | None) -> str:
    return "cpu" if cuda == "cpu" else f"cu{(cuda or '?').replace('.', '')}"


def wheelhouse_match(
    kernel: KernelSpec, version: str, key: BuildKey, entries: Sequence[Entry], why_not: list[Passed]
) -> Entry | None:
    """The wheelhouse's wheel of (kernel, version) for `key`; else None, with why in `why_not`."""
    wanted = canonicalize_name(kernel.distribution)
    same = [e for e in entries if canonicalize_name(e.name) == wanted and e.version == version]
    for entry in same:
        if not entry.key.mismatches(key):
            return entry
    if same:
        others = "; ".join(f"{e.key.describe()} ({', '.join(e.key.mismatches(key))})" for e in same)
        said = f"the lab wheelhouse has {kernel.distribution} {version} only for other builds: "
        why_not.append(Passed(said + others, ("wheelhouse",), "other-build"))
    else:
        said = (
            f"no wheel in the lab wheelhouse matches {kernel.distribution} {version} "
            f"for {key.describe()}"
        )
        why_not.append(Passed(said, ("wheelhouse",), "no-version"))
    return None


def index_choice(kernel: KernelSpec, key: BuildKey, why_not: list[Passed]) -> KernelChoice | None:
    prebuilt = kernel.prebuilt_index
    if prebuilt is None:
        return None
    stated = BuildKey.from_mapping(prebuilt.key)
    problems = stated.mismatches(key)
    if problems:
        said = f"index {prebuilt.index!r} is built for {stated.describe()}, not this env"
        why_not.append(Passed(said, ("index",), "other-build"))
        return None
    unnamed = unnamed_fields(prebuilt.key)
    gap = _gap(f"index {prebuilt.index!r}", unnamed)
    reason = f"prebuilt from index {prebuilt.index!r}, which the profile states is built for " + (
        stated.describe() + gap
    )
    notes = (gap,) if gap else ()
    return KernelChoice("index", reason, built_for=stated, unnamed=unnamed, notes=notes)
