"""Each test's own limit (`--test-timeout`): the progress plugin's watchdog (faulthandler's C
thread, progress_plugin) ends pytest at a test still running past it, hung in native code
included; the suite then starts pytest again without the tests already started. Where the env
has pytest-timeout, its alarm goes first and the watchdog waits a little longer; where it has
none, the watchdog alone bounds each test, at the limit itself, and that is said."""

from __future__ import annotations

import json
from pathlib import Path

from verl_bootstrap.verify.verltests.junit import Case

__all__ = ["hung", "limit_notes", "results", "stuck", "watched"]


def limit_notes(prefix: Path, test_timeout: float | None, *, plugin: bool) -> tuple[str, ...]:
    """What is said of `--test-timeout` on an env without pytest-timeout: the tool's own
    watchdog bounds each test, and the env is left as its lockfile records it."""
    if test_timeout is None or plugin:
        return ()
    return (
        f"the env at {prefix} has no pytest-timeout: each test is bounded at {test_timeout:g} s "
        "by verl-bootstrap's own watchdog, which ends pytest at a test past it and starts it "
        "again after that test (the env is not changed)",
    )


def watched(scratch: Path, test_timeout: float | None, *, plugin: bool) -> dict[str, str]:
    """The plugin's watchdog (progress_plugin): a test still running past its limit ends the
    run. With pytest-timeout in the env, a little past it (its own alarm first, for a test that
    returns to Python, which the run survives); without it, at the limit itself."""
    if test_timeout is None:
        return {}
    return {
        "VERL_BOOTSTRAP_TEST_LIMIT": f"{_watchdog_limit(test_timeout, plugin=plugin):g}",
        "VERL_BOOTSTRAP_HUNG": str(scratch / "hung.txt"),
        "VERL_BOOTSTRAP_RESULTS": str(scratch / "results.jsonl"),
        "VERL_BOOTSTRAP_SKIP": str(scratch / "progress.txt"),
    }


def _watchdog_limit(test_timeout: float, *, plugin: bool) -> float:
    return test_timeout + max(5.0, test_timeout / 5) if plugin else test_timeout


def hung(scratch: Path, test_timeout: float | None, *, plugin: bool) -> Case | None:
    """The test the watchdog ended the run in, with its traceback (None: it did not)."""
    trace = scratch / "hung.txt"
    if test_timeout is None or not trace.is_file() or not trace.stat().st_size:
        return None
    text = trace.read_text(encoding="utf-8", errors="replace")
    trace.unlink()
    tests = [n for n in _started(scratch) if "::" in n]
    seconds = _watchdog_limit(test_timeout, plugin=plugin)
    how = (
        "it was stopped in native code, where pytest-timeout cannot reach"
        if plugin
        else "verl-bootstrap's watchdog stopped it (the env has no pytest-timeout)"
    )
    message = (
        f"Timeout (>{seconds:g}s): the test did not return by its limit (--test-timeout "
        f"{test_timeout:g}); {how}"
    )
    return Case(tests[-1] if tests else "<pytest start-up>", "timeout", message, text)


def _started(scratch: Path) -> list[str]:
    progress = scratch / "progress.txt"
    return progress.read_text(encoding="utf-8").splitlines() if progress.exists() else []


def results(scratch: Path) -> tuple[Case, ...]:
    """The outcomes the plugin wrote in a run the watchdog ended (it writes no JUnit report);
    read once: the next run appends its own."""
    path = scratch / "results.jsonl"
    if not path.exists():
        return ()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    path.unlink()
    return tuple(
        Case(str(r["nodeid"]), str(r["outcome"]), str(r["message"]), str(r["text"])) for r in rows
    )


def stuck(progress: Path, outcome: str, message: str) -> Case:
    """The file or test the run was in when it was stopped (the plugin's last line)."""
    lines = progress.read_text(encoding="utf-8").splitlines() if progress.exists() else []
    where = lines[-1] if lines else "<pytest start-up>"
    return Case(where, outcome, message)
