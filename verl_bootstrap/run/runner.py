"""The runner: executes a plan in dependency order, independent steps at the same time.

Each step is selected (a dependency failed → aborted; its fingerprint is recorded as done →
skipped), executed, then recorded in the env's state, atomically. A re-run therefore resumes at
the first unfinished step. The loop and the state live in the main thread; steps run in workers.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import os
import re
import shutil
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import (
    BootstrapError,
    CannotWrite,
    CommandFailed,
    Interrupted,
    StepFailed,
)
from verl_bootstrap.events import emit
from verl_bootstrap.machine.host.netfaults import net_fault, without_tool_hints
from verl_bootstrap.paths import cannot_write, logs_dir, state_file
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import StepOutputs
from verl_bootstrap.run.state.hints import resume_command
from verl_bootstrap.run.state.state import State, StepRecord
from verl_bootstrap.run.steps.kinds import execute_step, running_label
from verl_bootstrap.run.steps.stepcontext import Executor, StepContext

__all__ = ["RunReport", "Status", "StepOutcome", "run_plan"]

MAX_PARALLEL = 4
KEEP_RUN_LOGS = 10  # an env keeps the log folders of its last runs, not one per run forever
_RUN_LOG = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9]+")


class Status(str, enum.Enum):
    """How a step ended in this run."""

    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class StepOutcome:
    """One step's result, as data."""

    id: str
    status: Status
    seconds: float
    reason: str = ""
    log: str | None = None
    tail: tuple[str, ...] = ()
    hint: str | None = None


@dataclass(frozen=True)
class RunReport:
    """Every step's outcome, in plan order."""

    outcomes: tuple[StepOutcome, ...]
    log_dir: Path
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every step is done or skipped."""
        return all(o.status in (Status.DONE, Status.SKIPPED) for o in self.outcomes)

    def failed(self) -> StepOutcome | None:
        """The first failed step, if any."""
        return next((o for o in self.outcomes if o.status is Status.FAILED), None)


def run_plan(
    plan: Plan,
    *,
    state: State | None = None,
    executor: Executor = execute_step,
    force: frozenset[str] = frozenset(),
) -> RunReport:
    """Run `plan`, recording each step in the env's `state` (loaded here when not given); the
    caller holds the prefix lock."""
    state = state or State.load(state_file(plan.prefix))
    proc.allow_new_children()
    # pid in the name: two runs in the same second never share a log folder
    log_dir = logs_dir(plan.prefix) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only or full filesystem: say so before any step starts
        raise cannot_write(log_dir, exc) from None
    _prune_logs(log_dir.parent, keep=KEEP_RUN_LOGS)
    loop = _Loop(plan, state, log_dir, executor, force)
    try:
        loop.run()
    except KeyboardInterrupt:
        loop.interrupt()
        raise Interrupted(
            "interrupted; the env's state is saved",
            hint=f"resume with: {resume_command(plan.prefix)}",
        ) from None
    order = {s.id: i for i, s in enumerate(plan.steps)}
    outcomes = tuple(sorted(loop.outcomes.values(), key=lambda o: order[o.id]))
    return RunReport(outcomes=outcomes, log_dir=log_dir, outputs=loop.outputs)


def _prune_logs(folder: Path, *, keep: int) -> None:
    """Keep the newest `keep` run log folders of the env (their names start with the time)."""
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and _RUN_LOG.fullmatch(p.name))
    for old in runs[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


class _Loop:
    """The select → execute → record loop over one plan."""

    def __init__(
        self, plan: Plan, state: State, log_dir: Path, executor: Executor, force: frozenset[str]
    ) -> None:
        self.plan, self.state, self.log_dir = plan, state, log_dir
        self.executor, self.force = executor, force
        self.fingerprints = plan.fingerprints()
        self.outcomes: dict[str, StepOutcome] = {}
        self.outputs: dict[str, dict[str, Any]] = {}
        self.running: dict[Future[StepOutputs], tuple[Step, float, StepContext]] = {}

    def run(self) -> None:
        with ThreadPoolExecutor(max_workers=MAX_PARALLEL, thread_name_prefix="step") as pool:
            self.pool = pool
            try:
                while len(self.outcomes) < len(self.plan.steps):
                    self._start_ready()
                    if not self.running:
                        break
                    finished, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
                    for future in finished:
                        self._finish(future)
            except KeyboardInterrupt:
                # Stop the children now: leaving this block waits for every worker, and a
                # worker waits for its child (which has its own session, so got no SIGINT).
                proc.terminate_all()
                raise

    def _start_ready(self) -> None:
        busy = {step.id for step, _, _ in self.running.values()}
        for step in self.plan.steps:
            if step.id in self.outcomes or step.id in busy:
                continue
            deps = [self.outcomes.get(d) for d in step.deps]
            if any(o is not None and o.status not in (Status.DONE, Status.SKIPPED) for o in deps):
                self._record(StepOutcome(step.id, Status.ABORTED, 0.0, "a dependency failed"))
            elif all(o is not None for o in deps):
                self._select(step)

    def _select(self, step: Step) -> None:
        fingerprint = self.fingerprints[step.id]
        if not self._must_run(step) and self.state.is_done(step.id, fingerprint):
            self.outputs[step.id] = self.state.outputs(step.id)
            self._record(StepOutcome(step.id, Status.SKIPPED, 0.0, "up to date"))
            return
        log = self.log_dir / f"{step.id}.log"
        self.state.steps[step.id] = StepRecord(
            status="running", fingerprint=fingerprint, started=time.time(), log=str(log)
        )
        self.state.save()
        label = running_label(step, self.outputs)
        emit(label, kind=("step", "start"), step=step.id, log=str(log))
        ctx = StepContext(
            plan=self.plan,
            step=step,
            log_path=log,
            prior=dict(self.outputs),
            protected=dict(self.state.protected),
            on_line=functools.partial(_emit_line, step.id),
        )
        # the worker runs in a copy of this thread's context, so that its events (a note, the
        # live tail of its output) reach the listener the CLI installed, not the default log
        job = self.pool.submit(contextvars.copy_context().run, self.executor, ctx)
        self.running[job] = (step, time.monotonic(), ctx)

    def _must_run(self, step: Step) -> bool:
        """Forced, or a dependency ran again in this run (forced, repaired or resumed): what a
        step left behind (the env's record, its verification) is stale once what it read moved."""
        if step.id in self.force:
            return True
        return any(self.outcomes[d].status is Status.DONE for d in step.deps)

    def _finish(self, future: Future[StepOutputs]) -> None:
        step, started, ctx = self.running.pop(future)
        seconds = time.monotonic() - started
        record = self.state.steps[step.id]
        record.finished = time.time()
        try:
            outputs = future.result().to_json()
        except Exception as exc:
            record.status = "failed"
            # the step's failure is the news: when the disk that failed it cannot take the state
            # either, the saved state still says "running", which a re-run also resumes from
            with contextlib.suppress(CannotWrite):
                self.state.save()
            self._record(_failure(step, _as_error(exc, ctx.log_path), seconds, record.log))
            return
        record.status, record.outputs = "done", outputs
        self.state.protected = ctx.protected
        self.state.save()
        self.outputs[step.id] = outputs
        self._record(StepOutcome(step.id, Status.DONE, seconds, log=record.log))

    def _record(self, outcome: StepOutcome) -> None:
        self.outcomes[outcome.id] = outcome
        if outcome.status is not Status.DONE or outcome.seconds:
            emit(
                outcome.reason or outcome.status.value,
                kind=("step", outcome.status.value),
                step=outcome.id,
                seconds=outcome.seconds,
            )

    def interrupt(self) -> None:
        """Stop every child, mark running steps interrupted, and save the state."""
        proc.terminate_all()
        for step, started, _ in self.running.values():
            record = self.state.steps[step.id]
            record.status, record.finished = "interrupted", time.time()
            self.outcomes[step.id] = StepOutcome(
                step.id, Status.INTERRUPTED, time.monotonic() - started, log=record.log
            )
        self.state.save()


def _emit_line(step_id: str, line: str) -> None:
    emit(line, kind=("step", "line"), step=step_id)


def _failure(step: Step, exc: BootstrapError, seconds: float, log: str | None) -> StepOutcome:
    """A failed step: a command's output tail without the installers' hints naming their own
    flags, and, when the network failed, the host and the setting that fixes it."""
    tail = tuple(without_tool_hints(exc.tail)) if isinstance(exc, CommandFailed) else ()
    fault = net_fault(tail) if tail else None
    if fault is not None and fault.kind == "timeout":  # a build's or a test's too: not a sign
        fault = None
    hint = exc.hint or (f"{fault.line()}: {fault.fix()}" if fault else None)
    return StepOutcome(
        step.id, Status.FAILED, seconds, reason=exc.message, log=log, tail=tail, hint=hint
    )


def _as_error(exc: Exception, log_path: Path) -> BootstrapError:
    """Keep domain errors; an unexpected one goes to the step's log with its traceback."""
    if isinstance(exc, BootstrapError):
        return exc
    with contextlib.suppress(OSError), log_path.open("a", encoding="utf-8") as fh:  # disk full?
        fh.write("".join(traceback.format_exception(exc)))
    if isinstance(exc, OSError):  # the machine's fault, not the tool's: say what and where
        where = f": {exc.filename}" if exc.filename else ""
        return StepFailed(
            f"{exc.strerror or exc}{where}",
            hint="fix that, then re-run the same command: it resumes at this step",
        )
    return BootstrapError(f"internal error: {exc!r} (traceback in the step's log)")
