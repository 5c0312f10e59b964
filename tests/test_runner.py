"""The runner's graph mechanics with a fake executor: parallelism, failure, resume, force.

The plan is the real cpu plan; only the executor (what each step does) is a stand-in, so these
tests take a second. The install for real is in test_e2e_cpu.py.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakesteps import Ran

from verl_bootstrap import proc
from verl_bootstrap.errors import Interrupted, StepFailed
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.plan.stepcontract import StepOutputs
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.runner import RunReport, Status, run_plan
from verl_bootstrap.run.state.state import State
from verl_bootstrap.run.steps.stepcontext import StepContext

STEPS = [
    "create-env",
    "fetch-source",
    "install-verl",
    "torch",
    "verl-deps",
    "record-lock",
    "verify",
]


@pytest.fixture
def plan(tmp_path: Path) -> Plan:
    # --resolve: the plan of the profile's own stages (not its committed lockfile's)
    options = RunOptions(profile="cpu", prefix=tmp_path / "env", resolve=True)
    return prepare_plan(options, driver=None, detect=False, check_optional=False)


class Recorder:
    """A fake executor that logs starts and ends, and runs per-step behaviours."""

    def __init__(self, **behaviour: Callable[[StepContext], StepOutputs]) -> None:
        self.behaviour = {k.replace("_", "-"): v for k, v in behaviour.items()}
        self.events: list[tuple[str, str]] = []
        self.contexts: dict[str, StepContext] = {}
        self.lock = threading.Lock()

    def __call__(self, ctx: StepContext) -> StepOutputs:
        with self.lock:
            self.events.append(("start", ctx.step.id))
            self.contexts[ctx.step.id] = ctx
        try:
            action = self.behaviour.get(ctx.step.id)
            return action(ctx) if action else Ran(ran=ctx.step.id)
        finally:
            with self.lock:
                self.events.append(("end", ctx.step.id))

    @property
    def ran(self) -> list[str]:
        return [step for what, step in self.events if what == "start"]

    def at(self, what: str, step: str) -> int:
        return self.events.index((what, step))


def statuses(report: RunReport) -> dict[str, str]:
    return {o.id: o.status.value for o in report.outcomes}


def state_of(plan: Plan) -> dict[str, Any]:
    path = plan.prefix / ".verl-bootstrap" / "state.json"
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def fail(message: str) -> Callable[[StepContext], StepOutputs]:
    def action(ctx: StepContext) -> StepOutputs:
        raise StepFailed(message, hint="a hint for the user")

    return action


def test_create_env_and_fetch_source_run_at_the_same_time(plan: Plan) -> None:
    # Each waits for the other inside its step: run one after the other, the barrier breaks.
    barrier = threading.Barrier(2, timeout=30)

    def meet(ctx: StepContext) -> StepOutputs:
        barrier.wait()
        return Ran()

    executor = Recorder(create_env=meet, fetch_source=meet)
    report = run_plan(plan, executor=executor)
    assert report.ok, statuses(report)
    first_end = min(executor.at("end", "create-env"), executor.at("end", "fetch-source"))
    assert executor.at("start", "create-env") < first_end
    assert executor.at("start", "fetch-source") < first_end


def test_install_verl_waits_for_both_and_the_rest_run_in_plan_order(plan: Plan) -> None:
    executor = Recorder()
    report = run_plan(plan, executor=executor)
    assert statuses(report) == dict.fromkeys(STEPS, "done")
    start = executor.at("start", "install-verl")
    assert executor.at("end", "create-env") < start
    assert executor.at("end", "fetch-source") < start
    serial = STEPS[2:]
    assert executor.ran[2:] == serial
    for before, after in itertools.pairwise(serial):
        assert executor.at("end", before) < executor.at("start", after)
    assert [o.id for o in report.outcomes] == STEPS
    assert report.log_dir.is_dir()


def test_each_step_gets_the_outputs_of_the_steps_before_it(plan: Plan) -> None:
    executor = Recorder(fetch_source=lambda ctx: Ran(commit="abc123"))
    run_plan(plan, executor=executor)
    prior = executor.contexts["record-lock"].prior
    assert prior["fetch-source"] == {"commit": "abc123"}
    assert prior["verl-deps"] == {"ran": "verl-deps"}
    assert executor.contexts["verify"].log_path.name == "verify.log"


def test_a_failing_step_aborts_its_dependents_and_is_recorded(plan: Plan) -> None:
    executor = Recorder(torch=fail("torch would not install"))
    report = run_plan(plan, executor=executor)
    assert not report.ok
    assert statuses(report) == {
        "create-env": "done",
        "fetch-source": "done",
        "install-verl": "done",
        "torch": "failed",
        "verl-deps": "aborted",
        "record-lock": "aborted",
        "verify": "aborted",
    }
    failed = report.failed()
    assert failed is not None
    assert failed.id == "torch"
    assert failed.reason == "torch would not install"
    assert failed.hint == "a hint for the user"
    assert "verl-deps" not in executor.ran
    recorded = {k: v["status"] for k, v in state_of(plan)["steps"].items()}
    assert recorded == {
        "create-env": "done",
        "fetch-source": "done",
        "install-verl": "done",
        "torch": "failed",
    }


def test_a_failure_in_one_branch_lets_the_other_branch_finish(plan: Plan) -> None:
    executor = Recorder(fetch_source=fail("git is unreachable"))
    report = run_plan(plan, executor=executor)
    assert statuses(report)["create-env"] == "done"
    assert statuses(report)["fetch-source"] == "failed"
    assert {statuses(report)[s] for s in STEPS[2:]} == {"aborted"}


def test_a_rerun_resumes_at_the_failed_step_with_the_earlier_outputs(plan: Plan) -> None:
    run_plan(plan, executor=Recorder(fetch_source=lambda ctx: Ran(commit="abc"), torch=fail("x")))
    again = Recorder()
    report = run_plan(plan, executor=again)
    assert report.ok
    assert again.ran == ["torch", "verl-deps", "record-lock", "verify"]
    assert statuses(report) == {
        "create-env": "skipped",
        "fetch-source": "skipped",
        "install-verl": "skipped",
        "torch": "done",
        "verl-deps": "done",
        "record-lock": "done",
        "verify": "done",
    }
    assert {o.reason for o in report.outcomes if o.status is Status.SKIPPED} == {"up to date"}
    # outputs of skipped steps come back from the state file
    assert again.contexts["record-lock"].prior["fetch-source"] == {"commit": "abc"}
    assert report.outputs["fetch-source"] == {"commit": "abc"}


def test_a_finished_plan_skips_everything_on_a_rerun(plan: Plan) -> None:
    run_plan(plan, executor=Recorder())
    again = Recorder()
    report = run_plan(plan, executor=again)
    assert again.ran == []
    assert statuses(report) == dict.fromkeys(STEPS, "skipped")


def test_force_reruns_the_forced_step_and_what_depends_on_it(plan: Plan) -> None:
    run_plan(plan, executor=Recorder())
    again = Recorder()
    report = run_plan(plan, executor=again, force=frozenset({"verl-deps"}))
    # the env's record and its verification follow the stage that ran again
    assert again.ran == ["verl-deps", "record-lock", "verify"]
    assert statuses(report)["verl-deps"] == "done"
    assert statuses(report)["torch"] == "skipped"
    assert statuses(report)["verify"] == "done"


def test_forcing_the_last_step_runs_it_alone(plan: Plan) -> None:
    run_plan(plan, executor=Recorder())
    again = Recorder()
    run_plan(plan, executor=again, force=frozenset({"verify"}))
    assert again.ran == ["verify"]


def test_a_changed_fingerprint_reruns_that_step_and_every_later_one(
    plan: Plan, tmp_path: Path
) -> None:
    run_plan(plan, executor=Recorder())
    profile = tmp_path / "other-torch.yaml"
    profile.write_text(
        "schema_version: 1\n"
        "extends: cpu\n"
        "stages:\n"
        "  - {id: torch, packages: ['torch==2.12.0'], index: pytorch-cpu}\n"
        "  - {id: verl-deps, kind: verl-deps, packages: [cachetools, uvicorn, fastapi]}\n"
    )
    options = RunOptions(profile=str(profile), prefix=plan.prefix, resolve=True)
    changed = prepare_plan(options, driver=None, detect=False, check_optional=False)
    again = Recorder()
    run_plan(changed, executor=again)
    assert again.ran == ["torch", "verl-deps", "record-lock", "verify"]


def test_an_unexpected_exception_is_an_internal_error_with_its_traceback_in_the_log(
    plan: Plan,
) -> None:
    def broken(ctx: StepContext) -> StepOutputs:
        raise KeyError("no-such-key")

    report = run_plan(plan, executor=Recorder(install_verl=broken))
    failed = report.failed()
    assert failed is not None
    assert failed.id == "install-verl"
    assert failed.reason.startswith("internal error: KeyError('no-such-key')")
    assert failed.log is not None
    assert "Traceback" in Path(failed.log).read_text(encoding="utf-8")


def test_the_state_records_each_step_with_its_fingerprint_and_log(plan: Plan) -> None:
    run_plan(plan, executor=Recorder(fetch_source=lambda ctx: Ran(commit="abc")))
    state = State.load(plan.prefix / ".verl-bootstrap" / "state.json")
    fingerprints = plan.fingerprints()
    for step_id in STEPS:
        record = state.steps[step_id]
        assert record.status == "done"
        assert record.fingerprint == fingerprints[step_id]
        assert record.finished is not None
        assert record.finished >= record.started
        assert record.log is not None
        assert record.log.endswith(f"{step_id}.log")
    assert state.outputs("fetch-source") == {"commit": "abc"}


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt), whatever the test runner installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupt_stops_the_running_child_at_once_and_marks_the_step_interrupted(
    plan: Plan,
) -> None:
    child: dict[str, int] = {}

    def long_child(ctx: StepContext) -> StepOutputs:
        def on_line(line: str) -> None:
            if line == "started":  # the child runs: Ctrl-C now, as a user would
                threading.Thread(target=_sigint_main).start()

        code = "import time; print('started', flush=True); time.sleep(120)"
        done = proc.run(
            [sys.executable, "-c", code], log_path=ctx.log_path, on_line=on_line, check=False
        )
        child["returncode"] = done.returncode
        return Ran()

    with pytest.raises(Interrupted) as raised:
        run_plan(plan, executor=Recorder(create_env=long_child))
    assert raised.value.hint == f"resume with: verl-bootstrap --prefix {plan.prefix}"
    # the child got SIGTERM from the runner; it was not left to finish its two minutes
    assert child["returncode"] == -signal.SIGTERM
    assert state_of(plan)["steps"]["create-env"]["status"] == "interrupted"


def _sigint_main() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # Linux hands it to the main thread, as Ctrl-C does
