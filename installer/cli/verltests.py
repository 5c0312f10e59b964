"""The `test` subcommand: verl's own CPU test files, run in an env, each failure classified."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from installer.cli.output import emit_json, out
from installer.errors import EXIT_OK, EXIT_STEP_FAILED

if TYPE_CHECKING:
    from installer.verltests import SuiteReport

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `test`."""
    p = sub.add_parser("test", help="run verl's own CPU tests in an env and classify failures")
    p.add_argument("--prefix", type=lambda v: Path(v).expanduser(), required=True)
    p.add_argument(
        "--checkout",
        type=lambda v: Path(v).expanduser(),
        help="verl's source tree whose tests to run (default PREFIX/src/verl)",
    )
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH",
        help="run only this test file (relative to the checkout; repeatable)",
    )
    p.add_argument(
        "--allow-downloads",
        action="store_true",
        help="let tests reach the model hub (default: offline, so they fail at once)",
    )
    p.add_argument(
        "--collect-only",
        action="store_true",
        help="import the test files without running them (an env for a GPU host, checked here)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_test)


def cmd_test(ns: argparse.Namespace) -> int:
    """Run the suite; exit 1 when a failure is the env's own (the others are reported)."""
    from installer.verltests import run_verl_tests

    report = run_verl_tests(
        ns.prefix.absolute(),
        checkout=ns.checkout.absolute() if ns.checkout else None,
        files=tuple(ns.file),
        allow_downloads=ns.allow_downloads,
        collect_only=ns.collect_only,
    )
    if ns.json:
        emit_json({"schema": "verl-bootstrap.test/1", **report.to_json()})
    else:
        out(render(report))
    return EXIT_OK if report.ok else EXIT_STEP_FAILED


def render(report: SuiteReport) -> str:
    """The summary a person reads: counts, failures by class, then each failure."""
    counts = report.counts
    lines = [
        f"{len(report.files)} test files from {report.checkout}",
        ", ".join(f"{name} {number}" for name, number in counts.items()),
        "failures by class: " + ", ".join(f"{k} {v}" for k, v in report.by_class.items()),
    ]
    for failure in sorted(report.failures, key=lambda f: (f.verdict.cls, f.nodeid)):
        verdict = failure.verdict
        lines.append(f"  [{verdict.cls}] {failure.nodeid}: {verdict.reason}: {verdict.line}")
    lines.append(f"log: {report.log}")
    verdict_line = "no env problem" if report.ok else "ENV PROBLEMS: the env lacks what verl needs"
    lines.append(verdict_line)
    return "\n".join(lines)
