"""Distributions an env holds without their own dependencies, on purpose: those verl's
`[[tool.uv.dependency-metadata]]` describes (its requires-dist stands for the real one; empty:
installed deps-free, like TransferQueue, veomni, megatron-bridge), and the packages of a profile
stage marked `no_deps`. `uv pip check` reads each one's own METADATA, so it reports the real
requirements as unmet; a mismatch that only this explains is expected, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError
from verl_bootstrap.profile.verlextras import read_uv_table

__all__ = [
    "DepsFree",
    "Forced",
    "Mismatch",
    "deps_free",
    "forced_keys",
    "mismatches",
    "unexplained",
]

# `uv pip check`: "The package `transferqueue` requires `ray[default]`, but it's not installed"
_MISMATCH = re.compile(r"^The package `([^`]+)` requires `([A-Za-z0-9][A-Za-z0-9._-]*)")


class Forced(Protocol):
    """A mismatch an env's lockfile records as forced by an override (the lock format's
    `ForcedMismatch`, handed in by the caller: verify reads no lockfile itself)."""

    @property
    def package(self) -> str: ...
    @property
    def required_by(self) -> str: ...
    def line(self) -> str: ...


@dataclass(frozen=True)
class DepsFree:
    """One distribution installed without its own dependencies, and what is declared instead."""

    name: str
    declared: frozenset[str]  # the requirement names declared in place of its own (canonical)
    said_by: str  # "verl's [[tool.uv.dependency-metadata]]" or "stage S (no_deps)"


@dataclass(frozen=True)
class Mismatch:
    """A `uv pip check` line: `package` requires `wanted`, missing or at another version."""

    package: str
    wanted: str
    line: str


def mismatches(output: str) -> list[Mismatch]:
    """The requirement mismatches `uv pip check` printed."""
    found = (_MISMATCH.match(line.strip()) for line in output.splitlines())
    return [
        Mismatch(canonicalize_name(m[1]), canonicalize_name(m[2]), m.string) for m in found if m
    ]


def unexplained(
    found: Iterable[Mismatch],
    free: Mapping[str, DepsFree],
    overridden: Iterable[str],
    forced: Iterable[Forced] = (),
) -> list[Mismatch]:
    """The mismatches neither a deps-free install, one of the profile's overrides, nor a
    mismatch the env's lockfile records as forced explains."""
    overrides = {canonicalize_name(n) for n in overridden}
    recorded = forced_keys(forced)
    return [
        m
        for m in found
        if m.wanted not in overrides
        and (m.package, m.wanted) not in recorded
        and not (m.package in free and m.wanted not in free[m.package].declared)
    ]


def forced_keys(forced: Iterable[Forced]) -> set[tuple[str, str]]:
    """(who requires, what) of each recorded forced mismatch, as `uv pip check` names them."""
    return {(canonicalize_name(f.required_by), canonicalize_name(f.package)) for f in forced}


def deps_free(checkout: Path, no_deps: Iterable[tuple[str, str]] = ()) -> dict[str, DepsFree]:
    """name -> DepsFree, from verl's pyproject.toml in `checkout` (none there: none from it) and
    the (stage id, package) pairs of the profile's no_deps stages."""
    out: dict[str, DepsFree] = {
        canonicalize_name(name): DepsFree(
            canonicalize_name(name), frozenset(), f"stage {stage} (no_deps)"
        )
        for stage, name in no_deps
    }
    path = checkout / "pyproject.toml"
    if path.is_file():
        out.update({d.name: d for d in _from_pyproject(path)})
    return out


def _from_pyproject(path: Path) -> list[DepsFree]:
    entries = read_uv_table(path).get("dependency-metadata", [])
    if not isinstance(entries, list):
        raise _bad(path, "tool.uv.dependency-metadata", "a list of tables")
    return [_entry(item, path, at) for at, item in enumerate(entries)]


def _entry(item: Any, path: Path, at: int) -> DepsFree:
    where = f"tool.uv.dependency-metadata[{at}]"
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise _bad(path, f"{where}.name", "a distribution name")
    requires = item.get("requires-dist", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise _bad(path, f"{where}.requires-dist", "a list of requirement strings")
    try:
        declared = frozenset(canonicalize_name(Requirement(r).name) for r in requires)
    except InvalidRequirement as exc:
        raise _bad(path, f"{where}.requires-dist", f"requirements ({exc})") from None
    said = "verl's [[tool.uv.dependency-metadata]]"
    return DepsFree(canonicalize_name(item["name"]), declared, said)


def _bad(path: Path, field: str, wanted: str) -> InputError:
    return InputError(
        f"{path}: {field} is not {wanted}",
        hint="this is verl's own pyproject.toml: check out a verl ref whose file uv can read",
    )
