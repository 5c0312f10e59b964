"""Whole doctor runs on this host: the real no-driver answer, preflight, --skip-check, JSON."""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap.errors import InputError
from verl_bootstrap.plan.doctor import (
    ALL_CHECKS,
    PREFLIGHT_CHECKS,
    DoctorInputs,
    Status,
    run_doctor,
)
from verl_bootstrap.profile.models import Profile

HOST_HAS_DRIVER = (
    Path("/proc/driver/nvidia/version").exists()
    or ctypes.util.find_library("nvidia-ml") is not None
    or shutil.which("nvidia-smi") is not None
)
GPU = Profile.model_validate(
    {
        "schema_version": 1,
        "name": "fsdp",
        "stages": [{"id": "install-verl", "kind": "install-verl"}],
        "cuda_variants": {"cu128": {}, "cu130": {}},
        "disk_gb": 0.001,
    }
)


def _inputs(**fields: Any) -> DoctorInputs:
    base: dict[str, Any] = {"environ": {"PATH": os.environ.get("PATH", "")}, "profile": GPU}
    return DoctorInputs(**{**base, **fields})


def test_check_names_are_kebab_case_and_preflight_is_the_documented_subset() -> None:
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", n) for n in ALL_CHECKS)
    assert PREFLIGHT_CHECKS == (
        "driver",
        "driver-vs-plan",
        "gpu-vs-build",
        "shadowing-paths",
        "visibility",
        "disk",
        "ram",
        "build-tools",
        "glibc",
        "platform",
        "python",
        "root",
        "network",
        "cpu-torch",
    )
    assert set(PREFLIGHT_CHECKS) < set(ALL_CHECKS)


def test_the_registry_is_the_documented_list_in_order_with_its_preflight_marks() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "doctor.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- `([a-z-]+)`( \(P\))?:", doc, re.M)
    assert tuple(name for name, _ in listed) == ALL_CHECKS
    assert tuple(name for name, mark in listed if mark) == PREFLIGHT_CHECKS


@pytest.mark.skipif(HOST_HAS_DRIVER, reason="this host has an NVIDIA driver")
def test_this_host_has_no_driver_and_a_gpu_plan_fails_on_it() -> None:
    report = run_doctor(_inputs(), only=PREFLIGHT_CHECKS)
    driver = report.get("driver")
    assert driver is not None and driver.status is Status.FAIL
    assert driver.finding.startswith("no NVIDIA driver")
    assert report.exit_code == 3
    envelope = json.loads(report.to_json())
    assert [c["name"] for c in envelope["checks"]] == list(PREFLIGHT_CHECKS)
    for check in envelope["checks"]:
        assert check["status"] in {"ok", "warn", "fail", "skipped"}
        assert (check["fix"] is not None) == (check["status"] in {"warn", "fail"})


def test_driver_override_lets_a_cpu_host_check_a_gpu_plan() -> None:
    env = {"VERL_BOOTSTRAP_CUDA_DRIVER": "580.65.06"}
    report = run_doctor(_inputs(environ=env, variant="cu130"), only=["driver", "driver-vs-plan"])
    driver, plan = report.checks
    assert driver.status is Status.OK and "set by VERL_BOOTSTRAP_CUDA_DRIVER" in driver.finding
    assert plan.status is Status.OK
    old = run_doctor(
        _inputs(environ={"VERL_BOOTSTRAP_CUDA_DRIVER": "570"}, variant="cu130"),
        only=["driver-vs-plan"],
    )
    assert old.checks[0].status is Status.FAIL


def test_skip_check_overrides_a_failure_and_is_recorded() -> None:
    inputs = _inputs(skip=frozenset({"driver"}))
    report = run_doctor(inputs, only=["driver", "glibc"])
    assert report.checks[0].status is Status.SKIPPED
    assert report.skipped_by_user == ("driver",)
    assert report.ok


def test_unknown_check_names_are_input_errors() -> None:
    with pytest.raises(InputError, match="unknown check"):
        run_doctor(_inputs(skip=frozenset({"gpu"})))
    with pytest.raises(InputError, match="unknown check"):
        run_doctor(_inputs(), only=["nope"])


def test_driver_detection_runs_only_for_gpu_checks() -> None:
    broken = _inputs(environ={"VERL_BOOTSTRAP_CUDA_DRIVER": "latest"})
    assert run_doctor(broken, only=["glibc"]).ok
    with pytest.raises(InputError):
        run_doctor(broken, only=["driver"])
