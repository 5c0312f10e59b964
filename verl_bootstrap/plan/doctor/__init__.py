"""doctor: read-only checks of a host and an env, before an install and after it."""

from __future__ import annotations

from verl_bootstrap.plan.doctor.doctorrun import (
    ALL_CHECKS,
    CHECKS,
    PREFLIGHT_CHECKS,
    run_doctor,
)
from verl_bootstrap.plan.doctor.inputs import Context, DoctorInputs, EnvFacts
from verl_bootstrap.plan.doctor.preflight import (
    inputs_from_plan,
    preflight_failures,
    run_preflight_checks,
)
from verl_bootstrap.plan.doctor.results import SCHEMA, CheckResult, DoctorReport, Status
from verl_bootstrap.profile.variants import choose_variant

__all__ = [
    "ALL_CHECKS",
    "CHECKS",
    "PREFLIGHT_CHECKS",
    "SCHEMA",
    "CheckResult",
    "Context",
    "DoctorInputs",
    "DoctorReport",
    "EnvFacts",
    "Status",
    "choose_variant",
    "inputs_from_plan",
    "preflight_failures",
    "run_doctor",
    "run_preflight_checks",
]
