"""The install's preflight on a real compiled plan (the shipped cpu profile)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap.errors import Refused
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.doctor import PREFLIGHT_CHECKS, inputs_from_plan, preflight_failures
from verl_bootstrap.plan.doctor.preflight import plan_urls, run_preflight_checks
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.run.installrun import prepare_plan, run_preflight


def _plan(tmp_path: Path, **options: Any) -> Plan:
    run = RunOptions(profile="cpu", prefix=tmp_path / "env", **options)
    return prepare_plan(run, detect=False, check_optional=False)


def test_preflight_runs_every_preflight_check_on_the_plan(tmp_path: Path) -> None:
    plan = _plan(tmp_path, offline=True)
    checks = run_preflight_checks(plan, dict(os.environ))
    assert tuple(c.name for c in checks) == PREFLIGHT_CHECKS
    assert preflight_failures(plan, dict(os.environ)) == ()  # this host can build the cpu env


def test_a_failed_preflight_refuses_the_run_naming_each_fix(tmp_path: Path) -> None:
    plan = _plan(tmp_path, offline=True)
    run_preflight(plan)  # passes: nothing fails for the cpu env here
    huge = replace(plan, profile=plan.profile.model_copy(update={"disk_gb": 1e9}))
    with pytest.raises(Refused, match="preflight refused the run") as caught:
        run_preflight(huge)
    (failed,) = caught.value.data["failed"]
    assert failed["name"] == "disk" and failed["status"] == "fail" and failed["fix"]
    assert caught.value.hint is not None and "--skip-check NAME" in caught.value.hint
    assert caught.value.exit_code == 3
    assert not plan.prefix.exists()  # refused before anything was made


def test_inputs_carry_the_plans_decisions(tmp_path: Path) -> None:
    plan = _plan(tmp_path, skip_checks=("root",))
    inputs = inputs_from_plan(plan, {})
    assert (inputs.profile, inputs.variant, inputs.prefix) == (plan.profile, "cpu", plan.prefix)
    assert inputs.skip == frozenset({"root"}) and inputs.detect is False
    labels = [label for label, _ in inputs.urls]
    assert labels[0] == "git:verl" and "index:default" in labels
    assert ("git:verl" in inputs.optional_urls) is plan.source.sdist_fallback


def test_an_offline_plan_probes_no_url(tmp_path: Path) -> None:
    assert plan_urls(_plan(tmp_path, offline=True), {}) == ()
