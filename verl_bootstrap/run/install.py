"""The main job: profile → plan → preflight → run (under the prefix lock) → activation."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from verl_bootstrap.envs.activation import activation_line, write_activation
from verl_bootstrap.errors import BootstrapError, InputError, Interrupted, Refused
from verl_bootstrap.events import emit
from verl_bootstrap.gpu.detect import detect_driver
from verl_bootstrap.gpu.model import DriverInfo
from verl_bootstrap.lifecycle.guard import guarding
from verl_bootstrap.lifecycle.runlog import begin_run, end_run, top_level
from verl_bootstrap.lifecycle.state import State
from verl_bootstrap.locked.prepare import LockedInstall, precheck, prepare_locked
from verl_bootstrap.lockfile.gaps import LABELS
from verl_bootstrap.lockfile.lookup import NotServed
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import STATE_DIRNAME, guard_file, state_file
from verl_bootstrap.plan.facts import gather_host
from verl_bootstrap.plan.lockroute import Route, choose_route, route_line
from verl_bootstrap.plan.model import Plan
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.run.compile import compile_plan
from verl_bootstrap.run.repair import Repair, env_drift, take_out_changed
from verl_bootstrap.run.runner import RunReport, run_plan

__all__ = ["InstallResult", "prepare_plan", "run_install"]


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
    chosen, options, locked, route = _lock_route(profile, options, driver)
    reason = route.reason
    host = gather_host(chosen, options, driver=driver, check_optional=check_optional)
    plan = compile_plan(chosen, options, host, locked=locked)  # every input checked first
    if locked is not None:  # every artifact is looked up and hash-checked before anything runs
        try:
            locked = precheck(locked, host.settings, offline=options.offline)
        except NotServed as exc:
            if _lock_required(options):
                raise
            # this user's indexes lack some locked files: resolve, as with no lockfile at all
            chosen, locked, reason = profile, None, exc.message
            host = gather_host(chosen, options, driver=driver, check_optional=check_optional)
        plan = compile_plan(chosen, options, host, locked=locked)
    if route.lab_passed:  # said with the plan's other notes, before anything runs
        note = f"not the lab's lockfile: {route.lab_passed}"
        plan = replace(plan, host=replace(plan.host, notes=(*plan.host.notes, note)))
    return replace(plan, route=_route_line(plan, reason))


def _lock_required(options: RunOptions) -> bool:
    return options.locked or options.frozen or options.lockfile is not None


def _lock_route(
    profile: Profile, options: RunOptions, driver: DriverInfo | None
) -> tuple[Profile, RunOptions, LockedInstall | None, Route]:
    """The lockfile the run installs (the profile narrowed to its Python), or None and why not.

    By default the lab's lockfile, else the committed one, when it fits; `--locked`, `--frozen`
    and `--lockfile` require one (the lab's first when it fits); `--resolve` takes none.
    """
    required = _lock_required(options)
    if required and options.resolve:
        raise InputError(
            "--resolve cannot be combined with --locked, --frozen or --lockfile",
            hint="--resolve resolves against today's index; the others install a lockfile",
        )
    if options.resolve:
        return profile, options, None, Route(None, "", "--resolve given")
    route = choose_route(profile, options, driver)
    if required:  # a lockfile must fit, or the run fails
        if options.with_tests:  # lockfiles hold the default selection of stages only
            raise InputError(
                "--with-tests cannot be combined with a lockfile install",
                hint="install the lockfile, then run the same command again without --locked "
                "and with --with-tests to add the test tools",
            )
        if options.lockfile is not None:  # the user's own choice: the lab's is not asked for
            route = replace(route, lab_passed="")
        elif route.origin == "lab":
            options = replace(options, lockfile=route.lockfile)
        narrowed, locked = prepare_locked(profile, options, driver)
        if route.origin and options.lockfile in (None, route.lockfile):
            locked = replace(locked, origin=route.origin)
        return narrowed, options, locked, replace(route, reason="")
    if route.lockfile is None:
        return profile, options, None, route
    narrowed, locked = prepare_locked(profile, replace(options, lockfile=route.lockfile), driver)
    return narrowed, options, replace(locked, origin=route.origin), replace(route, reason="")


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


def run_preflight(plan: Plan, settled: frozenset[str] = frozenset()) -> None:
    """Doctor's preflight subset; any failure refuses the run before a download. `settled`:
    the steps already done with these inputs (a check of what they install is moot)."""
    # only an install runs doctor: `plan` starts faster without it
    from verl_bootstrap.doctor import preflight_failures  # noqa: PLC0415 - see above

    failures = preflight_failures(plan, settled=settled)
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
