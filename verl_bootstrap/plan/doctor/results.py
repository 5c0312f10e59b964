"""What doctor reports: named checks with a status, a finding, a fix, and a stable JSON envelope."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED

__all__ = ["SCHEMA", "CheckResult", "DoctorReport", "Status", "fail", "ok", "skipped", "warn"]

SCHEMA = "verl-bootstrap.doctor/1"


class Status(str, enum.Enum):
    """A check's outcome. Only `fail` makes doctor exit non-zero."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """One check: what it found and, when something is wrong, the concrete fix."""

    name: str
    status: Status
    finding: str
    fix: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A warning or failure without a fix leaves the user stuck: refuse to build one.
        if self.status in (Status.WARN, Status.FAIL) and not self.fix:
            raise ValueError(f"check {self.name!r}: a {self.status.value} needs a fix")

    def to_dict(self) -> dict[str, Any]:
        """The check's entry in the JSON envelope."""
        return {
            "name": self.name,
            "status": self.status.value,
            "finding": self.finding,
            "fix": self.fix,
            "data": dict(self.data),
        }


def ok(name: str, finding: str, /, **data: Any) -> CheckResult:
    """A passing check."""
    return CheckResult(name, Status.OK, finding, None, data)


def warn(name: str, finding: str, fix: str, /, **data: Any) -> CheckResult:
    """A check that found something worth changing, but nothing that stops an install."""
    return CheckResult(name, Status.WARN, finding, fix, data)


def fail(name: str, finding: str, fix: str, /, **data: Any) -> CheckResult:
    """A check that found something that must be fixed first."""
    return CheckResult(name, Status.FAIL, finding, fix, data)


def skipped(name: str, finding: str, /, **data: Any) -> CheckResult:
    """A check that did not apply here (or that the user skipped)."""
    return CheckResult(name, Status.SKIPPED, finding, None, data)


@dataclass(frozen=True)
class DoctorReport:
    """Every check that ran, in order."""

    checks: tuple[CheckResult, ...]

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        """The checks that failed."""
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    @property
    def ok(self) -> bool:
        """True when nothing failed (warnings allowed)."""
        return not self.failed

    @property
    def exit_code(self) -> int:
        """0 when nothing fails, 3 (a precondition failed) when something does."""
        return EXIT_OK if self.ok else EXIT_REFUSED

    @property
    def skipped_by_user(self) -> tuple[str, ...]:
        """Checks overridden with --skip-check, for the lockfile to record."""
        return tuple(c.name for c in self.checks if c.data.get("skipped_by_user"))

    def get(self, name: str) -> CheckResult | None:
        """The result of one check, if it ran."""
        return next((c for c in self.checks if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """The stable `--json` envelope."""
        return {
            "schema": SCHEMA,
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
        }

    def to_json(self) -> str:
        """The envelope as JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str)
