"""Files a lockfile names, fetched once into the tool's cache and checked against their sha256."""

from __future__ import annotations

from pathlib import Path

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.shapes import inside

__all__ = ["cached_archive", "fetch_checked"]


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
    if file_sha256(dest) != sha256:
        dest.unlink()  # the tool's own cache entry: a corrupt one must not be used again
        raise StepFailed(f"{dest} does not have the locked sha256 {sha256}")


def _download(artifact: Artifact, dest: Path) -> None:
    """Fetch one checked file into `dest` (atomically)."""
    try:
        download(artifact.url, dest)
    except HttpError as exc:
        raise StepFailed(f"could not download {redact(artifact.url)}: {exc.reason}") from None
