"""`--locked` / `--frozen`: install exactly a lockfile, with no resolution.

`--locked` first checks that the lockfile was made from the profile as it is now (its profile
hash), `--frozen` takes the lockfile as it is. Then, while the plan is compiled and before
anything is written to the prefix, every locked artifact is looked up on the user's configured
indexes and its sha256 compared with the lockfile's; a mismatch refuses the run and names the
package. Each stage then installs the checked files by URL from a requirements file, with
`--no-deps --require-hashes`, so the installer checks the bytes it downloads too.
"""

from __future__ import annotations

import hashlib
import platform as _platform
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.version import Version

from installer.errors import InputError, Refused, StepFailed
from installer.gpu.model import DriverInfo
from installer.indexes import IndexSettings
from installer.inventory import Dist, installed
from installer.lockfile.io import read_lockfile, write_lockfile
from installer.lockfile.lookup import (
    Artifact,
    Served,
    hashed_dists,
    lookup,
    mismatches,
    stage_index,
)
from installer.lockfile.model import LockedDist, LockedStage, Lockfile, profile_hash
from installer.options import RunOptions, state_dir
from installer.profile.models import Profile, PythonSpec
from installer.redact import redact
from installer.safepath import inside
from installer.source import SourceResult, SourceSpec
from installer.stagespec import StageSpec

__all__ = [
    "LockedInstall",
    "cached_archive",
    "check_source",
    "fetch_checked",
    "fetch_locked_sdist",
    "host_platform",
    "locked_requirements",
    "locked_requirements_path",
    "locked_source_spec",
    "locked_stage_specs",
    "precheck",
    "prepare_locked",
    "record_locked_env",
    "stage_index",
]


@dataclass(frozen=True)
class LockedInstall:
    """The lockfile a run installs, and where it came from."""

    lock: Lockfile
    path: Path
    frozen: bool
    artifacts: Mapping[str, Artifact] = field(default_factory=dict)  # name -> the checked file


def host_platform() -> str:
    """This machine's platform in lockfile terms."""
    machine = _platform.machine()
    return {"x86_64": "linux-64", "aarch64": "linux-aarch64"}.get(machine, f"linux-{machine}")


def prepare_locked(
    profile: Profile, options: RunOptions, driver: DriverInfo | None
) -> tuple[Profile, LockedInstall]:
    """Find and check the lockfile; return the profile narrowed to the lock's Python."""
    from installer.locking import default_lockfile  # noqa: PLC0415
    from installer.variants import choose_variant  # noqa: PLC0415

    variant, _ = choose_variant(profile, driver, options.cuda)
    path = options.lockfile or default_lockfile(profile.name, variant, host_platform())
    if not path.is_file():
        raise InputError(
            f"no lockfile for profile {profile.name!r}, variant {variant} at {path}",
            hint=f"make one with `verl-bootstrap lock --profile {options.profile} --cuda {variant}`"
            ", or pass --lockfile PATH",
        )
    lock = read_lockfile(path)
    _check_matches(lock, path, profile, variant, frozen=options.frozen)
    major, minor = lock.python.split(".")[:2]
    # a range, not "==X.Y.*": conda's match specs refuse "*" after "=="
    python = PythonSpec(requires=f">={major}.{minor},<{major}.{int(minor) + 1}", prefer=lock.python)
    narrowed = profile.model_copy(update={"python": python})
    return narrowed, LockedInstall(lock=lock, path=path, frozen=options.frozen)


def _check_matches(
    lock: Lockfile, path: Path, profile: Profile, variant: str, *, frozen: bool
) -> None:
    if lock.platform != host_platform():
        raise InputError(f"{path} is for {lock.platform}; this machine is {host_platform()}")
    _check_glibc(lock, path)
    if lock.cuda.variant != variant:
        raise InputError(
            f"{path} is for CUDA variant {lock.cuda.variant}, this run chose {variant}",
            hint=f"pass --cuda {lock.cuda.variant}, or lock variant {variant}",
        )
    _check_stage_ids(lock, path, profile, variant)
    if frozen:
        return
    if lock.profile != profile.name or lock.profile_hash != profile_hash(profile, variant):
        raise Refused(
            f"{path} is stale: profile {profile.name!r} changed since it was locked",
            hint=f"run `{lock.regenerate}` (or `verl-bootstrap lock --profile {profile.name}`) "
            "to update it, or pass --frozen to install it as it is",
        )


def _check_stage_ids(lock: Lockfile, path: Path, profile: Profile, variant: str) -> None:
    """Every stage the lockfile names is a step this profile runs: a lockfile can add no stage,
    and its stage ids (which name folders and files in the env) are ones the profile declared."""
    from installer.profile.models import RESERVED_STEP_IDS  # noqa: PLC0415
    from installer.stagespec import stage_specs  # noqa: PLC0415

    known = RESERVED_STEP_IDS | {spec.id for spec in stage_specs(profile, variant)}
    unknown = [stage.id for stage in lock.stages if stage.id not in known]
    if unknown:
        raise InputError(
            f"{path} locks stage(s) {', '.join(unknown)}, which profile {profile.name!r} lacks",
            hint=f"the lockfile was made for another profile; run `verl-bootstrap lock --profile "
            f"{profile.name}`",
        )


def _check_glibc(lock: Lockfile, path: Path) -> None:
    """The lock's wheels need the glibc it was solved for (`__glibc`); older cannot load them."""
    wanted = lock.cuda.virtual_packages.get("__glibc")
    libc, have = _platform.libc_ver()
    if not wanted or libc != "glibc" or not have:
        return
    if Version(have) < Version(wanted):
        raise Refused(
            f"{path} was solved for glibc >= {wanted}; this machine has glibc {have}",
            hint="lock for this machine's glibc (`verl-bootstrap lock --glibc X.Y`)",
        )


def locked_stage_specs(lock: Lockfile) -> tuple[StageSpec, ...]:
    """The plan's stages, as the lockfile recorded them (install-verl is the plan's own step)."""
    return tuple(
        StageSpec(
            id=stage.id,
            kind="packages",
            description=f"{len(stage.distributions)} locked distribution(s), hash-checked",
            packages=(),
            index=stage_index(stage),
            no_build_isolation="--no-build-isolation" in stage.options,
            no_deps=True,
            env=dict(stage.env),
        )
        for stage in lock.stages
        if stage.kind != "install-verl"
    )


def locked_requirements(
    stage: LockedStage,
    artifacts: Mapping[str, Artifact] | None = None,
    built: Mapping[str, Artifact] | None = None,
) -> str:
    """The hashed requirements file a locked stage installs with `--require-hashes --no-deps`.

    With `artifacts` (from `precheck`), each line names the checked file by URL and sha256:
    nothing is looked up again at install time. `built` holds the wheels this run built from
    the stage's locked sdists; those install in place of the sdists.
    """
    artifacts = {**(artifacts or {}), **(built or {})}
    lines = [f"# stage {stage.id}, from the lockfile; installed with --no-deps --require-hashes"]
    for dist in stage.distributions:
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


def locked_requirements_path(prefix: Path, stage_id: str) -> Path:
    """Where a locked stage's hashed requirements file is written before it runs."""
    return state_dir(prefix) / "locked" / f"{stage_id}.txt"


def locked_source_spec(spec: SourceSpec, lock: Lockfile) -> SourceSpec:
    """verl's source at the locked commit (a git lock) or the locked release (an sdist lock)."""
    if lock.verl.kind == "git" and lock.verl.commit:  # a git lock is never served by an sdist
        return replace(spec, ref=lock.verl.commit, sdist_fallback=False)
    return replace(spec, ref=lock.verl.ref)


def fetch_locked_sdist(
    spec: SourceSpec, locked: LockedInstall, *, log_path: Path, cache: Path | None = None
) -> SourceResult | None:
    """verl's locked release sdist, from the tool's cache by sha256, else from the checked URL.

    None when the lock is not an sdist lock or the checkout already exists (fetch-source's own
    logic handles those). The archive is kept under `cache`, so later envs skip the download.
    """
    want = locked.lock.verl
    artifact = locked.artifacts.get("verl")
    if want.kind != "sdist" or not want.sdist_sha256 or spec.checkout.exists():
        return None
    if cache is None:
        from installer.envs.conda import default_cache_root  # noqa: PLC0415

        cache = default_cache_root()
    archive = cached_archive(cache, want.sdist_sha256, want.sdist or "verl.tar.gz")
    if not archive.is_file() and artifact is None:
        return None
    fetch_checked(artifact, archive, want.sdist_sha256)
    from installer import source  # noqa: PLC0415 - its sdist layout is reused as it is

    # the same checkout and mark fetch_source makes, so a resumed run reuses it
    source.unpack_sdist(archive, spec.checkout)
    mark = f"{archive.name} {want.sdist_sha256}\n"
    (spec.checkout / source.SDIST_MARK).write_text(mark)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"unpacked verl's locked sdist {archive} (sha256 {want.sdist_sha256})\n")
    return SourceResult(
        kind="sdist", repo=spec.repo, ref=spec.ref, path=spec.checkout,
        sdist_sha256=want.sdist_sha256, sdist_name=archive.name,
        note="verl's locked release sdist",
    )  # fmt: skip


def cached_archive(cache: Path, sha256: str, filename: str) -> Path:
    """Where the tool's cache keeps a checked archive: by its sha256, so any env can reuse it."""
    # the file name comes from an index's answer, the digest from the lockfile: both untrusted
    return inside(cache / "sdists", sha256, filename, what="sdist file name")


def fetch_checked(artifact: Artifact | None, dest: Path, sha256: str) -> None:
    """`dest` holds the file with `sha256`: kept from an earlier run, else downloaded now."""
    if not dest.is_file():
        if artifact is None:
            raise StepFailed(f"{dest.name} is not cached and the lockfile run found no URL for it")
        _download(artifact, dest)
    if hashlib.sha256(dest.read_bytes()).hexdigest() != sha256:
        dest.unlink()  # the tool's own cache entry: a corrupt one must not be used again
        raise StepFailed(f"{dest} does not have the locked sha256 {sha256}")


def _download(artifact: Artifact, dest: Path) -> None:
    """Fetch one checked file into `dest` (atomically)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(".part")
    if artifact.url.startswith("file://"):
        shutil.copyfile(Path(unquote(urlparse(artifact.url).path)), partial)
    else:
        import requests  # noqa: PLC0415 - only this download needs it

        try:
            answer = requests.get(artifact.url, timeout=60)
            answer.raise_for_status()
        except requests.RequestException as exc:
            why = redact(str(exc))
            raise StepFailed(f"could not download {redact(artifact.url)}: {why}") from None
        partial.write_bytes(answer.content)
    partial.replace(dest)


def check_source(lock: Lockfile, source: SourceResult) -> None:
    """The fetched verl is the locked one: same commit, or an sdist with the locked sha256."""
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


def record_locked_env(prefix: Path, lock: Lockfile, built: Mapping[str, str] | None = None) -> Path:
    """The env's record after a locked install: the lockfile, plus each installed RECORD's digest
    and, for each distribution built here from its locked sdist, the built wheel's sha256.

    `verify --against` compares those digests with the env later, to tell a replaced build.
    """
    from installer.envlock import env_lock_path  # noqa: PLC0415 - envlock imports the plan

    now, built = installed(prefix), built or {}
    stages = tuple(
        stage.model_copy(
            update={
                "distributions": tuple(_with_record(d, now, built) for d in stage.distributions)
            }
        )
        for stage in lock.stages
    )
    return write_lockfile(lock.model_copy(update={"stages": stages}), env_lock_path(prefix))


def _with_record(dist: LockedDist, now: Mapping[str, Dist], built: Mapping[str, str]) -> LockedDist:
    found = now.get(dist.name)
    digest = found.record_sha256 if found is not None else None
    return dist.model_copy(update={"record_sha256": digest, "built_sha256": built.get(dist.name)})


def _cached_lookup(lock: Lockfile, settings: IndexSettings, work: Path) -> Served | None:
    """The lookup from uv's cache alone (fast); None when the cache cannot answer it.

    A match here is as good as one online: the hashes are the lockfile's, and the installer
    checks the downloaded bytes against them. Anything else is asked of the index itself.
    """
    try:
        return lookup(lock, settings, offline=True, work=work)
    except Refused:
        return None


def precheck(locked: LockedInstall, settings: IndexSettings, *, offline: bool) -> LockedInstall:
    """Look every locked artifact up on the configured indexes; refuse on any sha256 mismatch.

    Runs in a scratch folder, before the prefix is touched. Returns `locked` with the URL of the
    artifact each distribution installs from: the first wheel (else the sdist) whose sha256 the
    lockfile allows, so the install resolves nothing and picks no other file.
    """
    dists = hashed_dists(locked.lock)
    with tempfile.TemporaryDirectory(prefix="verl-precheck-") as tmp:
        served = _cached_lookup(locked.lock, settings, Path(tmp) / "cached")
        if served is None or mismatches(dists, served):
            served = lookup(locked.lock, settings, offline=offline, work=Path(tmp) / "online")
    problems = mismatches(dists, served)
    if problems:
        raise Refused(
            f"{locked.path} does not match what your indexes serve ({len(problems)} "
            "distribution(s)); nothing was installed:\n  " + "\n  ".join(problems),
            hint="the lockfile was edited, or your index serves other files under these "
            "versions; regenerate it with `verl-bootstrap lock`, or use an index that mirrors "
            "the one it was made from",
        )
    chosen = {}
    for dist in hashed_dists(locked.lock):
        allowed = [a for a in served.get(dist.name, ()) if a.sha256 in dist.hashes]
        chosen[dist.name] = min(allowed, key=lambda a: (a.kind != "wheel", a.filename))
    return replace(locked, artifacts=chosen)
