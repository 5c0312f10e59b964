"""The run-time half of `--locked` / `--frozen`: fetch checked files, write each stage's hashed
requirements, check verl's source against the lock, and record the env afterwards.

The plan-time half (finding the lockfile, checking it fits, looking every artifact up before the
prefix is touched) is `verl_bootstrap.lock.installing.prepare`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.cmdline import InstallRequest
from verl_bootstrap.installer.download import cached_archive, fetch_checked
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.installer.envs.inventory import Dist, installed
from verl_bootstrap.lock.format import (
    CondaPackage,
    KernelWheel,
    LockedDist,
    LockedStage,
    Lockfile,
)
from verl_bootstrap.lock.installing.prepare import LockedInstall
from verl_bootstrap.lock.io import write_lockfile
from verl_bootstrap.paths import (
    atomic_write,
    cache_folder,
    env_lockfile,
    locked_build_file,
    locked_requirements_file,
)
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.source.sdist import unpack_sdist
from verl_bootstrap.source.spec import SourceResult, SourceSpec

__all__ = [
    "build_constraints_file",
    "check_source",
    "fetch_locked_sdist",
    "locked_requirements",
    "record_locked_env",
    "write_build_constraints",
]


def locked_requirements(
    stage: LockedStage,
    artifacts: Mapping[str, Artifact] | None = None,
    built: Mapping[str, Artifact] | None = None,
    *,
    leave_out: Collection[str] = (),
) -> str:
    """The hashed requirements file a locked stage installs with `--require-hashes --no-deps`.

    With `artifacts` (from `precheck`), each line names the checked file by URL and sha256:
    nothing is looked up again at install time. `built` holds the wheels this run built from
    the stage's locked sdists, or took in their place; those install in place of the sdists.
    `leave_out`: the locked parts a whole kernel wheel in `built` holds (not installed).
    """
    artifacts = {**(artifacts or {}), **(built or {})}
    lines = [f"# stage {stage.id}, from the lockfile; installed with --no-deps --require-hashes"]
    for name in leave_out:
        lines.append(f"# {name}: left out, the whole kernel wheel below holds it")
    for dist in (d for d in stage.distributions if d.name not in leave_out):
        if dist.source == "git":
            raise InputError(
                f"{dist.name}: git-sourced distributions cannot be installed hash-checked",
                hint="publish the built wheel to an index and lock it from there",
            )
        if dist.source != "editable":
            lines.append(_requirement(dist, artifacts.get(dist.name)))
    return "\n".join(lines) + "\n"


def _requirement(dist: LockedDist, artifact: Artifact | None) -> str:
    if artifact is not None:
        return f"{dist.name} @ {artifact.url} \\\n    --hash=sha256:{artifact.sha256}"
    hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in dist.hashes)
    return f"{dist.name}=={dist.version}{hashes}"


def build_constraints_file(prefix: Path, stage: LockedStage | None) -> Path | None:
    """The build constraints a locked stage builds with (None: it locks no build env)."""
    if stage is None or not stage.build:
        return None
    return locked_build_file(prefix, stage.id)


def write_build_constraints(prefix: Path, stage: LockedStage | None) -> None:
    """Write the stage's locked build dependencies, pinned with their sha256, for uv's
    `--build-constraints` (with `--require-build-hashes`: an unlisted one is refused too)."""
    path = build_constraints_file(prefix, stage)
    if path is None or stage is None:
        return
    lines = [f"# stage {stage.id}'s locked build dependencies, from the lockfile"]
    for dist in stage.build:
        hashes = "".join(f" --hash=sha256:{h}" for h in dist.hashes)
        lines.append(f"{dist.name}=={dist.version}{hashes}")
    atomic_write(path, "\n".join(lines) + "\n")


def locked_request(
    prefix: Path, stage: StageSpec, locked: LockedStage | None, *, offline: bool
) -> InstallRequest | None:
    """A locked stage's install: its hashed requirements file, no dependencies resolved, its
    locked build env (None when the stage has no locked form: the run resolves)."""
    if locked is None:
        return None
    return InstallRequest(
        python=env_python(prefix),
        requirements=locked_requirements_file(prefix, stage.id),
        index=stage.index,
        no_deps=True,
        no_build_isolation=stage.no_build_isolation,
        offline=offline,
        build_constraints=build_constraints_file(prefix, locked),
    )


def locked_conda(lock: Lockfile | None, backend: str) -> tuple[CondaPackage, ...] | None:
    """The conda packages a --locked conda env gets, each pinned to version, build and digest
    (None for a venv, or when the run resolves: the env takes what conda solves)."""
    return None if lock is None or backend != "conda" else lock.conda


def fetch_locked_sdist(
    spec: SourceSpec, locked: LockedInstall | None, *, log_path: Path, cache: Path | None = None
) -> SourceResult | None:
    """verl's locked release sdist, from the tool's cache by sha256, else from the checked URL.

    None when there is no lock, the lock is not an sdist lock or the checkout already exists
    (fetch-source's own logic handles those). The archive is kept under `cache`, so later envs
    skip the download.
    """
    if locked is None:
        return None
    want = locked.lock.verl
    artifact = locked.artifacts.get("verl")
    if want.kind != "sdist" or not want.sdist_sha256 or spec.checkout.exists():
        return None
    if cache is None:
        cache = cache_folder()
    archive = cached_archive(cache, want.sdist_sha256, want.sdist or "verl.tar.gz")
    if not archive.is_file() and artifact is None:
        return None
    fetch_checked(artifact, archive, want.sdist_sha256)
    # the same checkout and mark fetch_source makes, so a resumed run reuses it
    unpack_sdist(archive, spec.checkout, want.sdist_sha256)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"unpacked verl's locked sdist {archive} (sha256 {want.sdist_sha256})\n")
    return SourceResult(
        kind="sdist",
        repo=spec.repo,
        ref=spec.ref,
        path=spec.checkout,
        sdist_sha256=want.sdist_sha256,
        sdist_name=archive.name,
        note="verl's locked release sdist",
    )


def check_source(lock: Lockfile | None, source: SourceResult) -> None:
    """The fetched verl is the locked one (when a lock is installed): same commit, or an sdist
    with the locked sha256."""
    if lock is None:
        return
    want = lock.verl
    if want.kind == "git" and source.commit != want.commit:
        got = source.commit or f"the release sdist {source.sdist_name}"
        raise StepFailed(
            f"verl's checkout is at {got}, the lockfile names commit {want.commit}",
            hint="point --verl-source at a repository that has the locked commit",
        )
    if want.kind == "sdist" and source.sdist_sha256 != want.sdist_sha256:
        raise StepFailed(
            f"verl's source {source.sdist_name or source.commit} has sha256 "
            f"{source.sdist_sha256}, the lockfile names {want.sdist_sha256}",
            hint="the index serves another verl sdist than the one locked; regenerate the lock",
        )


def record_locked_env(
    prefix: Path,
    lock: Lockfile | None,
    built: Mapping[str, str] | None = None,
    kernels: Mapping[str, KernelWheel] | None = None,
    replaced: Mapping[str, str] | None = None,
) -> Path | None:
    """The env's record after a locked install: the lockfile, plus each installed RECORD's digest,
    for each distribution built here from its locked sdist the built wheel's sha256, and for a
    kernel the wheel its stage installed (prebuilt or built: file, sha256, build key), and for
    each part a whole kernel wheel holds (`replaced`: name -> the whole wheel's distribution)
    that it was not installed. None when no lockfile was installed (record-lock writes the
    resolved env's own).

    `verify --against` compares those digests with the env later, to tell a replaced build.
    """
    if lock is None:
        return None

    now, built, kernels = installed(prefix), built or {}, kernels or {}
    stages = tuple(
        stage.model_copy(
            update={
                "distributions": tuple(
                    _with_record(d, now, built, kernels, replaced or {})
                    for d in stage.distributions
                )
            }
        )
        for stage in lock.stages
    )
    return write_lockfile(lock.model_copy(update={"stages": stages}), env_lockfile(prefix))


def _with_record(
    dist: LockedDist,
    now: Mapping[str, Dist],
    built: Mapping[str, str],
    kernels: Mapping[str, KernelWheel],
    replaced: Mapping[str, str],
) -> LockedDist:
    found = now.get(dist.name)
    update: dict[str, object] = {
        "record_sha256": found.record_sha256 if found is not None else None,
        "built_sha256": built.get(dist.name),
        "replaced_by": replaced.get(dist.name),
    }
    if dist.name in kernels:  # a lockfile's own record is kept when this run took another way
        update["kernel_wheel"] = kernels[dist.name]
    return dist.model_copy(update=update)
