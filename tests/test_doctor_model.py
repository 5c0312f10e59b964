"""The doctor report's contract: statuses, fixes, exit codes and the pinned --json envelope."""

from __future__ import annotations

import json

import pytest

from verl_bootstrap.plan.doctor.results import (
    SCHEMA,
    CheckResult,
    DoctorReport,
    Status,
    fail,
    ok,
    skipped,
    warn,
)


def _report() -> DoctorReport:
    return DoctorReport(
        (
            ok("driver", "NVIDIA driver 590.48.01 serving CUDA 13.1", version="590.48.01"),
            warn("root", "running as root", "run as your own user"),
            skipped("network", "skipped with --skip-check", skipped_by_user=True),
            fail("disk", "1.0 GB free", "free space there"),
        )
    )


def test_json_envelope_is_pinned() -> None:
    envelope = json.loads(_report().to_json())
    assert list(envelope) == ["schema", "ok", "checks"]
    assert envelope["schema"] == SCHEMA == "verl-bootstrap.doctor/1"
    assert envelope["ok"] is False
    for check in envelope["checks"]:
        assert list(check) == ["name", "status", "finding", "fix", "data"]
    assert envelope["checks"][0] == {
        "name": "driver",
        "status": "ok",
        "finding": "NVIDIA driver 590.48.01 serving CUDA 13.1",
        "fix": None,
        "data": {"version": "590.48.01"},
    }
    assert [c["status"] for c in envelope["checks"]] == ["ok", "warn", "skipped", "fail"]


def test_exit_code_is_3_only_when_something_fails() -> None:
    report = _report()
    assert [c.name for c in report.failed] == ["disk"]
    assert report.exit_code == 3
    passing = DoctorReport(report.checks[:3])
    assert passing.ok and passing.exit_code == 0


def test_user_skips_are_listed_for_the_lockfile() -> None:
    assert _report().skipped_by_user == ("network",)
    assert _report().get("root") is not None and _report().get("nope") is None


@pytest.mark.parametrize("status", [Status.WARN, Status.FAIL])
def test_a_warning_or_failure_without_a_fix_is_refused(status: Status) -> None:
    with pytest.raises(ValueError, match="needs a fix"):
        CheckResult("disk", status, "1.0 GB free")
