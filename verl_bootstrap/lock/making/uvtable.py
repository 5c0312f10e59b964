"""What verl's `uv.lock` says that its export does not: the Pythons and platforms it is made for
(`requires-python`, `supported-markers`) and where each locked distribution comes from (a
registry's URL, a git repository at a commit).

`uv export` still decides which distributions a set of extras takes (locking.uvlock): this reads
only the lock's own top-level fields and each package's `name`, `version` and `source`. The file
is untrusted input: each of those is shape-checked as it is read.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import InputError
from verl_bootstrap.profile.verlextras import marker_env

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["LockTable", "PinSource", "reached_extras", "read_lock_table"]

_MINORS = range(8, 21)  # Python 3.8 … 3.20


@dataclass(frozen=True)
class PinSource:
    """Where uv.lock takes one distribution from."""

    kind: str  # "registry", "git", or "other" (a path, a URL, verl itself)
    url: str = ""  # the registry's URL, or the git repository's
    commit: str = ""  # git only


@dataclass(frozen=True)
class LockTable:
    """uv.lock's own fields that an export leaves out."""

    requires_python: SpecifierSet
    environments: tuple[Marker, ...]  # empty: every environment
    sources: Mapping[str, list[tuple[str, PinSource]]] = field(default_factory=dict)

    def pythons(self, allowed: SpecifierSet, platform: str) -> list[str]:
        """The Python minors (X.Y, oldest first) in `allowed` that the lock is made for on
        `platform`."""
        found = []
        for minor in (f"3.{m}" for m in _MINORS):
            full = f"{minor}.0"
            if full in self.requires_python and full in allowed and self.covers(minor, platform):
                found.append(minor)
        return found

    def covers(self, python: str, platform: str) -> bool:
        """Whether one of the lock's environments is Python `python` on `platform`."""
        env = marker_env(python, platform)
        return not self.environments or any(m.evaluate(dict(env)) for m in self.environments)

    def covers_platform(self, platform: str) -> bool:
        return any(self.covers(f"3.{m}", platform) for m in _MINORS)

    def source_of(self, name: str, version: str = "") -> PinSource | None:
        """Where the lock takes `name` (at `version`, when it locks several) from."""
        found = self.sources.get(canonicalize_name(name), [])
        exact = [s for v, s in found if v == version]
        return next(iter(exact or [s for _, s in found]), None)


def read_lock_table(text: str, where: str) -> LockTable:
    """The fields of `text` (a uv.lock) this tool reads; `where` names the file in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not a uv.lock: {exc}") from None
    requires = _text(data.get("requires-python", ""), where, "requires-python")
    try:
        spec = SpecifierSet(requires)
    except InvalidSpecifier as exc:
        raise InputError(f"{where}: requires-python {requires!r}: {exc}") from None
    markers = data.get("supported-markers", data.get("resolution-markers", []))
    return LockTable(spec, _markers(markers, where), _sources(data.get("package", []), where))


def _text(value: object, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: {key} is not a string")
    return value


def _markers(values: object, where: str) -> tuple[Marker, ...]:
    if not isinstance(values, list):
        raise InputError(f"{where}: supported-markers is not a list")
    out = []
    for value in values:
        try:
            out.append(Marker(_text(value, where, "supported-markers")))
        except InvalidMarker as exc:
            raise InputError(f"{where}: supported-markers {value!r}: {exc}") from None
    return tuple(out)


def _sources(packages: object, where: str) -> dict[str, list[tuple[str, PinSource]]]:
    if not isinstance(packages, list):
        raise InputError(f"{where}: package is not a list of tables")
    out: dict[str, list[tuple[str, PinSource]]] = {}
    for entry in packages:
        if not isinstance(entry, dict):
            raise InputError(f"{where}: a [[package]] entry is not a table")
        name = canonicalize_name(_text(entry.get("name"), where, "package name"))
        version = entry.get("version", "")
        source = _source(entry.get("source", {}), where, name)
        out.setdefault(name, []).append((_text(version, where, f"{name} version"), source))
    return out


def _source(value: object, where: str, name: str) -> PinSource:
    if not isinstance(value, dict):
        raise InputError(f"{where}: {name}: source is not a table")
    if "registry" in value:
        return PinSource("registry", _text(value["registry"], where, f"{name} registry"))
    if "git" in value:
        url = _text(value["git"], where, f"{name} git")
        repo, _, commit = url.partition("#")
        return PinSource("git", repo.split("?", 1)[0], commit)
    return PinSource("other")


def reached_extras(table: Mapping[str, Iterable[str]], extras: Iterable[str]) -> list[str]:
    """`extras` and every extra they reach through `verl[...]`, in the order first reached."""
    seen: list[str] = []
    todo = list(extras)
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        seen.append(extra)
        for line in table.get(extra, ()):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue  # said where the extras are read (profile.verlextras)
            if canonicalize_name(req.name) == "verl":
                todo.extend(sorted(req.extras))
    return seen
