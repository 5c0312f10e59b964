"""One stage's resolution with `uv pip compile`, for a target Python and platform (no install).

Two views of the same resolution are read: uv's PEP 751 output gives the artifacts that fit the
target (wheels for that Python and platform, else the sdist) with their sha256, and its annotated
requirements output says which index each distribution came from and what pulled it in. The
second run reads only uv's cache, so both see the same index state.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, InputError, StepFailed
from verl_bootstrap.installer.artifact import DistSource
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.machine.host.indexes import DEFAULT, IndexSettings
from verl_bootstrap.machine.host.netfaults import net_fault, without_tool_hints
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.platforms import DEFAULT_GLIBC, uv_platform

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "DEFAULT_GLIBC",
    "FIND_LINKS",
    "Resolved",
    "Target",
    "compile_stage",
    "index_args",
    "index_name",
    "load_toml",
    "parse_annotated",
    "parse_pylock",
]

FIND_LINKS = "find-links"  # the index name of artifacts found in pip's find-links folders
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")


@dataclass(frozen=True)
class Target:
    """What a lock is solved for: Python X.Y, a platform, and the upload-time cutoff."""

    python: str
    platform: str
    exclude_newer: str
    offline: bool = False
    glibc: str = DEFAULT_GLIBC  # the oldest glibc the env's machines have (`__glibc`)

    @property
    def uv_platform(self) -> str:
        """uv's name for the platform: the machine and the manylinux level of the glibc."""
        return uv_platform(self.platform, self.glibc)

    def uv_args(self) -> list[str]:
        """The flags every compile for this target takes."""
        args = ["--python-version", self.python, "--python-platform", self.uv_platform]
        args += ["--exclude-newer", self.exclude_newer, "--no-sources"]
        return [*args, "--offline"] if self.offline else args


@dataclass(frozen=True)
class Resolved:
    """One distribution of a stage's resolution."""

    name: str
    version: str
    source: DistSource
    hashes: tuple[str, ...] = ()
    index: str | None = None
    url: str | None = None
    commit: str | None = None
    via: tuple[str, ...] = field(default=())
    # the wheels the index serves for the target: (URL, sha256, size), for reading their metadata
    files: tuple[tuple[str, str, int | None], ...] = field(default=())


def index_args(settings: IndexSettings, stage_index: str | None) -> list[str]:
    """The index flags of a stage, as an install of it would pass them to uv."""
    args = ["--index-strategy", "unsafe-best-match"]
    if settings.index_url:
        args += ["--index-url", settings.index_url]
    stage_url = settings.url_of(stage_index) if stage_index else None
    if stage_url:
        args += ["--extra-index-url", stage_url]
    for url in settings.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in settings.find_links:
        args += ["--find-links", link]
    for constraint in settings.constraints:
        args += ["--constraint", constraint]
    return args


def compile_stage(
    requirements: Path,
    *,
    target: Target,
    settings: IndexSettings,
    stage_index: str | None,
    extra: Sequence[str],
    log_path: Path,
    preferences: Mapping[str, str] | None = None,
) -> list[Resolved]:
    """Resolve `requirements` (+ `extra` flags: constraints, overrides) for `target`, keeping the
    versions of `preferences` (name -> version: the lock being regenerated) where they still fit.

    Kept first as exact constraints: where they all still fit, the stage gets them back exactly.
    Where they do not (a bound restored, another profile), uv is given them as preferred versions
    instead, as it keeps the versions already in its output file. (Preferences alone are not
    enough: uv passes over a preferred version that an index without upload times also lists,
    under --exclude-newer, and backtracks to older ones.)"""
    base = [uv_binary(), "pip", "compile", str(requirements), "--no-header", "--quiet"]
    base += target.uv_args() + index_args(settings, stage_index) + list(extra)
    pylock = requirements.with_name(f"pylock.{requirements.stem}.toml")
    annotated = requirements.with_suffix(".out.txt")
    for stale in (pylock, annotated):
        stale.unlink(missing_ok=True)
    first = [*base, "--format", "pylock.toml", "-o", str(pylock)]
    kept = _pins_file(requirements.with_suffix(".kept.txt"), preferences or {})
    try:
        _run_uv([*first, *kept], log_path, requirements.stem)
    except StepFailed:
        if not kept:
            raise
        atomic_write(pylock, _preferred(preferences or {}))  # uv prefers what its output holds
        _run_uv(first, log_path, requirements.stem)
    found = parse_pylock(pylock.read_text(encoding="utf-8"))
    # The second view reads only what the first put in uv's cache, held to what the first chose:
    # the same index state, no network. (Two concurrent resolutions were seen to get different
    # answers from the index.)
    chosen = {d.name: d.version for d in found if d.source in ("wheel", "sdist")}
    second = [*base, "--emit-index-annotation", "-o", str(annotated)]
    second += _pins_file(requirements.with_suffix(".chosen.txt"), chosen)
    _run_uv(second if target.offline else [*second, "--offline"], log_path, requirements.stem)
    origins = parse_annotated(annotated.read_text(encoding="utf-8"))
    return [_with_origin(dist, origins, settings) for dist in found]


def _pins_file(path: Path, versions: Mapping[str, str]) -> list[str]:
    """`--constraint PATH` holding `versions` exactly (none: no flag)."""
    if not versions:
        return []
    atomic_write(path, "".join(f"{n}=={v}\n" for n, v in sorted(versions.items())))
    return ["--constraint", str(path)]


def _preferred(versions: Mapping[str, str]) -> str:
    """A PEP 751 file of bare pins, which uv reads as the versions to keep."""
    head = 'lock-version = "1.0"\ncreated-by = "verl-bootstrap"\n'
    return head + "".join(
        f"\n[[packages]]\nname = {json.dumps(n)}\nversion = {json.dumps(v)}\n"
        for n, v in sorted(versions.items())
    )


def load_toml(text: str) -> dict[str, Any]:
    """A TOML document uv wrote."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"uv wrote an unreadable pylock.toml: {exc}") from exc


def _run_uv(argv: list[str], log_path: Path, what: str) -> None:
    """Run one uv resolution; a failure says why in uv's words (the command is in the log), but
    for its hints naming its own flags; a network failure names the host and the setting that
    fixes it."""
    try:
        proc.run(argv, log_path=log_path)
    except CommandFailed as exc:
        fault = net_fault(exc.tail)
        if fault is not None:
            raise StepFailed(
                f"{what}: uv could not reach the index: {fault.line()}",
                hint=f"{fault.fix('--index NAME=URL')}; the full log is {log_path}",
            ) from None
        reason = "\n    ".join(line for line in without_tool_hints(exc.tail) if line.strip())
        raise StepFailed(
            f"{what}: uv could not resolve it:\n    {reason}",
            hint=f"the full log is {log_path}",
        ) from None


def parse_pylock(text: str) -> list[Resolved]:
    """Distributions and their target artifacts from uv's PEP 751 output."""
    return [_from_package(p) for p in load_toml(text).get("packages", [])]


def _from_package(package: Mapping[str, Any]) -> Resolved:
    name = canonicalize_name(str(package["name"]))
    version = str(package.get("version", ""))
    if "directory" in package:
        return Resolved(name, version, "editable")
    if "vcs" in package:
        vcs = package["vcs"]
        return Resolved(name, version, "git", url=vcs.get("url"), commit=vcs.get("commit-id"))
    wheels = [_sha256(w, name) for w in package.get("wheels", [])]
    if wheels:
        files = tuple(_file(w, name) for w in package.get("wheels", []))
        return Resolved(name, version, "wheel", tuple(sorted(wheels)), files=files)
    if "sdist" in package:
        return Resolved(name, version, "sdist", (_sha256(package["sdist"], name),))
    raise InputError(
        f"{name} {version}: resolved to a direct archive URL, which a lockfile cannot record "
        "by index name",
        hint="publish it to an index (or a find-links folder) and name that in the profile",
    )


def _file(artifact: Mapping[str, Any], name: str) -> tuple[str, str, int | None]:
    """(URL, sha256, size) of a wheel uv listed (a find-links file by its path)."""
    url = artifact.get("url") or Path(str(artifact.get("path"))).absolute().as_uri()
    size = artifact.get("size")
    return str(url), _sha256(artifact, name), size if isinstance(size, int) else None


def _sha256(artifact: Mapping[str, Any], name: str) -> str:
    digest = artifact.get("hashes", {}).get("sha256")
    if not digest:
        raise InputError(f"{name}: the index gave no sha256 for {artifact.get('url', '?')}")
    return str(digest)


def parse_annotated(text: str) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """name -> (index URL it came from, what required it), from uv's annotated output."""
    out: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    current: str | None = None
    origin: str | None = None
    via: list[str] = []
    for raw in [*text.splitlines(), ""]:
        line = raw.strip()
        starts_entry = bool(raw) and not raw[0].isspace() and not line.startswith("#")
        if starts_entry or not raw:
            if current is not None:
                out[current] = (origin, tuple(via))
            match = _PIN.match(line) if starts_entry else None
            current, origin, via = (canonicalize_name(match.group(1)) if match else None), None, []
        elif line.startswith("# from "):
            origin = line.removeprefix("# from ").strip()
        elif line.startswith("# via") or line.startswith("#   "):
            via.extend(v for v in line.removeprefix("# via").lstrip("# ").split(", ") if v)
    return out


Origins = Mapping[str, tuple[str | None, tuple[str, ...]]]


def _with_origin(dist: Resolved, origins: Origins, settings: IndexSettings) -> Resolved:
    url, via = origins.get(dist.name, (None, ()))
    index = None if dist.source in ("git", "editable") else index_name(url, settings)
    return Resolved(
        **{**dist.__dict__, "index": index, "via": tuple(canonicalize_name(v) for v in via)}
    )


def index_name(url: str | None, settings: IndexSettings) -> str:
    """The name a lockfile records for the index at `url`: a profile name, find-links, default.

    "default" is the user's own index set: pip's index-url and extra-index-urls (or uv's default).
    """
    if url is None:
        return DEFAULT
    wanted = url.rstrip("/")
    for link in settings.find_links:
        if _as_uri(link) == wanted:
            return FIND_LINKS
    for name, named in sorted(settings.named.items()):
        if named.rstrip("/") == wanted:
            return name
    return DEFAULT


def _as_uri(location: str) -> str:
    if "://" in location:
        return location.rstrip("/")
    return Path(location).expanduser().absolute().as_uri()
