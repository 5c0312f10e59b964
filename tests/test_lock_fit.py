"""Which lockfile fits a run (verl_bootstrap.lock.fit): the committed cpu lockfile against
the cpu profile as shipped, and against every way a run can differ from what it locked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from verl_bootstrap.lock.fit import Candidate, Wanted, choose, why_not
from verl_bootstrap.lock.format import LockedSource, Lockfile, profile_hash
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import LOCKFILES_DIR
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.stacks import apply_stack

COMMITTED = LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml"


@pytest.fixture(scope="module")
def lock() -> Lockfile:
    return read_lockfile(COMMITTED)


@pytest.fixture(scope="module")
def wanted() -> Wanted:
    """What a default `--profile cpu` run on a linux-64 host with Python 3.11 asks for."""
    profile = apply_stack(load_profile("cpu"), None)
    return Wanted(
        profile="cpu",
        profile_hash=profile_hash(profile, "cpu"),
        variant="cpu",
        platform="linux-64",
        ref=profile.verl.ref,
        pythons=("3.11",),
        glibc="2.36",
    )


def test_the_committed_cpu_lockfile_fits_the_cpu_profile_as_shipped(
    lock: Lockfile, wanted: Wanted
) -> None:
    assert why_not(lock, wanted) is None
    choice = choose([Candidate(COMMITTED, "committed", lock)], wanted)
    assert choice.chosen is not None and choice.chosen.path == COMMITTED


def test_an_edited_profile_makes_the_lockfile_stale(lock: Lockfile, wanted: Wanted) -> None:
    profile = apply_stack(load_profile("cpu"), None)
    torch, deps = profile.stages
    edited = profile.model_copy(
        update={"stages": (torch.model_copy(update={"packages": ("torch==2.12.0",)}), deps)}
    )
    reason = why_not(lock, replace(wanted, profile_hash=profile_hash(edited, "cpu")))
    assert reason == "is stale: profile cpu changed since it was locked"


def test_another_verl_ref_has_no_lockfile(lock: Lockfile, wanted: Wanted) -> None:
    profile = apply_stack(load_profile("cpu"), "v0.8.0")
    other = replace(wanted, ref="v0.8.0", profile_hash=profile_hash(profile, "cpu"))
    choice = choose([Candidate(COMMITTED, "committed", lock, label="lockfiles/cpu/x")], other)
    assert choice.chosen is None
    assert choice.why_resolving() == (
        "no lockfile for v0.8.0: the committed lockfile lockfiles/cpu/x locks v0.9.1"
    )


def test_another_python_a_platform_a_variant_and_an_older_glibc_do_not_fit(
    lock: Lockfile, wanted: Wanted
) -> None:
    assert why_not(lock, replace(wanted, pythons=("3.12",))) == (
        "locks Python 3.11; this run can use 3.12"
    )
    assert why_not(lock, replace(wanted, pythons=())) == "locks Python 3.11; this run can use none"
    assert why_not(lock, replace(wanted, pythons=None)) is None  # conda brings the Python
    assert "linux-aarch64" in str(why_not(lock, replace(wanted, platform="linux-aarch64")))
    assert "variant cpu" in str(why_not(lock, replace(wanted, variant="cu130")))
    assert why_not(lock, replace(wanted, glibc="2.17")) == (
        "needs glibc >= 2.28; this machine has 2.17"
    )


def test_a_moved_tag_makes_a_git_lock_stale_and_an_sdist_lock_is_its_archive(
    lock: Lockfile, wanted: Wanted
) -> None:
    locked, moved = "a" * 40, "b" * 40
    source = LockedSource(
        repo="https://example.org/verl.git", ref="v0.9.1", kind="git", commit=locked
    )
    git_lock = lock.model_copy(update={"verl": source})
    assert why_not(git_lock, replace(wanted, ref_commit=locked)) is None
    assert why_not(git_lock, replace(wanted, ref_commit=None)) is None  # offline: not known
    reason = str(why_not(git_lock, replace(wanted, ref_commit=moved)))
    assert reason.startswith("is stale: v0.9.1 now names commit bbbbbbbbbbbb, it locks aaaa")
    assert why_not(lock, replace(wanted, ref_commit=moved)) is None  # the sdist, by its sha256


def test_a_source_the_user_names_is_not_the_locked_release_sdist(
    lock: Lockfile, wanted: Wanted
) -> None:
    reason = why_not(lock, replace(wanted, own_source="file:///src/verl"))
    assert reason == "pins verl's release sdist; --verl-source asks for file:///src/verl"


def test_the_labs_lockfile_wins_and_a_stale_one_is_passed_over_saying_why(
    lock: Lockfile, wanted: Wanted
) -> None:
    lab = Candidate(Path("/lab/cpu/cpu-linux-64.lock.yaml"), "lab", lock)
    committed = Candidate(COMMITTED, "committed", lock)
    assert choose([lab, committed], wanted).chosen == lab
    stale = Candidate(lab.path, "lab", lock.model_copy(update={"profile_hash": "sha256:old"}))
    choice = choose([stale, committed], wanted)
    assert choice.chosen == committed
    ((passed, why),) = choice.passed_over
    assert passed == stale and why.endswith("is stale: profile cpu changed since it was locked")


def test_with_no_lockfile_or_an_option_no_lockfile_serves_the_run_resolves(
    lock: Lockfile, wanted: Wanted
) -> None:
    missing = Candidate(Path("/lab/cpu.lock.yaml"), "lab", None, "no lab lockfile at /lab/x")
    present = Candidate(COMMITTED, "committed", lock.model_copy(update={"python": "3.12"}))
    choice = choose([missing, present], wanted)
    assert choice.chosen is None
    assert "locks Python 3.12" in choice.why_resolving()  # the lockfile there says more
    blocked = choose([present], replace(wanted, blocker="--with-tests adds stages"))
    assert blocked.why_resolving() == "--with-tests adds stages"
    assert choose([], wanted).why_resolving() == "no lockfile for this profile"
