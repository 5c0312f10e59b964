"""The stack of a verl ref that ships its own `uv.lock` and has no stack in the profile: that
lock's slice for the profile's extras, on the Python the lock is made for.

uv exports the slice (locking.uvlock); every pin becomes a constraint of every stage and a
requirement of the stage that installs it: the profile's stages keep their order, indexes and
kernels, their pinned packages take the lock's versions, a stage bound to an index the lock takes
pins from installs those pins, and the deps stage asks for the rest by line (verl by name without
its extras: an extra's git requirement reached through them is refused by uv). verl's own
override-dependencies hold, with their `extra` markers decided for the slice's extras, as
`uv lock` decided them (locking.uvstages).

Where a pin cannot be reached, the stack takes the nearest artifact of the configured indexes and
states it as a substitution: an index the run does not reach gives the same release from the
configured indexes; a git source the run does not reach gives the configured indexes' release
nearest the version the lock records (locking.uvtake). What the lock does not cover (a platform,
a variant whose substitutions replace its pins) keeps the profile's own stack (locking.refstack
says so).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.format import UvLockUse
from verl_bootstrap.lock.making.uvlock import UvLockPin, export_uv_lock, unhashed
from verl_bootstrap.lock.making.uvstages import applied_overrides, pinned_stages, pinned_verify
from verl_bootstrap.lock.making.uvtable import LockTable, read_lock_table
from verl_bootstrap.lock.making.uvtake import Reach, Taken, take, verl_indexes
from verl_bootstrap.profile.models import Profile, PythonSpec, Substitution

__all__ = ["Reach", "Uncovered", "UvStack", "uv_lock_stack"]


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
    indexes = verl_indexes(made.pyproject)
    taken = {
        name: take(pin, made.table, indexes, made.own.get(name), (base, reach))
        for name, pin in sorted(made.pins.items())
    }
    overrides = applied_overrides(made.pyproject, made.extras, made.python, made.platform)
    stages = pinned_stages(base, taken, overrides)
    subs = {n: t for n, t in taken.items() if t.sub is not None}
    added = tuple(
        t.sub for t in subs.values() if t.sub is not None and t.sub not in base.substitutions
    )
    profile = base.model_copy(
        update={
            "verl": base.verl.model_copy(update={"ref": ref}),
            "python": _python_spec(base, made),
            "stages": stages,
            "verify": pinned_verify(base, taken, overrides),
            "constraints": tuple(t.line for t in taken.values() if " @ " not in t.line),
            "substitutions": (*base.substitutions, *added),
            "exclude_newer": None,
            "stacks": (),
        }
    )
    lines = tuple(f"{n}: {t.locked} -> {t.line} ({t.sub.reason})" for n, t in subs.items() if t.sub)
    use = UvLockUse(extras=made.extras, commit=commit, pins=len(made.pins), substitutions=lines)
    return UvStack(profile, use, _summary(ref, commit, made, subs), _notes(lines, made.pins))


def _python_spec(base: Profile, made: _Slice) -> PythonSpec:
    """The Pythons the lock and the profile both allow (the one asked for, where outside)."""
    both = made.table.pythons(SpecifierSet(base.python.requires), made.platform) or [made.python]
    low, high = both[0], both[-1]
    upper = f"{high.split('.')[0]}.{int(high.split('.')[1]) + 1}"
    return PythonSpec(requires=f">={low},<{upper}", prefer=made.python)


def _summary(ref: str, commit: str, made: _Slice, subs: Mapping[str, Taken]) -> str:
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
