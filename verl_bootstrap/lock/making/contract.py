"""A lockfile against its own metadata and verl's whole `[tool.uv]` contract (`lock --check`).

Two questions. Does every locked distribution's Requires-Dist hold for the versions the lock pins?
uv answers it: it resolves the lock's pins, exactly, with verl's own override-dependencies and
with the deps-free installs (verl's dependency-metadata, the profile's no-deps stages) stated as
such; a conflict or a distribution the lock lacks is a gap. And does the lock keep what verl's
`[tool.uv]` says beyond its extras (overrides, dependency-metadata versions, sources, conflicts),
except where the profile states a substitution with its reason?
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import index_args, parse_annotated
from verl_bootstrap.lock.format import LockedDist, Lockfile
from verl_bootstrap.machine.host.indexes import DEFAULT, IndexSettings
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.platforms import locked_glibc, uv_platform
from verl_bootstrap.profile.models import Profile, Substitution
from verl_bootstrap.profile.stagespec import DROPPED_MARKER, stage_specs
from verl_bootstrap.profile.verlextras import marker_env, override_lines, read_uv_table

__all__ = ["UNCHECKED", "MetadataCheck", "contract_gaps", "metadata_gaps"]

# a line that names what the check could not see here: said, but not a difference
UNCHECKED = "not checked here: "


@dataclass(frozen=True)
class MetadataCheck:
    """Where the metadata check runs: the indexes, a scratch folder, and whether it is offline."""

    settings: IndexSettings
    work: Path
    offline: bool = False


def contract_gaps(lock: Lockfile, profile: Profile, pyproject: Path) -> list[str]:
    """Where `lock` leaves verl's `[tool.uv]` contract without a substitution saying why."""
    table = read_uv_table(pyproject)
    if not table:
        return []
    env = marker_env(lock.python, lock.platform)
    subs = _substitutions(profile, lock)
    locked = lock.distributions()
    return [
        *_override_gaps(table, env, locked, subs, pyproject),
        *_metadata_version_gaps(table, locked, subs),
        *_source_gaps(table, _deps_extras(profile, lock.cuda.variant), locked, subs),
        *_conflict_gaps(table, _deps_extras(profile, lock.cuda.variant)),
    ]


def _substitutions(profile: Profile, lock: Lockfile) -> dict[str, Substitution]:
    return {
        canonicalize_name(s.replace): s
        for s in profile.substitutions
        if s.applies(lock.cuda.variant)
    }


def _override_gaps(
    table: Mapping[str, Any],
    env: Mapping[str, str],
    locked: Mapping[str, LockedDist],
    subs: Mapping[str, Substitution],
    where: Path,
) -> Iterator[str]:
    """Each override that holds on the lock's platform: the locked version within it (an
    override no platform has drops the name: the lock must not hold it)."""
    for line in override_lines(table, where):
        req = _requirement(line, where)
        name = canonicalize_name(req.name)
        if req.marker is not None and not _holds(req.marker, env):
            if DROPPED_MARKER not in line and name in locked and _never(req.marker, env):
                yield f"holds {name} {locked[name].version}, which verl's override {line!r} drops"
            continue
        dist = locked.get(name)
        if dist is None or _replaced(subs.get(name)):
            continue
        if not _within(req, dist.version):
            yield f"pins {name}=={dist.version}, verl overrides it to {line!r}"


def _replaced(sub: Substitution | None) -> bool:
    """A substitution that installs another requirement (one that only changes the source keeps
    verl's, and its version must still be verl's)."""
    return sub is not None and not sub.keeps_requirement()


def _never(marker: Marker, env: Mapping[str, str]) -> bool:
    """An override's marker that no Linux machine of the lock's Python has (verl drops
    flash-attn-4 so): it removes the name from the env."""
    machines = ("x86_64", "aarch64")
    return not any(_holds(marker, {**env, "platform_machine": m}) for m in machines)


def _metadata_version_gaps(
    table: Mapping[str, Any], locked: Mapping[str, LockedDist], subs: Mapping[str, Substitution]
) -> Iterator[str]:
    """verl states the metadata of one version of each deps-free install: the lock's must be
    that version (or a substitution says why not)."""
    for entry in _entries(table.get("dependency-metadata")):
        name, version = canonicalize_name(str(entry.get("name", ""))), entry.get("version")
        dist = locked.get(name)
        if dist is None or version is None or _replaced(subs.get(name)):
            continue
        if not _same(dist.version, str(version)):
            yield (
                f"pins {name}=={dist.version}, verl's dependency-metadata is for {version} "
                "(installed without its own dependencies)"
            )


def _deps_extras(profile: Profile, variant: str) -> set[str]:
    """The verl extras the profile's deps stage asks for."""
    deps = next((s for s in stage_specs(profile, variant) if s.kind == "verl-deps"), None)
    return set(deps.extras if deps else ())


def _source_gaps(
    table: Mapping[str, Any],
    extras: set[str],
    locked: Mapping[str, LockedDist],
    subs: Mapping[str, Substitution],
) -> Iterator[str]:
    """Each `[tool.uv.sources]` entry for a locked name: the lock takes it from there, or a
    substitution names where it comes from instead and why."""
    sources = table.get("sources", {})
    if not isinstance(sources, dict):
        return
    for raw, value in sorted(sources.items()):
        name = canonicalize_name(str(raw))
        dist = locked.get(name)
        entry = _source_for(value, extras)
        if dist is None or entry is None or name in subs:
            continue
        if "git" in entry and not _from_git(dist, entry):
            rev = entry.get("rev") or entry.get("tag") or entry.get("branch") or "HEAD"
            where = dist.index or dist.source
            yield f"takes {name} {dist.version} from {where}, verl from git {entry['git']} at {rev}"
        elif "index" in entry and dist.index != entry["index"]:
            yield (
                f"takes {name} {dist.version} from the {dist.index or dist.source} index, verl "
                f"from its index {entry['index']!r}"
            )


def _source_for(value: Any, extras: set[str]) -> dict[str, Any] | None:
    """The source entry that applies: one table, or the first whose `extra` the lock has."""
    entries = value if isinstance(value, list) else [value]
    for entry in entries:
        if isinstance(entry, dict) and (entry.get("extra") is None or entry["extra"] in extras):
            return entry
    return None


def _from_git(dist: LockedDist, entry: Mapping[str, Any]) -> bool:
    rev = str(entry.get("rev", ""))
    commit = dist.commit or ""
    return dist.source == "git" and (not rev or commit.startswith(rev))


def _conflict_gaps(table: Mapping[str, Any], asked: set[str]) -> Iterator[str]:
    """verl's `conflicts`: no two extras of one set in the same env."""
    for group in table.get("conflicts", []) or []:
        names = sorted({str(e.get("extra")) for e in group if isinstance(e, dict)} & asked)
        if len(names) > 1:
            yield f"asks verl's extras {', '.join(names)}, which verl declares as conflicting"


def metadata_gaps(
    lock: Lockfile, profile: Profile, pyproject: Path, check: MetadataCheck
) -> list[str]:
    """Whether the lock's pins satisfy each other's Requires-Dist, in uv's words: a conflict, or
    each distribution the lock lacks with what requires it. Excepted: verl's override-dependencies
    and deps-free installs, and distributions whose index is not configured here (named)."""
    table = read_uv_table(pyproject) if pyproject.is_file() else {}
    locked = lock.distributions()
    checked, unchecked = _split(locked, check.settings)
    work = check.work
    atomic_write(work / "pins.in", "".join(f"{d.name}=={d.version}\n" for d in checked))
    overrides = [*override_lines(table, pyproject)]
    overrides += [
        *_profile_overrides(profile, lock),
        *(f"{n} ; {DROPPED_MARKER}" for n in unchecked),
    ]
    atomic_write(work / "overrides.txt", "".join(f"{o}\n" for o in overrides))
    atomic_write(work / "uv.toml", _deps_free_config(table, profile, lock, locked))
    try:
        proc.run(_argv(lock, check, work), log_path=work / "check.log")
    except CommandFailed as exc:
        reason = " ".join(line.strip() for line in exc.tail if line.strip())
        if "No solution found" not in reason:  # uv could not read the index: nothing was checked
            return [f"{UNCHECKED}its pins' metadata (uv could not resolve: {_shorten(reason)})"]
        return [f"its pins break their own metadata: {_shorten(reason)}"]
    found = parse_annotated((work / "out.txt").read_text(encoding="utf-8"))
    gaps = [
        f"lacks {name}, which {', '.join(via) or 'a locked distribution'} requires"
        for name, (_, via) in sorted(found.items())
        if name not in locked
    ]
    return gaps + [f"{UNCHECKED}{n} (its index is not configured here)" for n in unchecked]


def _split(
    locked: Mapping[str, LockedDist], settings: IndexSettings
) -> tuple[list[LockedDist], list[str]]:
    """Distributions uv can find here (from an index or folder this machine is given) and the
    names of those it cannot; verl itself and git sources are left to the contract check."""
    reachable = {DEFAULT, *settings.named}
    if settings.find_links:
        reachable.add("find-links")
    checked: list[LockedDist] = []
    unchecked: list[LockedDist] = []
    for dist in locked.values():
        if dist.source in ("editable", "git") or dist.name == "verl":
            continue
        (checked if (dist.index or DEFAULT) in reachable else unchecked).append(dist)
    return sorted(checked, key=lambda d: d.name), sorted(d.name for d in unchecked)


def _profile_overrides(profile: Profile, lock: Lockfile) -> list[str]:
    """The profile's own overrides (verl's, copied for refs whose pyproject lacks them)."""
    return sorted({o for s in stage_specs(profile, lock.cuda.variant) for o in s.overrides})


def _deps_free_config(
    table: Mapping[str, Any], profile: Profile, lock: Lockfile, locked: Mapping[str, LockedDist]
) -> str:
    """A uv config whose dependency-metadata states the deps-free installs: verl's entries (for
    the version verl states, or any), and the profile's no-deps stages' distributions."""
    entries: dict[str, tuple[str, list[str]]] = {}
    for entry in _entries(table.get("dependency-metadata")):
        name: str = canonicalize_name(str(entry.get("name", "")))
        dist = locked.get(name)
        version = entry.get("version")
        if dist is not None and (version is None or _same(dist.version, str(version))):
            entries[name] = (dist.version, [str(r) for r in entry.get("requires-dist", [])])
    for spec in stage_specs(profile, lock.cuda.variant):
        if spec.no_deps:
            for name in _names(spec.packages):
                if name in locked:
                    entries[name] = (locked[name].version, [])
    return "".join(
        f'[[dependency-metadata]]\nname = "{n}"\nversion = "{v}"\n'
        f"requires-dist = {_toml_list(r)}\n\n"
        for n, (v, r) in sorted(entries.items())
    )


def _toml_list(items: Sequence[str]) -> str:
    return (
        "["
        + ", ".join('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items)
        + "]"
    )


def _argv(lock: Lockfile, check: MetadataCheck, work: Path) -> list[str]:
    glibc = locked_glibc(lock.cuda.virtual_packages)
    argv = [uv_binary(), "pip", "compile", str(work / "pins.in"), "--no-header", "--quiet"]
    argv += ["--config-file", str(work / "uv.toml"), "--override", str(work / "overrides.txt")]
    argv += ["--python-version", lock.python, "--no-sources", "--emit-index-annotation"]
    argv += ["--python-platform", uv_platform(lock.platform, glibc), "-o", str(work / "out.txt")]
    if lock.exclude_newer:
        argv += ["--exclude-newer", lock.exclude_newer]
    argv += index_args(check.settings, None)
    return [*argv, "--offline"] if check.offline else argv


def _shorten(text: str, limit: int = 600) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _names(specs: Sequence[str]) -> set[str]:
    return {canonicalize_name(Requirement(s).name) for s in specs}


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [e for e in value or () if isinstance(e, dict)] if isinstance(value, list) else []


def _requirement(line: str, where: Path) -> Requirement:
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise InputError(f"{where}: [tool.uv] override {line!r}: {exc}") from None


def _holds(marker: Marker, env: Mapping[str, str]) -> bool:
    try:
        return marker.evaluate(dict(env))
    except InvalidMarker:
        return False


def _within(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b
