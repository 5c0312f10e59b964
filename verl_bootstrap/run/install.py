"""The main job: profile → plan → preflight → run (under the prefix lock) → activation."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from verl_bootstrap.envs.activation import activation_line, write_activation
from verl_bootstrap.errors import InputError, Interrupted, Refused
from verl_bootstrap.events import emit
from verl_bootstrap.gpu.detect import detect_driver
from verl_bootstrap.gpu.model import DriverInfo
from verl_bootstrap.lifecycle.guard import guarding
from verl_bootstrap.lifecycle.runlog import begin_run, end_run, top_level
from verl_bootstrap.lifecycle.state import State
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import STATE_DIRNAME, guard_file, state_file
from verl_bootstrap.plan.facts import gather_host
from verl_bootstrap.plan.locked import precheck, prepare_locked
from verl_bootstrap.plan.model import Plan
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.run.compile import compile_plan
from verl_bootstrap.run.runner import RunReport, run_plan

__all__ = ["InstallResult", "prepare_plan", "run_install"]


@dataclass(frozen=True)
class InstallResult:
    """A finished run: the report and how to enter the env."""

    plan: Plan
    report: RunReport
    activate: str | None


def prepare_plan(
    options: RunOptions,
    *,
    driver: DriverInfo | None = None,
    detect: bool = True,
    check_optional: bool = True,
) -> Plan:
    """Load and resolve the profile, read the host, and compile the plan (nothing runs)."""
    profile = load_profile(options.profile)
    profile = apply_stack(
        profile,
        options.verl_ref,
        allow_unsupported=options.allow_unsupported_ref,
        options=frozenset({"tests"} if options.with_tests else ()),
    )
    if detect and driver is None:
        driver = detect_driver()
    locked = None
    if options.locked or options.frozen or options.lockfile is not None:
        if options.with_tests:  # lockfiles hold the default selection of stages only
            raise InputError(
                "--with-tests cannot be combined with a lockfile install",
                hint="install the lockfile, then run the same command again without --locked "
                "and with --with-tests to add the test tools",
            )
        profile, locked = prepare_locked(profile, options, driver)
    host = gather_host(profile, options, driver=driver, check_optional=check_optional)
    if locked is not None:  # every artifact is looked up and hash-checked before anything runs
        locked = precheck(locked, host.settings, offline=options.offline)
        note = f"installing lockfile {locked.path} exactly; its artifacts' sha256 match the index"
        host = replace(host, notes=(*host.notes, note))
    return compile_plan(profile, options, host, locked=locked)


def run_install(
    plan: Plan,
    *,
    state: State | None = None,
    force: frozenset[str] = frozenset(),
    preflight: bool = True,
) -> InstallResult:
    """Preflight, then run the plan under the prefix lock; write the activation script. `state`:
    the env's state as the run loaded it (for its options and change check), else loaded here."""
    if preflight:
        run_preflight(plan)
    _refuse_foreign_prefix(plan.prefix)
    before, made_prefix = top_level(plan.prefix), not plan.prefix.exists()
    with guarding(guard_file(plan.prefix), wait=plan.options.guard_wait):
        for note in plan.notes:  # said once the run is really going (not on a refused one)
            emit(note, kind=("note",))
        # under the lock: the state as loaded, unless another run wrote it while this one waited
        state = (state or State.load(state_file(plan.prefix))).fresh()
        begin_run(plan, state, made_prefix=made_prefix)
        try:
            report = run_plan(plan, state=state, force=force)
        except Interrupted:
            end_run(plan, state, "interrupted", before)
            raise
        end_run(plan, state, "ok" if report.ok else "failed", before, report.log_dir)
    activate = None
    if report.ok:
        write_activation(plan.prefix)
        activate = activation_line(plan.prefix)
    return InstallResult(plan=plan, report=report, activate=activate)


def run_preflight(plan: Plan) -> None:
    """Doctor's preflight subset; any failure refuses the run before a download."""
    # only an install runs doctor: `plan` starts faster without it
    from verl_bootstrap.doctor import preflight_failures  # noqa: PLC0415 - see above

    failures = preflight_failures(plan)
    if failures:
        lines = "\n  ".join(
            f"{c.name}: {c.finding}" + (f" (fix: {c.fix})" if c.fix else "") for c in failures
        )
        raise Refused(
            "preflight refused the run:\n  " + lines,
            hint="fix the above, or pass --skip-check NAME to override one check "
            "(recorded in the lockfile)",
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
