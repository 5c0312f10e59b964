"""The main job: profile → plan → preflight → run (under the prefix lock) → activation."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from installer.envs.activation import activation_line, write_activation
from installer.errors import InputError, Refused
from installer.gpu.detect import detect_driver
from installer.gpu.model import DriverInfo
from installer.host.facts import gather_host
from installer.options import RunOptions
from installer.paths import STATE_DIRNAME, guard_file
from installer.plan.compile import compile_plan
from installer.plan.locked import precheck, prepare_locked
from installer.plan.model import Plan
from installer.profile import load_profile
from installer.profile.stacks import apply_stack
from installer.run.guard import guarding
from installer.run.runner import RunReport, run_plan

__all__ = ["InstallResult", "detect_host_driver", "prepare_plan", "run_install"]


@dataclass(frozen=True)
class InstallResult:
    """A finished run: the report and how to enter the env."""

    plan: Plan
    report: RunReport
    activate: str | None


def detect_host_driver(environ: Mapping[str, str] | None = None) -> DriverInfo | None:
    """The NVIDIA driver of this host (None when there is none)."""

    return detect_driver(environ=dict(os.environ if environ is None else environ))


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
        profile, options.verl_ref, allow_unsupported=options.allow_unsupported_ref
    )
    if detect and driver is None:
        driver = detect_host_driver()
    locked = None
    if options.locked or options.frozen or options.lockfile is not None:
        profile, locked = prepare_locked(profile, options, driver)
    host = gather_host(profile, options, driver=driver, check_optional=check_optional)
    if locked is not None:  # every artifact is looked up and hash-checked before anything runs
        locked = precheck(locked, host.settings, offline=options.offline)
        note = f"installing lockfile {locked.path} exactly; its artifacts' sha256 match the index"
        host = replace(host, notes=(*host.notes, note))
    return compile_plan(profile, options, host, locked=locked)


def run_install(
    plan: Plan, *, force: frozenset[str] = frozenset(), preflight: bool = True
) -> InstallResult:
    """Preflight, then run the plan under the prefix lock; write the activation script."""
    if preflight:
        run_preflight(plan)
    _refuse_foreign_prefix(plan.prefix)
    with guarding(guard_file(plan.prefix), wait=plan.options.guard_wait):
        report = run_plan(plan, force=force)
    activate = None
    if report.ok:
        write_activation(plan.prefix)
        activate = activation_line(plan.prefix)
    return InstallResult(plan=plan, report=report, activate=activate)


def run_preflight(plan: Plan) -> None:
    """Doctor's preflight subset; any failure refuses the run before a download."""
    # only an install runs doctor: `plan` starts faster without it
    from installer.doctor import preflight_failures  # noqa: PLC0415 - see above

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
