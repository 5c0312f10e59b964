"""A real local verl git repo, made from verl's release sdist on the package index.

The sdist is downloaded once and cached; each test gets a fresh repo in its tmp dir (0.2 s).
The sdist lacks scripts/*.sh: a test that needs verl's install script adds its own and says so.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE = Path(
    os.environ.get("VERL_BOOTSTRAP_TEST_CACHE", Path.home() / ".cache" / "verl-bootstrap-tests")
)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "verl-bootstrap tests",
    "GIT_AUTHOR_EMAIL": "tests@verl-bootstrap.invalid",
    "GIT_COMMITTER_NAME": "verl-bootstrap tests",
    "GIT_COMMITTER_EMAIL": "tests@verl-bootstrap.invalid",
}


@contextmanager
def filling(entry: str) -> Iterator[None]:
    """Held while one test process fills the cache entry `entry`: the test workers (pytest -n)
    share the cache, and a second one waits for the first one's entry instead of reading it
    half-written or writing it again."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f".{entry}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def verl_sdist(version: str = "0.9.1") -> Path:
    """verl's real sdist from the configured index (cached across runs)."""
    target = CACHE / f"verl-{version}.tar.gz"
    with filling(target.name):
        if not target.exists():
            pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary"]
            with tempfile.TemporaryDirectory(dir=CACHE) as partial:
                subprocess.run([*pip, ":all:", f"verl=={version}", "--dest", partial], check=True)
                (Path(partial) / target.name).replace(target)
    return target


def verl_pyproject_dir(version: str = "0.9.1") -> Path:
    """A folder holding verl's real pyproject.toml of `version` (from its sdist, cached)."""
    dest = CACHE / f"verl-{version}-pyproject"
    sdist = verl_sdist(version)
    with filling(dest.name):
        if not (dest / "pyproject.toml").is_file():
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(sdist) as tar:
                member = tar.getmember(f"verl-{version}/pyproject.toml")
                member.name = "pyproject.toml"
                tar.extractall(dest, members=[member], filter="data")
    return dest


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return done.stdout.strip()


def make_verl_repo(dest: Path, version: str = "0.9.1", tag: str | None = None) -> Path:
    """Unpack the sdist into `dest`, commit it, and tag it (default v{version})."""
    dest.mkdir(parents=True)
    with tarfile.open(verl_sdist(version)) as tar:
        for member in tar.getmembers():
            member.name = member.name.split("/", 1)[1] if "/" in member.name else ""
        tar.extractall(dest, members=[m for m in tar.getmembers() if m.name], filter="data")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"verl {version} from its release sdist")
    git(dest, "tag", tag or f"v{version}")
    return dest


def make_two_release_repo(dest: Path, versions: tuple[str, ...] = ("0.9.0", "0.9.1")) -> Path:
    """One repo with a commit per release, each made from that release's real sdist and tagged
    v{version}, oldest first (main ends at the newest)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    for version in versions:
        for entry in dest.iterdir():  # the tree becomes exactly this release's
            if entry.name != ".git":
                _remove(entry)
        _unpack(verl_sdist(version), dest)
        # verl's own repository ignores what its sdist adds and what builds and imports leave
        # (the sdist carries no .gitignore): the clone then shows the user's changes only
        (dest / ".gitignore").write_text(_IGNORED, encoding="utf-8")
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-m", f"verl {version} from its release sdist")
        git(dest, "tag", f"v{version}")
    return dest


_IGNORED = "PKG-INFO\n*.egg-info/\n__pycache__/\nbuild/\n"


def _unpack(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            member.name = member.name.split("/", 1)[1] if "/" in member.name else ""
        tar.extractall(dest, members=[m for m in tar.getmembers() if m.name], filter="data")


def _remove(entry: Path) -> None:
    import shutil  # noqa: PLC0415

    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()
