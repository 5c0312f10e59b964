"""verl's own backend extras, read from its checkout's `pyproject.toml`.

From v0.9.1 verl declares each backend as an extra (`verl-core`, `fsdp`, `megatron`, `vllm`,
`sglang`, `cpu`) that pulls in others through `verl[...]` self-references. A profile names the
extras its backend and engine take (its verl-deps stage's `extras`) and never copies their pins:
they are read here, where they are declared, at plan, lock and install time. A profile's
`substitutions` say where a variant must differ (another torch for CUDA 12.8), each with its reason.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError
from verl_bootstrap.platforms import MACHINES
from verl_bootstrap.profile.models import Substitution
from verl_bootstrap.profile.stagespec import StageSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "Declared",
    "declared_requirements",
    "marker_env",
    "override_lines",
    "pinned_packages",
    "read_extras",
    "read_uv_table",
    "shown_substitutions",
    "stage_pins",
    "substituted_lines",
    "substitutions_for",
    "verl_overrides",
    "with_verl_overrides",
]


@dataclass(frozen=True)
class Declared:
    """One requirement an extra declares, with the extras it was reached through."""

    name: str  # PEP 503 normalised
    requirement: str  # as verl writes it, marker removed (it held for the target)
    via: tuple[str, ...]  # e.g. ("fsdp", "cupy-cu130")

    def origin(self) -> str:
        """`verl[fsdp] > verl[cupy-cu130]`: where the requirement comes from."""
        return " > ".join(f"verl[{e}]" for e in self.via)


def read_extras(pyproject: Path) -> dict[str, tuple[str, ...]]:
    """`[project.optional-dependencies]` of verl's `pyproject.toml` (empty when it has none)."""
    project = _pyproject(pyproject, "extras").get("project")
    extras = project.get("optional-dependencies", {}) if isinstance(project, dict) else {}
    return {str(k): tuple(str(r) for r in v) for k, v in extras.items()}


def marker_env(python: str, platform: str) -> dict[str, str]:
    """The marker values of a Linux target (Python X.Y, linux-64 or linux-aarch64)."""
    machine = MACHINES.get(platform, platform)
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": machine,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }


def declared_requirements(
    extras_table: Mapping[str, Sequence[str]],
    extras: Iterable[str],
    env: Mapping[str, str],
    *,
    where: str = "pyproject.toml",
) -> tuple[Declared, ...]:
    """Every requirement `extras` declare, expanded through `verl[...]`, markers evaluated."""
    out: list[Declared] = []
    seen: set[str] = set()

    def expand(extra: str, via: tuple[str, ...]) -> None:
        if extra in seen:
            return
        seen.add(extra)
        if extra not in extras_table:
            known = ", ".join(sorted(extras_table)) or "none"
            raise InputError(
                f"{where}: verl declares no extra {extra!r} (it declares: {known})",
                hint="name one of verl's extras in the verl-deps stage's 'extras', or use a "
                "stack for this ref",
            )
        for line in extras_table[extra]:
            try:
                req = Requirement(line)
            except InvalidRequirement as exc:
                raise InputError(f"{where}: verl[{extra}]: {line!r}: {exc}") from None
            if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
                continue
            if canonicalize_name(req.name) == "verl":
                for inner in sorted(req.extras):
                    expand(inner, (*via, inner))
                continue
            req.marker = None
            out.append(Declared(canonicalize_name(req.name), str(req), via))

    for extra in extras:
        expand(extra, (extra,))
    return tuple(out)


def substitutions_for(
    substitutions: Iterable[Substitution], variant: str
) -> dict[str, Substitution]:
    """name -> the substitution that applies to `variant`."""
    return {
        canonicalize_name(s.replace): s
        for s in substitutions
        if not s.variants or variant in s.variants
    }


def pinned_packages(
    packages: Sequence[str],
    declared: Sequence[Declared],
    substituted: Mapping[str, Substitution],
) -> tuple[str, ...]:
    """A `pins_from_verl` stage's packages: each bare name takes what verl declares for it
    (or the variant's substitution); a package the profile pins itself stays as written."""
    by_name: dict[str, list[Requirement]] = {}
    for item in declared:
        by_name.setdefault(item.name, []).append(Requirement(item.requirement))
    out: list[str] = []
    for package in packages:
        req = Requirement(package)
        name = canonicalize_name(req.name)
        sub = substituted.get(name)
        if str(req.specifier) or req.url:
            out.append(package)
        elif sub is not None and not sub.keeps_requirement():
            if sub.by is not None:
                out.append(sub.by)
        elif name in by_name:
            out.append(_merged(req, by_name[name]))
        else:
            raise InputError(
                f"stage asks for {package!r} at verl's pin, but the extras declare no {name}",
                hint="pin it in the stage (e.g. 'name==X.Y') or drop 'pins_from_verl'",
            )
    return tuple(out)


def _merged(asked: Requirement, declared: Sequence[Requirement]) -> str:
    """One requirement holding every specifier and extra verl declares for the name."""
    extras = set(asked.extras).union(*(d.extras for d in declared))
    spec = SpecifierSet()
    for item in declared:
        spec &= item.specifier
    tail = f"[{','.join(sorted(extras))}]" if extras else ""
    return f"{asked.name}{tail}{spec}"


def stage_pins(spec: StageSpec, checkout: Path, env: Mapping[str, str]) -> StageSpec:
    """`spec` with its packages at verl's pins, read from `checkout`'s pyproject.toml; a deps
    stage that splits verl's extras gets their requirements as lines (`verl_lines`). Any other
    stage is returned as it is."""
    pyproject = checkout / "pyproject.toml"
    if spec.verl_contract:
        spec = replace(spec, overrides=with_verl_overrides(spec.overrides, pyproject))
    if not spec.pins_from_verl and not (spec.kind == "verl-deps" and spec.verl_extras):
        return spec
    declared = declared_requirements(
        read_extras(pyproject), spec.verl_extras, env, where=str(pyproject)
    )
    subs: dict[str, Substitution] = {canonicalize_name(s.replace): s for s in spec.substitutions}
    if not spec.pins_from_verl:
        return replace(spec, verl_lines=substituted_lines(declared, subs, spec.excluded))
    return replace(spec, packages=pinned_packages(spec.packages, declared, subs))


def read_uv_table(pyproject: Path) -> dict[str, Any]:
    """`[tool.uv]` of verl's `pyproject.toml` (empty when it has none)."""
    tool = _pyproject(pyproject, "[tool.uv]").get("tool")
    table = tool.get("uv") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else {}


def _pyproject(pyproject: Path, what: str) -> dict[str, Any]:
    """verl's `pyproject.toml` as TOML (empty when there is none); `what` names the part wanted."""
    try:
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{pyproject}: cannot read verl's {what}: {exc}") from None


def verl_overrides(pyproject: Path) -> tuple[str, ...]:
    """verl's `[tool.uv] override-dependencies`, markers kept (uv evaluates them per target)."""
    return override_lines(read_uv_table(pyproject), pyproject)


def override_lines(table: Mapping[str, Any], pyproject: Path) -> tuple[str, ...]:
    """The `override-dependencies` of a `[tool.uv]` table read from `pyproject`, checked."""
    lines = table.get("override-dependencies", [])
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise InputError(f"{pyproject}: [tool.uv] override-dependencies is not a list of strings")
    return tuple(lines)


def with_verl_overrides(own: Sequence[str], pyproject: Path) -> tuple[str, ...]:
    """verl's overrides, then the stage's own for names verl leaves alone (a profile that copies
    verl's, for a ref whose pyproject has none, keeps them)."""
    verl = verl_overrides(pyproject)
    names = {canonicalize_name(Requirement(line).name) for line in verl}
    return (*verl, *(o for o in own if canonicalize_name(Requirement(o).name) not in names))


def substituted_lines(
    declared: Sequence[Declared], substituted: Mapping[str, Substitution], excluded: Sequence[str]
) -> tuple[str, ...]:
    """verl's requirements with each substitution in place of verl's (or dropped, with none),
    less what a later stage installs: what a deps stage asks for, as plain requirements, so
    every dependency's own bounds keep holding (an override would erase them)."""
    out: list[str] = []
    for item in declared:
        sub = substituted.get(item.name)
        if item.name in excluded:
            continue
        if sub is None or sub.keeps_requirement():
            out.append(item.requirement)
        elif sub.by is not None:
            out.append(sub.by)
    return tuple(dict.fromkeys(out))


def _instead(sub: Substitution) -> str:
    """What a substitution installs, said once with its reason: another requirement, verl's own
    requirement from another source, or nothing."""
    if sub.by is None and sub.source:
        return f"verl's {sub.replace} from {sub.source} ({sub.reason})"
    return f"instead of verl's {sub.replace}: {sub.by or 'nothing'} ({sub.reason})"


def shown_substitutions(spec: StageSpec) -> tuple[Substitution, ...]:
    """The substitutions `extras_lines` names for a stage that takes verl's extras: those of the
    packages it pins from verl, else those of what it installs itself."""
    if not spec.verl_extras:
        return ()
    if spec.pins_from_verl:
        wanted = {canonicalize_name(Requirement(p).name) for p in spec.packages}
        return tuple(s for s in spec.substitutions if canonicalize_name(s.replace) in wanted)
    return tuple(s for s in spec.substitutions if canonicalize_name(s.replace) not in spec.excluded)


def extras_lines(
    spec: StageSpec, checkout: Path, python: str = "3.12", said: Collection[str] = ()
) -> list[str]:
    """What `plan` says about a stage that takes verl's extras: which, from where, what it
    leaves to later stages, and each substitution with its reason (`said`: the substitutions an
    earlier stage named, only listed here)."""
    if not spec.verl_extras:
        return []
    asked = f"verl[{','.join(spec.verl_extras)}]"
    pyproject = checkout / "pyproject.toml"
    table = read_extras(pyproject)
    env = marker_env(python, "linux-64")
    declared = (
        declared_requirements(table, spec.verl_extras, env, where=str(pyproject)) if table else ()
    )
    where = str(pyproject) if table else f"{pyproject} (read once verl is fetched)"
    if spec.pins_from_verl:
        wanted = {canonicalize_name(Requirement(p).name) for p in spec.packages}
        pins: dict[str, list[str]] = {}
        for item in declared:
            if item.name in wanted:
                pins.setdefault(item.requirement, []).append(item.origin())
        lines = [f"takes the pins {asked} declares, from {where}"]
        if pins:
            lines.append("  " + ", ".join(f"{r} ({', '.join(o)})" for r, o in pins.items()))
    else:
        lines = [f"takes {asked} as declared in {where}"]
        if declared:
            names = sorted({d.name for d in declared} - set(spec.excluded))
            lines.append(f"  {len(names)} distributions: {', '.join(names)}")
        if spec.excluded:
            lines.append(f"  left to later stages: {', '.join(spec.excluded)}")
    subs = shown_substitutions(spec)
    again = [s.replace for s in subs if s.replace in said]
    if again:
        lines.append(f"  as an earlier stage says: verl's {', '.join(again)} substituted")
    lines += [f"  {_instead(s)}" for s in subs if s.replace not in said]
    return lines
