"""Protected packages: a later stage may not change what an earlier stage installed and protected.

The run test installs for real (uv, a venv, six from the index); the unit tests feed
check_protected the same Dist records the inventory reads from an env.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_STEP_FAILED, StepFailed
from verl_bootstrap.installer.envs.inventory import Dist, installed
from verl_bootstrap.run.steps.protect import check_protected, protected_pins, refused_by_pins

DATA = Path(__file__).parent / "data" / "profiles"


def dist(name: str, version: str, record: str | None = "r1") -> Dist:
    return Dist(name=name, version=version, record_sha256=record)


# --- the check itself --------------------------------------------------------------------------


def test_a_protected_package_is_recorded_by_the_first_stage_that_installs_it() -> None:
    now = {"torch": dist("torch", "2.13.0+cpu"), "six": dist("six", "1.17.0")}
    recorded = check_protected({}, now, stage="torch", names=["torch", "nvidia-cudnn-cu12"])
    assert recorded == {"torch": {"version": "2.13.0+cpu", "record": "r1", "stage": "torch"}}


def test_a_later_stage_that_keeps_it_passes_and_the_record_is_not_mutated() -> None:
    before = {"torch": {"version": "2.13.0+cpu", "record": "r1", "stage": "torch"}}
    snapshot = json.loads(json.dumps(before))
    after = check_protected(
        before, {"torch": dist("torch", "2.13.0+cpu")}, stage="deps", names=["torch"]
    )
    assert after == before
    assert after is not before
    assert before == snapshot


def test_a_later_stage_that_changes_the_version_fails_naming_stage_package_and_versions() -> None:
    before = {"torch": {"version": "2.13.0+cpu", "record": "r1", "stage": "torch"}}
    with pytest.raises(StepFailed) as raised:
        check_protected(
            before, {"torch": dist("torch", "2.12.0")}, stage="trainer", names=["torch"]
        )
    assert raised.value.message == (
        "stage 'trainer' changed protected package torch 2.13.0+cpu "
        "(installed by stage 'torch') to 2.12.0"
    )
    assert "pin the package in this stage to the protected version" in (raised.value.hint or "")


def test_a_later_stage_that_removes_it_fails() -> None:
    before = {"torch": {"version": "2.13.0+cpu", "record": "r1", "stage": "torch"}}
    with pytest.raises(StepFailed) as raised:
        check_protected(before, {}, stage="cleanup", names=["torch"])
    assert "stage 'cleanup' removed protected package torch 2.13.0+cpu" in raised.value.message


def test_a_rebuild_of_the_same_version_is_caught_by_its_record_digest() -> None:
    before = {"torch": {"version": "2.13.0", "record": "r1", "stage": "torch"}}
    with pytest.raises(StepFailed) as raised:
        check_protected(
            before, {"torch": dist("torch", "2.13.0", record="r2")}, stage="fa", names=["torch"]
        )
    assert "replaced protected package torch 2.13.0" in raised.value.message
    assert "with another build" in raised.value.message


def test_names_are_compared_in_their_canonical_form() -> None:
    now = {"nvidia-cudnn-cu12": dist("nvidia-cudnn-cu12", "9.10.2.21")}
    recorded = check_protected({}, now, stage="engine", names=["NVIDIA_cuDNN.cu12"])
    assert recorded["nvidia-cudnn-cu12"]["version"] == "9.10.2.21"
    with pytest.raises(StepFailed, match=re.escape("nvidia-cudnn-cu12 9.10.2.21")):
        check_protected(
            recorded,
            {"nvidia-cudnn-cu12": dist("nvidia-cudnn-cu12", "9.1.0")},
            stage="later",
            names=["nvidia_cudnn_cu12"],
        )


def test_the_stage_that_installed_it_may_change_it_when_it_runs_again() -> None:
    # A re-run after the profile changed the pin: the owning stage re-records it; later stages
    # (which re-run too, their fingerprints chain) are then checked against the new version.
    before = {"torch": {"version": "2.13.0", "record": "r1", "stage": "torch"}}
    after = check_protected(
        before, {"torch": dist("torch", "2.12.0", "r9")}, stage="torch", names=["torch"]
    )
    assert after == {"torch": {"version": "2.12.0", "record": "r9", "stage": "torch"}}
    with pytest.raises(StepFailed, match=re.escape("to 2.13.0")):
        check_protected(
            after, {"torch": dist("torch", "2.13.0", "r1")}, stage="deps", names=["torch"]
        )


# --- for real ----------------------------------------------------------------------------------


@pytest.mark.real_slow  # two real installs (uv, pip): 36 s
@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_stage_that_would_change_a_protected_package_is_refused_and_changes_nothing(
    installer: str, tmp_path: Path, verl_repo_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = Path(shutil.copytree(DATA / "protected-six", tmp_path / "protected-six"))
    prefix = tmp_path / "env"
    argv = [
        "--profile",
        str(folder / "profile.yaml"),
        "--prefix",
        str(prefix),
        "--verl-source",
        str(verl_repo_session),
        "--installer",
        installer,
        "--json",
    ]
    assert cli.main(argv) == EXIT_STEP_FAILED
    captured = capsys.readouterr()
    body = json.loads(captured.out)
    steps = {s["id"]: s for s in body["steps"]}
    assert steps["first"]["status"] == "done"
    assert steps["second"]["status"] == "failed"
    assert steps["second"]["reason"] == (
        "stage 'second' needs another version of protected package six 1.16.0 (installed by "
        "stage 'first'); the resolver refused it, so nothing in the env was changed"
    )
    assert steps["record-lock"]["status"] == "aborted"
    assert steps["verify"]["status"] == "aborted"
    assert body["ok"] is False
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text(encoding="utf-8"))
    assert state["protected"]["six"] == {
        **state["protected"]["six"],
        "version": "1.16.0",
        "stage": "first",
    }
    assert installed(prefix)["six"].version == "1.16.0"  # the protected version is still there
    pins = prefix / ".verl-bootstrap" / "protected" / "second.txt"
    assert pins.read_text(encoding="utf-8") == "six==1.16.0\n"


def test_the_stage_that_owns_a_protected_package_is_not_constrained_by_it() -> None:
    recorded = {"torch": {"version": "2.13.0+cpu", "record": "r1", "stage": "torch"}}
    assert protected_pins(recorded, stage="torch") == []
    assert protected_pins(recorded, stage="verl-deps") == ["torch==2.13.0+cpu"]
    # a failure that does not name a pin is not blamed on it
    assert refused_by_pins(recorded, ["error: network unreachable"], stage="verl-deps") is None
