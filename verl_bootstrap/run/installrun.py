"""The main job: profile → plan → preflight → run (under the prefix lock) → activation."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from verl_bootstrap.errors import BootstrapError, InputError, Interrupted, Refused
from verl_bootstrap.events import emit
from verl_bootstrap.installer.envs.activation import activation_line, write_activation
from verl_bootstrap.lock.gaps import LABELS
from verl_bootstrap.lock.lockroute import route_line
from verl_bootstrap.machine.gpu.detect import host_driver
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import STATE_DIRNAME, guard_file, state_file
from verl_bootstrap.plan.choices import Bundle, make_choices
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.run.compiler.compile import compile_plan
from verl_bootstrap.run.repair import Repair, env_drift, take_out_changed
from verl_bootstrap.run.runner import RunReport, run_plan
from verl_bootstrap.run.state.guard import guarding
from verl_bootstrap.run.state.inspect import verify_failed_since
from verl_bootstrap.run.state.runlog import begin_run, end_run, top_level
from verl_bootstrap.run.state.state import State

__all__ = ["InstallResult", "prepare_plan", "run_install"]

VERIFY_STEP = "verify"


@dataclass(frozen=True)
class InstallResult:
    """A finished run: the report and how to enter the env."""

    plan: Plan
    report: RunReport
    activate: str | None
    drift: Repair = field(default_factory=Repair)

    @property
    def ok(self) -> bool:
        """Every step finished, and nothing the env's record lists is left drifted."""
        return self.report.ok and not self.drift.cannot


def prepare_plan(
    options: RunOptions,
    *,
    driver: DriverInfo | None = None,
    detect: bool = True,
    check_optional: bool = True,
    bundle: Bundle | None = None,
    planning: bool = False,
) -> Plan:
    """Make each choice once (plan.choices), then compile the plan once (nothing runs but the
    unpacking of a `bundle`). `planning`: the plan is only shown (`plan`), so a GPU profile on a
    host with no driver is planned for its default variant rather than refused."""
    if detect and driver is None:
        driver = host_driver()
    chosen = make_choices(
        options, driver, bundle=bundle, check_optional=check_optional, planning=planning
    )
    plan = compile_plan(
        chosen.profile, chosen.options, chosen.host, locked=chosen.locked, digest=chosen.digest
    )
    plan = replace(
        plan, named_lockfile=chosen.named_lockfile, opened=chosen.opened, uv_lock=chosen.uv_lock
    )
    if chosen.passed_over:  # said with the plan's other notes, before anything runs
        notes = (*plan.host.notes, *chosen.passed_over)
        plan = replace(plan, host=replace(plan.host, notes=notes))
    return replace(plan, route=_route_line(plan, chosen.reason))


def _route_line(plan: Plan, reason: str) -> str:
    if plan.locked is None:
        return route_line(None, None, reason)
    lock = plan.locked.lock
    labels = [LABELS[kind] for kind, _ in plan.hash_gap_kinds]
    return route_line(plan.locked.path, lock.exclude_newer, "", gaps=labels)


def run_install(
    plan: Plan,
    *,
    state: State | None = None,
    force: frozenset[str] = frozenset(),
    preflight: bool = True,
) -> InstallResult:
    """Preflight, then run the plan under the prefix lock; write the activation script. `state`:
    the env's state as the run loaded it (for its options and change check), else loaded here.

    A finished env whose steps are all up to date is preflighted only when its check against
    its record finds something to repair: a run that downloads nothing needs no preflight."""
    force = force | _rechecked(plan, state)
    settled = _settled(plan, state) - force
    finished = settled == frozenset(plan.fingerprints())
    if preflight and not finished:
        run_preflight(plan, settled)
    _refuse_foreign_prefix(plan.prefix)
    before, made_prefix = top_level(plan.prefix), not plan.prefix.exists()
    with guarding(guard_file(plan.prefix), wait=plan.options.guard_wait):
        # under the lock: the state as loaded, unless another run wrote it while this one waited
        state = (state or State.load(state_file(plan.prefix))).fresh()
        drift = env_drift(plan, state)  # before begin_run: it reads the record as it stood
        if preflight and finished and drift.steps:
            run_preflight(plan, settled - drift.steps)
        _say(plan, drift)
        begin_run(plan, state, made_prefix=made_prefix)
        try:
            take_out_changed(plan, drift)
            report = run_plan(plan, state=state, force=force | drift.steps)
        except Interrupted:
            end_run(plan, state, "interrupted", before)
            raise
        except BootstrapError:  # the changed distributions could not be taken out
            end_run(plan, state, "failed", before)
            raise
        result = InstallResult(plan=plan, report=report, activate=None, drift=drift)
        end_run(plan, state, "ok" if result.ok else "failed", before, report.log_dir)
    if result.ok:
        write_activation(plan.prefix)
        result = replace(result, activate=activation_line(plan.prefix))
    return result


def _say(plan: Plan, drift: Repair) -> None:
    """The plan's notes and what drifted, once the run is really going (not on a refused one)."""
    for note in plan.notes:
        emit(note, kind=("note",))
    for line in drift.lines:
        emit(f"repair: {line}", kind=("note",))
    for line in drift.cannot:
        emit(line, kind=("note",))


def _settled(plan: Plan, state: State | None) -> frozenset[str]:
    """The steps the env already holds done with this plan's inputs (a re-run skips them)."""
    state = state or State.load(state_file(plan.prefix))
    return frozenset(i for i, f in plan.fingerprints().items() if state.is_done(i, f))


def _rechecked(plan: Plan, state: State | None) -> frozenset[str]:
    """The verification, when a standalone `verify` failed since it ran: a re-run checks the
    env again rather than call it verified."""
    state = state or State.load(state_file(plan.prefix))
    return frozenset({VERIFY_STEP}) if verify_failed_since(state) else frozenset()


def run_preflight(plan: Plan, settled: frozenset[str] = frozenset()) -> None:
    """Doctor's preflight subset; any failure refuses the run before a download. `settled`:
    the steps already done with these inputs (a check of what they install is moot)."""
    # only an install runs doctor: `plan` starts faster without it
    from verl_bootstrap.plan.doctor import preflight_failures  # noqa: PLC0415 - see above

    failures = preflight_failures(plan, settled=settled)
    if failures:
        lines = "\n  ".join(
            f"{c.name}: {c.finding}" + (f"\n    fix: {c.fix}" if c.fix else "") for c in failures
        )
        raise Refused(
            "preflight refused the run:\n  " + lines,
            hint="fix the above, or pass --skip-check NAME to override one check "
            "(recorded in the lockfile)",
            data={"failed": [c.to_dict() for c in failures]},
        )


def _refuse_foreign_prefix(prefix: Path) -> None:
    """A non-empty folder we did not create is never installed into."""
    if not prefix.exists() or (prefix / STATE_DIRNAME).is_dir():
        return
    if any(prefix.iterdir()):
        raise InputError(
            f"{prefix} exists, is not empty, and was not created by verl-bootstrap",
            hint="choose another --prefix; verl-bootstrap never writes into a folder it "
            "did not make",
        )
