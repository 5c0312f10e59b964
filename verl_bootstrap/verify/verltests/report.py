"""What one run of verl's CPU tests reports: the counts, each failure with its class, whether it
was stopped and the files it never got to."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_bootstrap.verify.verltests.classify import CLASSES, Verdict, classify
from verl_bootstrap.verify.verltests.junit import Case

__all__ = ["Failure", "SuiteReport", "make_report"]

_RUN = ("passed", "failed", "error", "skipped", "timeout")
_COLLECT_ONLY = ("collected", "error", "timeout")


@dataclass(frozen=True)
class Failure:
    """One failed or erroring test (or uncollectable file), with its class."""

    nodeid: str
    outcome: str
    verdict: Verdict


@dataclass(frozen=True)
class SuiteReport:
    """The outcome of one run of verl's CPU tests."""

    checkout: str
    files: tuple[str, ...]
    counts: dict[str, int]
    failures: tuple[Failure, ...]
    log: str
    timed_out: bool = False  # the run was stopped at its time limit
    interrupted: bool = False  # pytest was stopped early some other way (a signal, pytest.exit)
    not_reached: tuple[str, ...] = ()  # files it never got to, then
    notes: tuple[str, ...] = ()  # said of the run (how --test-timeout bounds it)

    @property
    def by_class(self) -> dict[str, int]:
        """Failures and errors per class (every class present, zero or not)."""
        found = Counter(f.verdict.cls for f in self.failures)
        return {cls: found.get(cls, 0) for cls in CLASSES}

    @property
    def ok(self) -> bool:
        """No env-class failure and a finished run (a stopped run proved nothing of the rest)."""
        return self.by_class["env"] == 0 and not self.timed_out and not self.interrupted

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form."""
        return {
            "checkout": self.checkout,
            "files": list(self.files),
            "counts": self.counts,
            "by_class": self.by_class,
            "ok": self.ok,
            "timed_out": self.timed_out,
            "interrupted": self.interrupted,
            "not_reached": list(self.not_reached),
            "notes": list(self.notes),
            "log": self.log,
            "failures": [
                {"nodeid": f.nodeid, "outcome": f.outcome, **f.verdict.__dict__}
                for f in self.failures
            ],
        }


def make_report(
    checkout: Path,
    files: tuple[str, ...],
    cases: tuple[Case, ...],
    log_path: Path,
    *,
    collected: int | None = None,
    timed_out: bool = False,
    interrupted: bool = False,
    notes: tuple[str, ...] = (),
) -> SuiteReport:
    counts = Counter(c.outcome for c in cases)
    if collected is not None:  # collection only: nothing ran
        counts["collected"] = collected
    failures = tuple(
        Failure(c.nodeid, c.outcome, classify(c.message, c.text))
        for c in cases
        if c.outcome in ("failed", "error", "timeout")
    )
    return SuiteReport(
        checkout=str(checkout),
        files=files,
        counts={k: counts.get(k, 0) for k in (_COLLECT_ONLY if collected is not None else _RUN)},
        failures=failures,
        log=str(log_path),
        timed_out=timed_out,
        interrupted=interrupted,
        not_reached=_not_reached(files, cases) if timed_out or interrupted else (),
        notes=notes,
    )


def _not_reached(files: tuple[str, ...], cases: tuple[Case, ...]) -> tuple[str, ...]:
    """The files no case names (JUnit names a test by its dotted module, pytest by its path)."""
    names = [c.nodeid for c in cases]

    def reached(path: str) -> bool:
        dotted = path.removesuffix(".py").replace("/", ".")
        return any(
            n.split("::")[0] == path or n.startswith((dotted + "::", dotted + ".")) for n in names
        )

    return tuple(f for f in files if not reached(f))
