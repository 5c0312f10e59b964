"""Faults lose nothing: a full disk, a read-only prefix, a corrupt or foreign state file, a stale or
hostile lock. Each ends with a clear error, the env's state as it was, and a re-run that completes.

The plan is the real cpu plan and the runner, state and lock are the real ones; what each step
does is chosen here (it writes into the prefix), so the faults can be placed exactly. A full disk
is a real 1 MiB tmpfs and a read-only prefix a real read-only bind mount (both need root, as in
CI's container; elsewhere those two tests say why they cannot run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakesteps import Ran

from verl_bootstrap.errors import CannotWrite, InputError
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.plan.stepcontract import StepOutputs
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.runner import Status, run_plan
from verl_bootstrap.run.state.guard import guarding
from verl_bootstrap.run.state.state import State
from verl_bootstrap.run.steps.stepcontext import StepContext


def make_plan(prefix: Path) -> Plan:
    options = RunOptions(profile="cpu", prefix=prefix)
    return prepare_plan(options, driver=None, detect=False, check_optional=False)


def quiet_step(ctx: StepContext) -> StepOutputs:
    return Ran(ran=ctx.step.id)


def filling_step(ctx: StepContext) -> StepOutputs:
    """The torch stage writes more than the filesystem holds, as a big wheel would."""
    if ctx.step.id == "torch":
        with (ctx.plan.prefix / "torch.bin").open("wb") as fh:
            fh.write(b"\0" * (4 << 20))
    return Ran(ran=ctx.step.id)


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    """A folder where the test may mount a filesystem (unmounted afterwards)."""
    where = tmp_path / "mnt"
    where.mkdir()
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def mounted(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"cannot mount here ({done.stderr.strip()}): these tests run as root, as CI")


def state_of(prefix: Path) -> dict[str, str]:
    raw = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text())
    return {step: record["status"] for step, record in raw["steps"].items()}


def test_a_full_disk_during_a_stage_fails_it_clearly_and_a_rerun_resumes(mount: Path) -> None:
    mounted(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)])
    plan = make_plan(mount / "env")
    report = run_plan(plan, executor=filling_step)
    failed = report.failed()
    assert failed is not None and failed.id == "torch"
    assert failed.reason.startswith("No space left on device")
    assert failed.hint and "resumes" in failed.hint
    assert {o.id: o.status for o in report.outcomes}["verl-deps"] is Status.ABORTED
    before = state_of(plan.prefix)
    assert before["create-env"] == "done" and before["torch"] in ("failed", "running")
    (plan.prefix / "torch.bin").unlink()  # the user frees space
    again = run_plan(plan, executor=quiet_step)
    assert again.ok
    statuses = {o.id: o.status for o in again.outcomes}
    assert statuses["create-env"] is Status.SKIPPED and statuses["torch"] is Status.DONE


def test_a_full_disk_when_the_state_is_saved_keeps_the_old_state(mount: Path) -> None:
    mounted(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)])
    plan = make_plan(mount / "env")
    assert run_plan(plan, executor=quiet_step).ok
    state = plan.prefix / ".verl-bootstrap" / "state.json"
    kept = state.read_bytes()
    filler = mount / "filler"
    with filler.open("wb") as fh, pytest.raises(OSError):
        fh.write(b"\0" * (2 << 20))
    with pytest.raises(CannotWrite, match="No space left on device") as caught:
        run_plan(plan, executor=quiet_step, force=frozenset({"torch"}))
    assert caught.value.hint and "free space" in caught.value.hint
    assert state.read_bytes() == kept  # never half-written
    filler.unlink()
    assert run_plan(plan, executor=quiet_step, force=frozenset({"torch"})).ok


def test_a_read_only_prefix_is_refused_before_anything_runs(tmp_path: Path, mount: Path) -> None:
    prefix = tmp_path / "env"
    plan = make_plan(prefix)
    assert run_plan(plan, executor=quiet_step).ok
    mounted(["mount", "--bind", "-o", "ro", str(prefix), str(prefix)])
    try:
        lock = prefix / ".verl-bootstrap" / "lock"
        with pytest.raises(InputError, match="Read-only file system"), guarding(lock):
            pass
        with pytest.raises(CannotWrite, match="Read-only file system") as caught:
            run_plan(plan, executor=quiet_step, force=frozenset({"torch"}))
        assert caught.value.hint and "mounted read-only" in caught.value.hint
    finally:
        subprocess.run(["umount", str(prefix)], check=False)
    assert run_plan(plan, executor=quiet_step, force=frozenset({"torch"})).ok


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x00\x01garbage", "binary file"),
        (b'{"version": 1, "steps": ', "unreadable state"),
        (b"[1, 2, 3]", "not a verl-bootstrap state file"),
        (b'{"version": 7}', "state version 7 is not supported"),
        (b'{"version": 1, "steps": {"torch": {"status": "done"}}}', "invalid state"),
        (
            b'{"version": 1, "steps": {"../../x": {"status": "done", "fingerprint": "f", '
            b'"started": 1}}}',
            "not a valid step id",
        ),
        (b'{"version": 1, "version": 1}', "duplicate key"),
    ],
)
def test_a_corrupt_or_foreign_state_file_is_a_clear_error(
    tmp_path: Path, body: bytes, message: str
) -> None:
    plan = make_plan(tmp_path / "env")
    state = plan.prefix / ".verl-bootstrap" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_bytes(body)
    with pytest.raises(InputError, match=message) as caught:
        run_plan(plan, executor=quiet_step)
    assert caught.value.hint and "delete that file" in caught.value.hint
    assert state.read_bytes() == body  # the tool does not guess: the user decides
    state.unlink()
    assert run_plan(plan, executor=quiet_step).ok


def test_a_symlinked_state_or_lock_file_is_not_followed(tmp_path: Path) -> None:
    mine = tmp_path / "precious.txt"
    mine.write_text("the user's file\n")
    folder = tmp_path / "env" / ".verl-bootstrap"
    folder.mkdir(parents=True)
    (folder / "lock").symlink_to(mine)
    with pytest.raises(InputError, match="is a symlink"), guarding(folder / "lock"):
        pass
    (folder / "state.json").symlink_to(mine)
    with pytest.raises(InputError, match="is a symlink"):
        State.load(folder / "state.json")
    assert mine.read_text() == "the user's file\n"


def test_a_stale_lock_from_a_dead_run_is_taken_over(tmp_path: Path) -> None:
    """flock dies with its holder, so a lock file left by a killed run blocks nothing."""
    lock = tmp_path / "env" / ".verl-bootstrap" / "lock"
    lock.parent.mkdir(parents=True)
    dead = subprocess.run(["true"], check=True)  # a pid that no longer runs
    lock.write_text(json.dumps({"pid": 999999, "host": "gone", "since": 0}) + str(dead))
    with guarding(lock):
        holder = json.loads(lock.read_text())
        assert holder["pid"] == os.getpid()


KILLED_RUN = """
import sys, time
from pathlib import Path
from verl_bootstrap.options import RunOptions
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.plan.stepcontract import NoOutputs
from verl_bootstrap.run.runner import run_plan

def step(ctx):
    if ctx.step.id == "torch":
        time.sleep(600)  # SIGKILL arrives here
    return NoOutputs()

plan = prepare_plan(RunOptions(profile="cpu", prefix=Path(sys.argv[1])), driver=None,
                    detect=False, check_optional=False)
run_plan(plan, executor=step)
"""


def test_sigkill_in_a_step_leaves_a_state_that_a_rerun_resumes(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    child = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(prefix)])
    state = prefix / ".verl-bootstrap" / "state.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if state.is_file() and state_of(prefix).get("torch") == "running":
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert state_of(prefix)["torch"] == "running"  # as the killed run left it, still valid JSON
    again = run_plan(make_plan(prefix), executor=quiet_step)
    statuses = {o.id: o.status for o in again.outcomes}
    assert again.ok and statuses["create-env"] is Status.SKIPPED
    assert statuses["torch"] is Status.DONE
