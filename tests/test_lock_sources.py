"""`lock` locks the commit a ref names now: a tag moved in verl's repository after an earlier lock
is locked at its new commit, not the one the earlier lock cached."""

from __future__ import annotations

from pathlib import Path

import pytest
from scaffold import invoke
from tinyenv import HOST_XY, tiny_parts
from verlrepo import git

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.lock.io import read_lockfile


def lock(profile: Path, repo: Path, output: Path) -> str:
    """Lock the tiny profile with verl from `repo`; the commit the lock records."""
    done = invoke(
        [
            "lock",
            "--profile",
            str(profile),
            "--cuda",
            "cpu",
            "--python-version",
            HOST_XY,
            "--verl-source",
            str(repo),
            "--output",
            str(output),
        ]
    )
    assert done.code == EXIT_OK, done.err
    return read_lockfile(output).verl.commit or ""


def test_a_moved_tag_is_locked_at_its_new_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = tiny_parts(tmp_path, monkeypatch)
    repo, profile = parts.repo, parts.profile
    first = lock(profile, repo, tmp_path / "first.lock.yaml")
    assert first == git(repo, "rev-parse", "v0.9.1")

    (repo / "verl" / "fix.py").write_text("FIXED = True\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a fix, released under the same tag")
    git(repo, "tag", "-f", "v0.9.1")
    moved = git(repo, "rev-parse", "v0.9.1")
    assert moved != first
    assert lock(profile, repo, tmp_path / "second.lock.yaml") == moved
    assert lock(profile, repo, tmp_path / "third.lock.yaml") == moved  # and stays there
