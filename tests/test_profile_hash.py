"""One profile hash, one meaning: what `profiles show` prints for a variant is the `profile_hash`
its committed lockfile carries, and an env installed from that lockfile records (and its own
lockfile carries) that same hash, though the lockfile narrows the profile's Python range.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scaffold import run

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.lock.drift import committed_lockfiles
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import LOCKFILES_DIR
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.state.envrecord import record_of

LOCKS = committed_lockfiles(LOCKFILES_DIR)


@pytest.mark.parametrize("path", LOCKS, ids=[f"{p.parent.name}/{p.name}" for p in LOCKS])
def test_profiles_show_prints_the_hash_each_committed_lockfile_carries(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = read_lockfile(path)
    code, out, _ = run(["profiles", "show", lock.profile, "--json"], capsys)
    assert code == EXIT_OK
    assert json.loads(out)["profile_hashes"][lock.cuda.variant] == lock.profile_hash
    code, out, _ = run(["profiles", "show", lock.profile], capsys)
    assert f"{lock.cuda.variant} {lock.profile_hash}" in out.splitlines()[1]


@pytest.mark.parametrize(("profile", "variant"), [("cpu", "cpu"), ("fsdp", "cu128")])
def test_an_env_from_a_lockfile_records_the_lockfiles_profile_hash(
    profile: str, variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    options = RunOptions(profile=profile, prefix=tmp_path / "env", cuda=variant)
    plan = prepare_plan(options, detect=False, check_optional=False)
    assert plan.locked is not None, plan.route  # the committed lockfile's route
    narrowed = plan.profile.python.requires
    assert narrowed.startswith(">=3."), narrowed  # the lockfile's Python X.Y, not the profile's
    assert plan.profile_hash == plan.locked.lock.profile_hash
    assert record_of(plan)["profile_hash"] == plan.locked.lock.profile_hash  # what `info` shows
