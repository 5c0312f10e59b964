"""The stack of a verl ref that ships its own `uv.lock` and has no stack in the profile: that
lock's slice for the profile's extras, on the Python the lock is made for.

uv exports the slice (locking.uvlock); every pin becomes a constraint of every stage and a
requirement of the stage that installs it: the profile's stages keep their order, indexes and
kernels, their pinned packages take the lock's versions, a stage bound to an index the lock takes
pins from installs those pins, and the deps stage asks for the rest by line (verl by name without
its extras: an extra's git requirement reached through them is refused by uv). verl's own
override-dependencies hold, with their `extra` markers decided for the slice's extras, as
`uv lock` decided them.

Where a pin cannot be reached, the stack takes the nearest artifact of the configured indexes and
states it as a substitution: an index the run does not reach gives the same release from the
configured indexes; a git source the run does not reach gives the configured indexes' release
nearest the version the lock records. What the lock does not cover (a platform, a variant whose
substitutions replace its pins) keeps the profile's own stack (locking.refstack says so).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError
from verl_bootstrap.lockfile.format import UvLockUse
from verl_bootstrap.locking.uvlock import UvLockPin, export_uv_lock, unhashed
from verl_bootstrap.locking.uvtable import LockTable, reached_extras, read_lock_table
from verl_bootstrap.profile.models import (
    Profile,
    PythonSpec,
    Stage,
    Substitution,
    VerifySpec,
)
from verl_bootstrap.profile.verlextras import marker_env, override_lines, read_extras, read_uv_table

__all__ = ["Reach", "Uncovered", "UvStack", "uv_lock_stack"]


@dataclass(frozen=True)
class Reach:
    """What this run reaches of the lock's sources."""

    indexes: Mapping[str, str]  # the profile's named indexes this run reaches: name -> URL
    git: Callable[[str], bool]  # whether a git repository answers
    nearest: Callable[[str, str], str]  # (name, the lock's version) -> the indexes' nearest


@dataclass(frozen=True)
class UvStack:
    """The profile at the ref, what the lock file records of it, and what is said of it."""

    profile: Profile
    use: UvLockUse
    summary: str  # the route line's word on where the stack comes from
    notes: tuple[str, ...]  # each substitution with its reason; the pins with no sha256


@dataclass(frozen=True)
class Uncovered:
    """The ref's uv.lock is not made for this run's target: why."""

    why: str


@dataclass(frozen=True)
class _Taken:
    """What the stack installs for one pin of the slice."""

    line: str  # the requirement
    index: str | None = None  # the profile's index it comes from (None: the configured ones)
    sub: Substitution | None = None  # where it is not the lock's own artifact
    locked: str = ""  # the lock's pin, as said in a substitution


@dataclass(frozen=True)
class _Slice:
    table: LockTable
    pins: dict[str, UvLockPin]
    pyproject: Path
    python: str
    platform: str
    extras: tuple[str, ...]
    own: Mapping[str, Substitution]  # the profile's substitutions for the run's variant


def uv_lock_stack(
    base: Profile,
    ref: str,
    files: tuple[str, str, str],  # (uv.lock's text, pyproject.toml's text, the commit)
    *,
    variant: str,
    platform: str,
    python: str | None,
    reach: Reach,
) -> UvStack | Uncovered:
    """`base` at `ref` as the ref's uv.lock gives it for `variant` on `platform` (`python`: the
    Python asked for, else the profile's preferred one where the lock is made for it)."""
    uv_lock, pyproject, commit = files
    where = f"verl {ref}'s uv.lock"
    table = read_lock_table(uv_lock, where)
    if not table.covers_platform(platform):
        return Uncovered(f"{where} is not made for {platform}")
    extras = _extras(base)
    if not extras:
        return Uncovered(f"profile {base.name!r} names no extras of verl's to take from {where}")
    chosen = _python(base, table, python, platform, where)
    with tempfile.TemporaryDirectory(prefix="verl-uv-lock-") as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text(pyproject, encoding="utf-8")
        (work / "uv.lock").write_text(uv_lock, encoding="utf-8")
        pins = export_uv_lock(work, extras, chosen, platform, work) or {}
        own = {
            str(canonicalize_name(s.replace)): s for s in base.substitutions if s.applies(variant)
        }
        made = _Slice(table, pins, work / "pyproject.toml", chosen, platform, extras, own)
        replaced = _replaced(base, variant, pins)
        if replaced:
            return Uncovered(f"{where} pins {replaced}, which the {variant} variant replaces")
        return _stack(base, ref, commit, made, reach)


def _extras(base: Profile) -> tuple[str, ...]:
    deps = next((s for s in base.stages if s.kind == "verl-deps"), None)
    return base.uv_lock_extras or (deps.extras if deps else ())


def _python(base: Profile, table: LockTable, python: str | None, platform: str, where: str) -> str:
    """The Python the env gets: the one asked for, else the profile's preferred, else the newest
    the lock and the profile both allow."""
    made_for = table.pythons(SpecifierSet(), platform)
    if python is not None:
        if python not in made_for:
            raise InputError(
                f"Python {python}: {where} is made for Python {', '.join(made_for)} only",
                hint="ask for one of those (--python, --python-version), or install another ref",
            )
        return python
    both = table.pythons(SpecifierSet(base.python.requires), platform)
    if not both:
        raise InputError(
            f"{where} is made for Python {', '.join(made_for)}; profile {base.name!r} allows "
            f"{base.python.requires}: no Python fits both",
            hint="install another verl ref, or use a profile whose Python range holds one",
        )
    return base.python.prefer if base.python.prefer in both else both[-1]


def _replaced(base: Profile, variant: str, pins: Mapping[str, UvLockPin]) -> str:
    """The lock's pins the variant installs something else in place of (its `by`)."""
    subs = [s for s in base.substitutions if s.applies(variant) and not s.keeps_requirement()]
    hit = [s for s in subs if canonicalize_name(s.replace) in pins]
    return ", ".join(f"{s.replace} {pins[canonicalize_name(s.replace)].version}" for s in hit)


def _stack(base: Profile, ref: str, commit: str, made: _Slice, reach: Reach) -> UvStack:
    verl_indexes = _verl_indexes(made.pyproject)
    taken = {
        name: _take(pin, made.table, verl_indexes, made.own.get(name), (base, reach))
        for name, pin in sorted(made.pins.items())
    }
    overrides = _overrides(made)
    stages = _stages(base, taken, overrides)
    subs = {n: t for n, t in taken.items() if t.sub is not None}
    added = tuple(
        t.sub for t in subs.values() if t.sub is not None and t.sub not in base.substitutions
    )
    profile = base.model_copy(
        update={
            "verl": base.verl.model_copy(update={"ref": ref}),
            "python": _python_spec(base, made),
            "stages": stages,
            "verify": _verify(base, taken, overrides),
            "constraints": tuple(t.line for t in taken.values() if " @ " not in t.line),
            "substitutions": (*base.substitutions, *added),
            "exclude_newer": None,
            "stacks": (),
        }
    )
    lines = tuple(f"{n}: {t.locked} -> {t.line} ({t.sub.reason})" for n, t in subs.items() if t.sub)
    use = UvLockUse(extras=made.extras, commit=commit, pins=len(made.pins), substitutions=lines)
    return UvStack(profile, use, _summary(ref, commit, made, subs), _notes(lines, made.pins))


def _verl_indexes(pyproject: Path) -> dict[str, str]:
    """verl's named indexes ([[tool.uv.index]]): URL -> name."""
    found = read_uv_table(pyproject).get("index", [])
    out: dict[str, str] = {}
    for entry in found if isinstance(found, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            out[_norm(entry["url"])] = str(entry.get("name", entry["url"]))
    return out


def _norm(url: str) -> str:
    return url.rstrip("/")


def _take(
    pin: UvLockPin,
    table: LockTable,
    verl_indexes: Mapping[str, str],
    own: Substitution | None,
    run: tuple[Profile, Reach],
) -> _Taken:
    """What the stack installs for `pin` (see the module docstring)."""
    base, reach = run
    if pin.git:
        return _from_git(pin, table, own, reach)
    source = table.source_of(pin.name, pin.version)
    named = verl_indexes.get(_norm(source.url)) if source and source.kind == "registry" else None
    locked = f"{pin.version} from {named or 'the default index'}"
    if named is not None and source is not None:
        index = next(
            (n for n, i in base.indexes.items() if _norm(i.url) == _norm(source.url)), None
        )
        used = index is not None and any(s.index == index for s in base.stages)
        if own is None and used and index in reach.indexes:
            return _Taken(f"{pin.name}=={pin.version}", index)
        why = "is unreachable here" if used else "no stage of this profile installs from"
        own = own or Substitution(
            replace=pin.name,
            source="the configured indexes",
            reason=f"verl's uv.lock takes it from its index {named} ({source.url}), which {why}: "
            "the same release from the configured indexes",
        )
    if own is not None:
        return _Taken(f"{pin.name}=={_release(pin.version)}", None, own, locked)
    return _Taken(f"{pin.name}=={pin.version}")


def _from_git(pin: UvLockPin, table: LockTable, own: Substitution | None, reach: Reach) -> _Taken:
    source = table.source_of(pin.name)
    repo = source.url if source else pin.url.removeprefix("git+").rsplit("@", 1)[0]
    commit = source.commit if source else pin.url.rsplit("@", 1)[-1]
    version = next((v for v, s in table.sources.get(pin.name, []) if s.kind == "git"), "")
    locked = f"{version} from git {repo} at {commit[:12]}"
    if own is None and reach.git(repo):
        return _Taken(f"{pin.name} @ {pin.url}")
    nearest = reach.nearest(pin.name, version)
    why = (
        own.reason
        if own
        else (
            f"verl's uv.lock builds it from git ({repo} at {commit[:12]}), which is unreachable "
            f"here: {nearest} is the configured indexes' release nearest {version}"
        )
    )
    line = f"{pin.name}=={nearest}"
    return _Taken(line, None, Substitution(replace=pin.name, by=line, reason=why), locked)


def _release(version: str) -> str:
    """The release without a build's local label (`2.11.0+cpu` -> `2.11.0`)."""
    return version.split("+", 1)[0]


def _overrides(made: _Slice) -> tuple[str, ...]:
    """verl's override-dependencies as `uv lock` applied them to the slice: a line gated on an
    extra holds, unmarked, where one of the slice's extras meets it, and is left out where none
    does; other markers stay for uv to evaluate."""
    table = read_uv_table(made.pyproject)
    extras = reached_extras(read_extras(made.pyproject), made.extras)
    env = marker_env(made.python, made.platform)
    out: list[str] = []
    for line in override_lines(table, made.pyproject):
        req = Requirement(line)
        if req.marker is None or "extra" not in str(req.marker):
            out.append(line)
        elif any(req.marker.evaluate({**env, "extra": extra}) for extra in extras):
            req.marker = None
            out.append(str(req))
    return tuple(out)


def _stages(
    base: Profile, taken: Mapping[str, _Taken], overrides: Sequence[str]
) -> tuple[Stage, ...]:
    """The profile's stages with the lock's pins; the deps stage asks for every pin no other
    stage installs."""
    stages = [_pinned(stage, taken, overrides) for stage in base.stages]
    others = [s for s in stages if s.kind in ("packages", "script")]
    elsewhere = {_name(p) for s in others for p in s.packages}
    return tuple(_asking_rest(s, taken, elsewhere) if s.kind == "verl-deps" else s for s in stages)


def _asking_rest(deps: Stage, taken: Mapping[str, _Taken], elsewhere: set[str]) -> Stage:
    """The deps stage: verl by name, and by line every pin no other stage installs."""
    mine = {_name(p) for p in deps.packages}
    rest = [t.line for n, t in taken.items() if n not in elsewhere | mine]
    return deps.model_copy(update={"extras": (), "packages": (*deps.packages, *rest)})


def _pinned(stage: Stage, taken: Mapping[str, _Taken], overrides: Sequence[str]) -> Stage:
    """One stage at the lock's pins, with the pins of its index, under verl's overrides."""
    if stage.kind in ("install-verl", "script"):
        return stage
    packages = [_line(p, taken) for p in stage.packages]
    have = {_name(p) for p in packages}
    if stage.index:
        packages += [t.line for n, t in taken.items() if t.index == stage.index and n not in have]
    names = {_name(o) for o in overrides}
    return stage.model_copy(
        update={
            "packages": tuple(packages),
            "expect": _at_pins(stage.expect, taken),
            "overrides": (*overrides, *(o for o in stage.overrides if _name(o) not in names)),
            "pins_from_verl": False,
            "variants": {},
        }
    )


def _at_pins(wanted: Mapping[str, str], taken: Mapping[str, _Taken]) -> dict[str, str]:
    """Exact versions (`==X`) of pinned distributions at the lock's release instead."""
    out = dict(wanted)
    for name, spec in wanted.items():
        found = taken.get(canonicalize_name(name))
        if found is not None and spec.startswith("==") and "==" in found.line:
            out[name] = f"=={_release(_version(found.line))}"
    return out


def _line(package: str, taken: Mapping[str, _Taken]) -> str:
    """A stage's package at the lock's pin (its extras kept), or as written where it has none."""
    req = Requirement(package)
    found = taken.get(canonicalize_name(req.name))
    if found is None or " @ " in found.line:
        return found.line if found else package
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}=={_version(found.line)}"


def _name(spec: str) -> str:
    return canonicalize_name(Requirement(spec).name)


def _version(line: str) -> str:
    return line.partition("==")[2]


def _python_spec(base: Profile, made: _Slice) -> PythonSpec:
    """The Pythons the lock and the profile both allow (the one asked for, where outside)."""
    both = made.table.pythons(SpecifierSet(base.python.requires), made.platform) or [made.python]
    low, high = both[0], both[-1]
    upper = f"{high.split('.')[0]}.{int(high.split('.')[1]) + 1}"
    return PythonSpec(requires=f">={low},<{upper}", prefer=made.python)


def _verify(base: Profile, taken: Mapping[str, _Taken], overrides: Sequence[str]) -> VerifySpec:
    """The profile's checks at the lock's pins; what verl's overrides pin against a
    requirement (verl's own transformers bound, at main) is a named warning of `uv pip check`,
    as `uv lock` took it."""
    named = [n for n in (str(_name(o)) for o in overrides) if n in taken]
    overridden = (*base.verify.overridden, *(n for n in named if n not in base.verify.overridden))
    return base.verify.model_copy(
        update={"versions": _at_pins(base.verify.versions, taken), "overridden": overridden}
    )


def _summary(ref: str, commit: str, made: _Slice, subs: Mapping[str, _Taken]) -> str:
    said = (
        f"the stack is verl's uv.lock at {ref} ({commit[:12]}): its {', '.join(made.extras)} "
        f"slice, {len(made.pins)} pins, Python {made.python}"
    )
    if subs:
        said += "; substituted: " + ", ".join(
            f"{n} {t.locked} -> {t.line}" for n, t in subs.items()
        )
    return said


def _notes(lines: Sequence[str], pins: Mapping[str, UvLockPin]) -> tuple[str, ...]:
    notes = [f"verl's uv.lock substituted: {line}" for line in lines]
    if unhashed(pins):
        notes.append(
            "verl's uv.lock records no sha256 for " + ", ".join(unhashed(pins)) + ": their "
            "versions are taken, their artifacts not compared with the lock's"
        )
    return tuple(notes)
