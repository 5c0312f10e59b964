"""The `test` subcommand: verl's own CPU test files, run in an env, each failure classified."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import env_flag, json_flag
from verl_bootstrap.cli.output import emit_json, out
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED

if TYPE_CHECKING:
    from verl_bootstrap.verify.verltests import SuiteReport

__all__ = ["cmd_test", "flags_test"]

DEFAULT_TIMEOUT = 3 * 3600  # a git checkout's full suite takes about an hour on a slow host


def _seconds(value: str) -> float:
    """A positive number of seconds (argparse type)."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {value!r}")
    return seconds


def flags_test(p: argparse.ArgumentParser) -> None:
    """test's flags."""
    p.add_argument(
        "targets",
        nargs="*",
        metavar="[ENV] TEST",
        help="the env's name first (default: the activated env, else the only one), then test "
        "files or node ids FILE::TEST relative to the checkout",
    )
    env_flag(p, positional=False)
    p.add_argument(
        "-k", dest="keyword", metavar="EXPR", help="only tests matching EXPR (pytest -k)"
    )
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
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"stop the whole run after this long (default {DEFAULT_TIMEOUT}); "
        "where it was stuck is reported as a timeout",
    )
    p.add_argument(
        "--test-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="each test's own limit (pytest-timeout's where the env has it, else the tool's "
        "own watchdog: a test past it is a timeout, and the run goes on)",
    )
    json_flag(p)


def cmd_test(ns: argparse.Namespace) -> int:
    """Run the suite with a live line of counts; exit 1 when a failure is the env's own (the
    others are reported)."""
    from verl_bootstrap.cli.optionsbuilder import env_prefix
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.events import listening
    from verl_bootstrap.verify.verltests import run_verl_tests

    name, tests = _env_and_tests(ns)
    prefix = env_prefix(ns.prefix, command="test", name=name)
    with (
        Console(quiet=ns.json) as console,
        listening(console),
        console.activity("test", "starting pytest"),
    ):
        report = run_verl_tests(
            prefix,
            checkout=ns.checkout.absolute() if ns.checkout else None,
            files=tuple(ns.file),
            allow_downloads=ns.allow_downloads,
            collect_only=ns.collect_only,
            timeout=ns.timeout,
            test_timeout=ns.test_timeout,
            tests=tests,
            keyword=ns.keyword,
        )
    if ns.json:
        emit_json({"schema": "verl-bootstrap.test/1", **report.to_json()})
    else:
        out(render(report))
    return EXIT_OK if report.ok else EXIT_STEP_FAILED


def _env_and_tests(ns: argparse.Namespace) -> tuple[str | None, tuple[str, ...]]:
    """The env's name (the first word, when it is no test, or --name) and the tests named."""
    words = list(ns.targets)
    looks_like_test = not words or "::" in words[0] or "/" in words[0] or ".py" in words[0]
    if words and not looks_like_test and ns.name is None and ns.prefix is None:
        return words[0], tuple(words[1:])
    return ns.name, tuple(words)


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
    lines += [f"note: {note}" for note in report.notes]
    lines.append(f"log: {report.log}")
    lines.append(_verdict(report))
    return "\n".join(lines)


def _verdict(report: SuiteReport) -> str:
    if report.by_class["env"]:
        return "ENV PROBLEMS: the env lacks what verl needs"
    if report.timed_out:
        return (
            f"STOPPED at the time limit (--timeout): {len(report.not_reached)} file(s) not "
            "reached: " + ", ".join(report.not_reached)
        )
    if report.interrupted:
        return (
            f"STOPPED: pytest was interrupted before it finished; {len(report.not_reached)} "
            "file(s) not reached: " + ", ".join(report.not_reached)
        )
    return "no env problem"
