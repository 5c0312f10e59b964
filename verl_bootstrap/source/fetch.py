"""verl's source: a git checkout at the pinned ref, or, when git is unreachable, the release sdist.

The checkout is reused when it is already at the wanted commit, and never overwritten when it is
dirty or elsewhere: the user's edits are theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import atomic_copy, atomic_write, cache_folder, file_sha256, not_private
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.credentials import lift
from verl_bootstrap.source.cache import GitFailed, checkout_from_cache, mirror_dir
from verl_bootstrap.source.checkout import reuse_checkout
from verl_bootstrap.source.sdist import unpack_sdist
from verl_bootstrap.source.sourcework import SDIST_MARK
from verl_bootstrap.source.spec import SourceResult, SourceSpec

__all__ = ["fetch_source"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UNREACHABLE = (
    "could not resolve host",
    "failed to connect",
    "connection refused",
    "connection timed out",
    "network is unreachable",
    "unable to access",
    "could not read from remote repository",
)


def fetch_source(
    spec: SourceSpec,
    settings: IndexSettings,
    *,
    pip: list[str],
    log_path: Path,
    offline: bool = False,
) -> SourceResult:
    """Clone (or reuse) the checkout; fall back to the release sdist when git is unreachable.

    The result names the repository with any credentials masked: it goes into state and lockfiles.
    """
    result = _fetch(spec, settings, pip=pip, log_path=log_path, offline=offline)
    return replace(result, repo=redact(result.repo))


def _fetch(
    spec: SourceSpec, settings: IndexSettings, *, pip: list[str], log_path: Path, offline: bool
) -> SourceResult:
    if spec.checkout.exists():
        return _reuse(spec, log_path)
    try:
        return _clone(spec, log_path, offline=offline)
    except _Unreachable as exc:
        if not (spec.sdist_fallback and spec.release):
            raise StepFailed(
                f"cannot reach verl's git repository {redact(spec.repo)}: {exc}",
                hint="pass --verl-source with a reachable mirror or a local clone",
                # no release sdist stands in: a ref that is not a release, or the fallback off
                data={"repo": redact(spec.repo), "ref": spec.ref, "release": spec.release},
            ) from None
        return _from_sdist(spec, settings, pip=pip, log_path=log_path, why=str(exc))


class _Unreachable(Exception):
    """The git URL could not be reached (as opposed to a bad ref or a broken repo)."""


def _clone(spec: SourceSpec, log_path: Path, *, offline: bool) -> SourceResult:
    # a prompt for credentials would hang a batch run; a credential in the URL goes to git in its
    # environment (an Authorization header), never in its argv or the checkout's .git/config
    lifted = lift([spec.repo], os.environ)
    url = lifted.argv[0]
    try:
        got = checkout_from_cache(url, spec.ref, spec.checkout, lifted.env, offline=offline)
    except GitFailed as exc:
        shutil.rmtree(spec.checkout, ignore_errors=True)  # made by this run, never the user's
        _log(log_path, f"git: verl {spec.ref} from {spec.repo} failed: {exc.output}")
        if offline or any(marker in exc.output.lower() for marker in _UNREACHABLE):
            raise _Unreachable(_git_reason(exc.output)) from None
        raise StepFailed(
            f"verl ref {spec.ref!r} not found in {redact(spec.repo)}",
            hint=f"check the tag, branch or commit (git said: {_git_reason(exc.output)})",
        ) from None
    finally:
        lifted.cleanup()
    how = "fetched into the source cache" if got.fetched else "from the source cache, no network"
    _log(log_path, f"checked out {spec.ref} at {got.commit} ({how}; {mirror_dir(url)})")
    return SourceResult(
        kind="git",
        repo=spec.repo,
        ref=spec.ref,
        path=spec.checkout,
        commit=got.commit,
        note=got.note,
    )


def _git_reason(stderr: str) -> str:
    """git's own reason, e.g. "fatal: unable to access …: Could not resolve host: …"."""
    lines = [ln.strip().strip("'").strip() for ln in stderr.splitlines()]
    lines = [ln for ln in lines if ln]
    fatal = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["unreachable"])[-1]


def _reuse(spec: SourceSpec, log_path: Path) -> SourceResult:
    mark = spec.checkout / SDIST_MARK
    if mark.exists():
        name, sha = mark.read_text().split()
        if spec.release is None or name != f"verl-{spec.release}.tar.gz":
            raise InputError(
                f"verl's source in {spec.checkout} is the release sdist {name}, not {spec.ref}",
                hint="build verl at another ref in a new --prefix; an unpacked sdist is never "
                "replaced in place",
            )
        return SourceResult(
            kind="sdist",
            repo=spec.repo,
            ref=spec.ref,
            path=spec.checkout,
            sdist_sha256=sha,
            sdist_name=name,
            note="reused the unpacked sdist",
        )
    return reuse_checkout(spec, log_path)


def _from_sdist(
    spec: SourceSpec, settings: IndexSettings, *, pip: list[str], log_path: Path, why: str
) -> SourceResult:
    version = str(spec.release)
    pointer = _release_pointer(version, settings)
    archive = _cached_release(pointer)
    where = "the source cache (downloaded from the configured index before)"
    if archive is None:
        archive = _download_release(version, settings, pip=pip, log_path=log_path)
        where = "the configured index"
        atomic_write(pointer, f"{archive.parent.name} {archive.name}\n")
    sha = archive.parent.name
    unpack_sdist(archive, spec.checkout, sha)
    note = (
        f"git repository {redact(spec.repo)} unreachable ({why}); using verl {version}'s release "
        f"sdist from {where} (sha256 {sha[:12]}…), recorded in the lockfile"
    )
    _log(log_path, note)
    return SourceResult(
        kind="sdist",
        repo=spec.repo,
        ref=spec.ref,
        path=spec.checkout,
        sdist_sha256=sha,
        sdist_name=archive.name,
        note=note,
    )


def _release_pointer(version: str, settings: IndexSettings) -> Path:
    """Where the cache notes which archive the configured indexes gave for verl `version`."""
    indexes = json.dumps([version, settings.index_url, list(settings.extra_index_urls)])
    return cache_folder("sdists", "releases") / hashlib.sha256(indexes.encode()).hexdigest()[:16]


def _cached_release(pointer: Path) -> Path | None:
    """The cached archive the pointer names, when it is there and still has its sha256, and
    both are plain files of this user's that no one else can write (what a cache holds runs:
    the archive's build)."""
    if not_private(pointer, folder=False):
        return None
    try:
        sha, name = pointer.read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return None
    if not _SHA256.match(sha) or "/" in name or name.startswith("."):
        return None
    archive = cache_folder("sdists", sha) / name
    if not_private(archive, folder=False):
        return None
    return archive if file_sha256(archive) == sha else None


def _download_release(
    version: str, settings: IndexSettings, *, pip: list[str], log_path: Path
) -> Path:
    """verl's release sdist from the index, kept in the cache under its sha256 (where a
    lockfile install keeps its archive), so a later env needs no download."""
    with tempfile.TemporaryDirectory(prefix="verl-sdist-") as tmp:
        # only verl as an sdist: its build dependencies may come as wheels (a wheel-only mirror)
        cmd = [*pip, "download", "--no-deps", "--no-binary", "verl", f"verl=={version}"]
        cmd += ["--dest", tmp, *_pip_index_args(settings)]
        proc.run(cmd, log_path=log_path)
        found = next(Path(tmp).glob("verl-*.tar.gz"), None)
        if found is None:
            raise StepFailed(f"the index has no sdist of verl {version}")
        archive = cache_folder("sdists", file_sha256(found)) / found.name
        atomic_copy(found, archive)  # a new file renamed in: never through a planted link
    return archive


def _pip_index_args(settings: IndexSettings) -> list[str]:
    args: list[str] = []
    if settings.index_url:
        args += ["--index-url", settings.index_url]
    for url in settings.extra_index_urls:
        args += ["--extra-index-url", url]
    return args


def _log(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(redact(line) + "\n")
