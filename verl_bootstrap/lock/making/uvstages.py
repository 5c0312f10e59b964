"""The profile's stages and checks at a uv.lock slice's pins (locking.uvstack): every pin a
requirement of the stage that installs it (a stage bound to an index the lock takes pins from
installs those pins; the deps stage asks for the rest by line, verl by name without its extras),
under verl's own override-dependencies as `uv lock` applied them to the slice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from verl_bootstrap.lock.making.uvtable import reached_extras
from verl_bootstrap.lock.making.uvtake import Taken, release
from verl_bootstrap.profile.models import Profile, Stage, VerifySpec
from verl_bootstrap.profile.verlextras import marker_env, override_lines, read_extras, read_uv_table

__all__ = ["applied_overrides", "pinned_stages", "pinned_verify"]


def applied_overrides(
    pyproject: Path, extras: Sequence[str], python: str, platform: str
) -> tuple[str, ...]:
    """verl's override-dependencies as `uv lock` applied them to the slice of `extras`: a line
    gated on an extra holds, unmarked, where one of the slice's extras meets it, and is left out
    where none does; other markers stay for uv to evaluate."""
    table = read_uv_table(pyproject)
    reached = reached_extras(read_extras(pyproject), tuple(extras))
    env = marker_env(python, platform)
    out: list[str] = []
    for line in override_lines(table, pyproject):
        req = Requirement(line)
        if req.marker is None or "extra" not in str(req.marker):
            out.append(line)
        elif any(req.marker.evaluate({**env, "extra": extra}) for extra in reached):
            req.marker = None
            out.append(str(req))
    return tuple(out)


def pinned_stages(
    base: Profile, taken: Mapping[str, Taken], overrides: Sequence[str]
) -> tuple[Stage, ...]:
    """The profile's stages with the lock's pins; the deps stage asks for every pin no other
    stage installs."""
    stages = [_pinned(stage, taken, overrides) for stage in base.stages]
    others = [s for s in stages if s.kind in ("packages", "script")]
    elsewhere = {_name(p) for s in others for p in s.packages}
    return tuple(_asking_rest(s, taken, elsewhere) if s.kind == "verl-deps" else s for s in stages)


def _asking_rest(deps: Stage, taken: Mapping[str, Taken], elsewhere: set[str]) -> Stage:
    """The deps stage: verl by name, and by line every pin no other stage installs."""
    mine = {_name(p) for p in deps.packages}
    rest = [t.line for n, t in taken.items() if n not in elsewhere | mine]
    return deps.model_copy(update={"extras": (), "packages": (*deps.packages, *rest)})


def _pinned(stage: Stage, taken: Mapping[str, Taken], overrides: Sequence[str]) -> Stage:
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


def _at_pins(wanted: Mapping[str, str], taken: Mapping[str, Taken]) -> dict[str, str]:
    """Exact versions (`==X`) of pinned distributions at the lock's release instead."""
    out = dict(wanted)
    for name, spec in wanted.items():
        found = taken.get(canonicalize_name(name))
        if found is not None and spec.startswith("==") and "==" in found.line:
            out[name] = f"=={release(_version(found.line))}"
    return out


def _line(package: str, taken: Mapping[str, Taken]) -> str:
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


def pinned_verify(
    base: Profile, taken: Mapping[str, Taken], overrides: Sequence[str]
) -> VerifySpec:
    """The profile's checks at the lock's pins; what verl's overrides pin against a
    requirement (verl's own transformers bound, at main) is a named warning of `uv pip check`,
    as `uv lock` took it."""
    named = [n for n in (str(_name(o)) for o in overrides) if n in taken]
    overridden = (*base.verify.overridden, *(n for n in named if n not in base.verify.overridden))
    return base.verify.model_copy(
        update={"versions": _at_pins(base.verify.versions, taken), "overridden": overridden}
    )
