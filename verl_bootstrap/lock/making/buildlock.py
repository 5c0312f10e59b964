"""The build requirements of what a lock builds from source, locked with their sha256.

An sdist is built in an isolated env whose build backend (setuptools, hatchling, ...) and its
dependencies come from an index: unpinned, they would be the one part of a `--locked` install
that is not hash-checked. So `lock` reads each built source's `[build-system] requires` (the
locked sdists of a stage, and verl's own checkout for its editable install), resolves them for
the lock's Python, platform and cutoff, and records the result as the stage's `build` list. A
`--locked` install passes that list to uv as build constraints with `--require-build-hashes`:
a build dependency that is not locked, or whose file has another sha256, stops the build.
Bundles collect the same requirements (`verl_bootstrap.lock.bundle.collect`).
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, Refused
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.download import cached_archive, fetch_checked
from verl_bootstrap.installer.resolve import Target, index_args, load_toml, parse_pylock
from verl_bootstrap.lock.format import LockedDist, LockedStage
from verl_bootstrap.lock.lookup import lookup_dists, stage_index
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import atomic_write

__all__ = [
    "LEGACY_BUILD",
    "build_requirements",
    "lock_build",
    "lock_stage_builds",
    "resolve_pylock",
    "sdist_pyproject",
]

# What PEP 517 front ends assume of an sdist without a pyproject.toml (or without build-system)
LEGACY_BUILD = ("setuptools>=40.8.0", "wheel")


def build_requirements(sources: Sequence[tuple[str, bytes | None]]) -> list[str]:
    """The union of the `[build-system] requires` of each (origin, pyproject.toml text)."""
    wanted: dict[str, None] = {}
    for _, text in sources:
        requires = None
        if text is not None:
            requires = load_toml(text.decode("utf-8")).get("build-system", {}).get("requires")
        for requirement in requires if requires is not None else LEGACY_BUILD:
            wanted[str(requirement)] = None
    return sorted(wanted)


def sdist_pyproject(archive: Path) -> bytes | None:
    """The top-level pyproject.toml of an sdist (None: it has none)."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            names = [n for n in zipped.namelist() if _is_top_pyproject(n)]
            return zipped.read(names[0]) if names else None
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and _is_top_pyproject(member.name):
                handle = tar.extractfile(member)
                return handle.read() if handle is not None else None
    return None


def _is_top_pyproject(name: str) -> bool:
    return name.count("/") == 1 and name.endswith("/pyproject.toml")


def resolve_pylock(
    requirements: Sequence[str],
    target: Target,
    settings: IndexSettings,
    *,
    work: Path,
    stage_index: str | None = None,
) -> str:
    """uv's PEP 751 text for `requirements` and their dependencies, resolved for `target`."""
    work.mkdir(parents=True, exist_ok=True)
    pins, out = work / "requirements.in", work / "pylock.resolved.toml"
    atomic_write(pins, "".join(f"{r}\n" for r in requirements))
    argv = [uv_binary(), "pip", "compile", str(pins), "--no-header", "--quiet", "--upgrade"]
    argv += ["--format", "pylock.toml", "-o", str(out), "--python-version", target.python]
    argv += ["--python-platform", target.uv_platform, "--no-sources"]
    argv += ["--exclude-newer", target.exclude_newer] if target.exclude_newer else []
    argv += ["--offline"] if target.offline else []
    argv += index_args(settings, stage_index)
    try:
        proc.run(argv, log_path=work / "resolve.log")
    except CommandFailed as exc:
        reason = next((line for line in reversed(exc.tail) if line.strip()), exc.message)
        raise Refused(f"{', '.join(requirements)} did not resolve: {reason}") from None
    return out.read_text(encoding="utf-8")


def lock_build(
    requirements: Sequence[str],
    target: Target,
    settings: IndexSettings,
    *,
    work: Path,
    stage_index: str | None = None,
) -> tuple[LockedDist, ...]:
    """The locked build env of `requirements`: each distribution with the sha256 of its files."""
    if not requirements:
        return ()
    text = resolve_pylock(requirements, target, settings, work=work, stage_index=stage_index)
    return tuple(
        LockedDist(name=r.name, version=r.version, source=r.source, hashes=r.hashes)
        for r in sorted(parse_pylock(text), key=lambda r: r.name)
    )


def lock_stage_builds(
    stages: Sequence[LockedStage],
    checkout: Path,
    target: Target,
    settings: IndexSettings,
    *,
    cache: Path,
    work: Path,
) -> tuple[LockedStage, ...]:
    """`stages` with each one's `build` list: the locked build env of what it builds from source.

    A stage built without isolation builds with the env's own (hash-checked) packages: nothing
    to lock. verl's install-verl stage builds its checkout (`checkout`).
    """
    out = []
    for number, stage in enumerate(stages):
        sources = _built_sources(
            stage, checkout, target=target, settings=settings, cache=cache, work=work / f"b{number}"
        )
        if not sources or "--no-build-isolation" in stage.options:
            out.append(stage)
            continue
        index = stage_index(stage) if stage.kind != "install-verl" else None
        build = lock_build(
            build_requirements(sources),
            target,
            settings,
            work=work / f"b{number}",
            stage_index=index,
        )
        out.append(stage.model_copy(update={"build": build}))
    return tuple(out)


def _built_sources(
    stage: LockedStage,
    checkout: Path,
    *,
    target: Target,
    settings: IndexSettings,
    cache: Path,
    work: Path,
) -> list[tuple[str, bytes | None]]:
    """(origin, pyproject.toml) of each source `stage` builds: its locked sdists, or verl."""
    if stage.kind == "install-verl":
        pyproject = checkout / "pyproject.toml"
        return [("verl", pyproject.read_bytes() if pyproject.is_file() else None)]
    sdists = [d for d in stage.distributions if d.source == "sdist"]
    if not sdists:
        return []
    served = lookup_dists(sdists, stage_index(stage), target, settings, work=work)
    sources = []
    for dist in sdists:
        artifact = next((a for a in served.get(dist.name, ()) if a.sha256 in dist.hashes), None)
        if artifact is None:
            raise Refused(f"{dist.name} {dist.version}: the indexes no longer serve its sdist")
        archive = cached_archive(cache, artifact.sha256, artifact.filename)
        fetch_checked(artifact, archive, artifact.sha256)
        sources.append((archive.name, sdist_pyproject(archive)))
    return sources
