"""verl's source through the per-user git mirror (verl_bootstrap.run.steps.sourcecache), with real
git: the first env fetches, later envs at that commit take it from the cache with no network,
a moved tag is fetched anew, and offline (or unreachable) the cached commit serves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.source.cache import mirror_dir
from verl_bootstrap.source.fetch import fetch_source
from verl_bootstrap.source.spec import SourceResult, SourceSpec


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real repo with tag v1, and a cache of this test's own."""
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "setup.py").write_text("print('verl')\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "one")
    git(repo, "tag", "v1")
    return repo


def fetch(repo: Path, env: Path, *, offline: bool = False, ref: str = "v1") -> SourceResult:
    spec = SourceSpec(
        repo=repo.as_uri(), ref=ref, checkout=env / "src" / "verl", sdist_fallback=False
    )
    log = env / "fetch.log"
    env.mkdir(parents=True, exist_ok=True)
    return fetch_source(spec, IndexSettings(), pip=[], log_path=log, offline=offline)


def test_a_second_env_at_the_same_commit_comes_from_the_cache(
    upstream: Path, tmp_path: Path
) -> None:
    first = fetch(upstream, tmp_path / "one")
    assert "fetched into the source cache" in (tmp_path / "one" / "fetch.log").read_text()
    second = fetch(upstream, tmp_path / "two")
    assert second.commit == first.commit == git(upstream, "rev-parse", "v1")
    assert "no network" in (tmp_path / "two" / "fetch.log").read_text()
    checkout = tmp_path / "two" / "src" / "verl"
    assert git(checkout, "rev-parse", "HEAD") == first.commit
    assert git(checkout, "remote", "get-url", "origin") == upstream.as_uri()  # the real URL
    assert git(checkout, "rev-parse", "v1^{commit}") == first.commit  # the ref by name
    assert git(checkout, "status", "--porcelain") == ""
    assert (checkout / "setup.py").read_text() == "print('verl')\n"
    assert git(checkout, "fsck", "--no-progress") == ""  # every object there, no alternates
    assert mirror_dir(upstream.as_uri()).is_dir()


def test_offline_or_unreachable_the_cached_commit_serves_and_says_so(
    upstream: Path, tmp_path: Path
) -> None:
    first = fetch(upstream, tmp_path / "one")
    offline = fetch(upstream, tmp_path / "two", offline=True)
    assert offline.commit == first.commit and offline.note.startswith("offline:")
    upstream.rename(tmp_path / "gone")  # the repository can no longer be reached
    unreachable = fetch(upstream, tmp_path / "three")
    assert unreachable.commit == first.commit and "unreachable" in unreachable.note


def test_a_moved_tag_is_fetched_anew_not_served_from_the_cache(
    upstream: Path, tmp_path: Path
) -> None:
    first = fetch(upstream, tmp_path / "one")
    (upstream / "setup.py").write_text("print('verl 2')\n")
    git(upstream, "commit", "-qam", "two")
    git(upstream, "tag", "-f", "v1")
    moved = fetch(upstream, tmp_path / "two")
    assert moved.commit == git(upstream, "rev-parse", "HEAD") != first.commit
    assert (tmp_path / "two" / "src" / "verl" / "setup.py").read_text() == "print('verl 2')\n"


def test_a_commit_ref_and_an_unknown_ref(upstream: Path, tmp_path: Path) -> None:
    commit = git(upstream, "rev-parse", "HEAD")
    assert fetch(upstream, tmp_path / "one", ref=commit).commit == commit
    with pytest.raises(StepFailed, match="nope"):
        fetch(upstream, tmp_path / "two", ref="nope")
    assert not (tmp_path / "two" / "src" / "verl").exists()  # nothing half-made is left
