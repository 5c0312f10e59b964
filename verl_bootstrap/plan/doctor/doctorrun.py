"""Run doctor's checks: gather the facts once, run each named check, collect the report."""

from __future__ import annotations

from collections.abc import Iterable

from verl_bootstrap import events
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.machine.gpu.detect import detect_driver
from verl_bootstrap.plan.doctor.checklist import ALL_CHECKS, CHECKS, NEEDS_DRIVER, PREFLIGHT_CHECKS
from verl_bootstrap.plan.doctor.inputs import Context, DoctorInputs, EnvFacts, run_probe
from verl_bootstrap.plan.doctor.results import CheckResult, DoctorReport, skipped

__all__ = ["ALL_CHECKS", "CHECKS", "PREFLIGHT_CHECKS", "run_doctor"]


def _validate(names: Iterable[str], what: str) -> None:
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        raise InputError(
            f"{what}: unknown check(s) {', '.join(unknown)}",
            hint=f"doctor's checks: {', '.join(ALL_CHECKS)}",
        )


def _env_facts(inputs: DoctorInputs, probe: bool) -> EnvFacts | None:
    if inputs.prefix is not None:
        prefix, python = inputs.prefix, env_python(inputs.prefix)
    elif inputs.python is not None:
        python = inputs.python
        prefix = python.parent.parent  # <prefix>/bin/python
    else:
        return None
    facts = EnvFacts(prefix=prefix, python=python, exists=python.exists())
    return (
        run_probe(facts, inputs.environ, inputs.probe_timeout) if probe and facts.exists else facts
    )


def _context(inputs: DoctorInputs, names: tuple[str, ...]) -> Context:
    active = set(names) - inputs.skip
    driver = inputs.driver
    if inputs.detect and active & NEEDS_DRIVER:
        driver = detect_driver(
            root=inputs.root,
            environ=inputs.environ,
            use_nvml=inputs.use_nvml,
            nvidia_smi=inputs.nvidia_smi,
        )
    # The probe imports torch (seconds): only the check that needs it pays for it. gpu-vs-build
    # then reads the installed torch's arch list from the same answer.
    env = _env_facts(inputs, probe="shadowing-loaded" in active)
    return Context(inputs=inputs, driver=driver, env=env)


def _run_one(name: str, ctx: Context) -> CheckResult:
    if name in ctx.inputs.skip:
        result = skipped(name, "skipped with --skip-check", skipped_by_user=True)
    else:
        result = CHECKS[name](ctx)
    events.emit(f"{name}: {result.status.value}", kind=("doctor", "check"), result=result)
    return result


def run_doctor(inputs: DoctorInputs, *, only: Iterable[str] | None = None) -> DoctorReport:
    """Run the named checks (default: all of them, in order) and report every result."""
    names = tuple(ALL_CHECKS if only is None else only)
    _validate(names, "checks to run")
    _validate(inputs.skip, "--skip-check")
    ctx = _context(inputs, names)
    return DoctorReport(tuple(_run_one(name, ctx) for name in names))
