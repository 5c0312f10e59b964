"""A pytest plugin `verl-bootstrap test` loads into verl's run: where the run is, line by line.

It runs inside the env's interpreter (stdlib only) and appends the node id of each file as its
collection starts and of each test as it starts, flushed at once, so that a run stopped at its
time limit still tells which file or test it was stuck in (pytest's own report never names it).
Each test's outcome goes, as one marked line, to the stderr pytest had when it loaded this
plugin (before it captures anything), so the live line of `verl-bootstrap test` counts them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_PATH = os.environ.get("VERL_BOOTSTRAP_PROGRESS", "")
MARK = "@@verl-bootstrap-test "  # the outcome lines' start (verltests.suite reads it)
_OUT = os.dup(2) if _PATH else -1  # the real stderr, never pytest's capture of it


def _note(nodeid: str) -> None:
    if _PATH and nodeid:
        with Path(_PATH).open("a", encoding="utf-8") as progress:
            progress.write(nodeid + "\n")


def pytest_collectstart(collector: Any) -> None:
    """A file (or folder) is being imported."""
    _note(collector.nodeid)


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """A test is starting."""
    _note(nodeid)


def pytest_runtest_logreport(report: Any) -> None:
    """A test's phase ended: its outcome, once per test (the call; a setup that did not pass; a
    teardown that failed)."""
    when, outcome = report.when, report.outcome
    if when == "call" or (when == "setup" and outcome != "passed"):
        said = "error" if when == "setup" and outcome == "failed" else outcome
    elif when == "teardown" and outcome == "failed":
        said = "error"
    else:
        return
    if _OUT >= 0:
        os.write(_OUT, f"{MARK}{said} {report.nodeid}\n".encode("utf-8", "replace"))
