"""A pytest plugin `verl-bootstrap test` loads into verl's run: where the run is, line by line.

It runs inside the env's interpreter (stdlib only) and appends the node id of each file as its
collection starts and of each test as it starts, flushed at once, so that a run stopped at its
time limit still tells which file or test it was stuck in (pytest's own report never names it).
Each test's outcome goes, as one marked line, to the stderr pytest had when it loaded this
plugin (before it captures anything), so the live line of `verl-bootstrap test` counts them.

With a test limit (`--test-timeout`), a watchdog thread in C (faulthandler's) ends the run a
little past it when a test has not finished by then: a test hung in native code (a blocked Ray
call, a lock taken in C) never returns to Python, where pytest-timeout's alarm would stop it.
The hung test's traceback goes to a file, each outcome with its report to another, and the run
is started again with every test already started left out (verltests.suite).
"""

from __future__ import annotations

import faulthandler
import json
import os
from pathlib import Path
from typing import Any

_PATH = os.environ.get("VERL_BOOTSTRAP_PROGRESS", "")
MARK = "@@verl-bootstrap-test "  # the outcome lines' start (verltests.suite reads it)
_OUT = os.dup(2) if _PATH else -1  # the real stderr, never pytest's capture of it
_LIMIT = float(os.environ.get("VERL_BOOTSTRAP_TEST_LIMIT", "0") or 0)  # 0: no watchdog
# kept open for the whole run: the watchdog, a C thread, writes the traceback into it
_HUNG = Path(os.environ["VERL_BOOTSTRAP_HUNG"]).open("w") if _LIMIT else None  # noqa: SIM115
_RESULTS = os.environ.get("VERL_BOOTSTRAP_RESULTS", "")
_SKIP = os.environ.get("VERL_BOOTSTRAP_SKIP", "")  # the tests a run before this one started


def _note(nodeid: str) -> None:
    if _PATH and nodeid:
        with Path(_PATH).open("a", encoding="utf-8") as progress:
            progress.write(nodeid + "\n")


def pytest_collectstart(collector: Any) -> None:
    """A file (or folder) is being imported."""
    _note(collector.nodeid)


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Leave out the tests an earlier run started (each finished there, or hung)."""
    if not _SKIP or not Path(_SKIP).exists():
        return
    started = set(Path(_SKIP).read_text(encoding="utf-8").splitlines())
    left = [item for item in items if item.nodeid in started]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item.nodeid not in started]


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """A test is starting: noted, and watched when it has a limit."""
    _note(nodeid)
    if _HUNG is not None:
        faulthandler.dump_traceback_later(_LIMIT, exit=True, file=_HUNG)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    """A test finished, teardown included: no longer watched."""
    if _HUNG is not None:
        faulthandler.cancel_dump_traceback_later()


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
    if _RESULTS:  # a run the watchdog ends writes no JUnit report: its outcomes are here
        text = str(getattr(report, "longreprtext", "") or "")
        lines = [line for line in text.splitlines() if line.strip()]
        case = {"nodeid": report.nodeid, "outcome": said, "message": lines[-1] if lines else ""}
        with Path(_RESULTS).open("a", encoding="utf-8") as out:
            out.write(json.dumps({**case, "text": text}) + "\n")
