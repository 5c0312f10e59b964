"""Run verl's own CPU test files from an env's checkout, in the env's interpreter, and classify.

verl's CPU workflow runs `pytest --asyncio-mode=auto tests/` with `python_files = *_on_cpu.py`;
this runs the same files (`tests/**/*_on_cpu.py` of the checkout: a git checkout has them all,
a release sdist a subset), without `-x`, so that every failure is seen and classified.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.events import emit
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.verify.trainroute import private_ray
from verl_bootstrap.verify.verltests.classify import interrupted_here, stopped_at_time_limit
from verl_bootstrap.verify.verltests.junit import Case, read_junit
from verl_bootstrap.verify.verltests.pytestargs import (
    PATTERN,
    confined_to,
    pytest_args,
    with_plugin,
)
from verl_bootstrap.verify.verltests.report import Failure, SuiteReport, make_report
from verl_bootstrap.verify.verltests.watchdog import hung, limit_notes, results, stuck, watched

__all__ = ["Failure", "SuiteReport", "find_test_files", "run_suite"]

_TOOLS = ("pytest", "pytest_asyncio", "pytest_rerunfailures", "pytest_timeout")
_MARK = "@@verl-bootstrap-test "  # progress_plugin.MARK (that module runs in the env only)
_INTERRUPTED = 2  # pytest's exit code when a signal, Ctrl-C or pytest.exit() stopped the run
# As verl's CPU workflow sets them; the hub is offline unless the user allows downloads, so a
# test that needs one fails at once (and is classified) instead of waiting on the network.
_ENV = {
    "TORCH_COMPILE_DISABLE": "1",
    "TORCHINDUCTOR_DISABLE": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",  # nothing written into the checkout (its git status stays)
    "PYTHONUNBUFFERED": "1",  # the log follows the run
}
_OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
_TOOLS_PROBE = (
    "import importlib.util as u, json; "
    f"print(json.dumps({{m: u.find_spec(m) is not None for m in {_TOOLS!r}}}))"
)
_COLLECTED = re.compile(r"^(\d+)(?:/\d+)? tests? collected", re.MULTILINE)


def find_test_files(checkout: Path, selected: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The checkout's CPU test files, relative and sorted; `selected` narrows them (paths, or
    node ids `file::test`, whose file must be one of them)."""
    tests = checkout / "tests"
    if not tests.is_dir():
        raise InputError(f"{checkout} has no tests/ folder: is it verl's checkout?")
    found = sorted(p.relative_to(checkout).as_posix() for p in tests.rglob(PATTERN))
    if not selected:
        return tuple(found)
    wanted = {s.split("::", 1)[0] for s in selected}
    missing = sorted(wanted - set(found))
    if missing:
        raise InputError(
            f"not a CPU test file of {checkout}: {', '.join(missing)}",
            hint=f"pass paths relative to the checkout that match tests/**/{PATTERN}, "
            "or node ids FILE::TEST of such a file",
        )
    return tuple(s for s in found if s in wanted)


def run_suite(
    prefix: Path,
    checkout: Path,
    *,
    files: tuple[str, ...],
    log_path: Path,
    allow_downloads: bool = False,
    collect_only: bool = False,
    timeout: float | None = None,
    test_timeout: float | None = None,
    targets: tuple[str, ...] = (),
    keyword: str | None = None,
) -> SuiteReport:
    """Run `files` (or the node ids `targets` within them) with pytest in the env at `prefix`,
    from `checkout`; classify each failure.

    `collect_only` imports the test files without running them (what a host without the GPU an
    env is for can still check): a file that cannot be imported is an error, classified.
    `keyword` is pytest's -k expression. Each test's outcome is emitted as it comes (a
    ("step", "line") event of the step "test": the counts so far), for a live line.
    Past `timeout` seconds the run is stopped: the file or test it was stuck in is a failure of
    class `timeout`. `test_timeout` is each test's limit: pytest-timeout's where the env has it,
    with the watchdog a little past it; else the watchdog's alone (said, the env left as it is).
    """
    python = env_python(prefix)
    if not python.exists():
        raise InputError(f"{prefix} is not an env (no {python})")
    tools = _require_tools(python, prefix)
    plugin = tools["pytest_timeout"]
    notes = limit_notes(prefix, test_timeout, plugin=plugin)
    for note in notes:
        emit(note, kind=("note",), step="test")
    env: dict[str, str | None] = {
        **_ENV,
        **({} if allow_downloads else _OFFLINE),
        "PATH": _env_path(python),
    }
    # verl's Ray tests call ray.init() with no address: they get a Ray of their own, never the
    # user's cluster or another run's (seen: a suite joined another env's Ray and failed on its
    # version)
    with tempfile.TemporaryDirectory(prefix="verl-tests-") as scratch, private_ray() as ray:
        env = {**env, **ray}
        where = Path(scratch)
        args = pytest_args(
            python,
            where / "junit.xml",
            targets or files,
            tools=tools,
            settings=confined_to(checkout, scratch=where),
            collect_only=collect_only,
            test_timeout=test_timeout,
            keyword=keyword,
        )
        env = {**env, **with_plugin(where), **watched(where, test_timeout, plugin=plugin)}
        run = _Pytest(args, env, checkout, log_path, where)
        done, cases = _run_until_done(run, timeout, test_timeout, plugin=plugin)
        cases = (*cases, *_stopped(done, where, timeout))
    collected = _COLLECTED.findall(done.output) if collect_only else None
    if not cases and not collected:
        raise StepFailed(
            f"pytest reported no test of {len(files)} file(s) in {checkout}",
            hint=f"see its output in {log_path}",
        )
    number = int(collected[-1]) if collected else (0 if collect_only else None)
    return make_report(
        checkout,
        files,
        cases,
        log_path,
        collected=number,
        timed_out=done.timed_out,
        interrupted=_interrupted(done),
        notes=notes,
    )


@dataclass(frozen=True)
class _Pytest:
    """One pytest command of the run, and where it runs, logs and writes."""

    args: list[str]
    env: dict[str, str | None]  # None: unset in pytest's environment
    cwd: Path
    log: Path
    scratch: Path


def _run_until_done(
    run: _Pytest, timeout: float | None, test_timeout: float | None, *, plugin: bool
) -> tuple[proc.Completed, tuple[Case, ...]]:
    """pytest run, and again after each test the watchdog ended, without the tests started,
    all within `timeout`; its last run and every outcome."""
    deadline = None if timeout is None else time.monotonic() + timeout
    tally, cases = _Tally(), tuple[Case, ...]()
    while True:
        left = None if deadline is None else max(1.0, deadline - time.monotonic())
        done = proc.run(
            run.args,
            log_path=run.log,
            env=run.env,
            cwd=run.cwd,
            check=False,
            keep_output=True,
            timeout=left,
            on_line=tally,
        )
        ended = None if done.timed_out else hung(run.scratch, test_timeout, plugin=plugin)
        if ended is None:
            junit = run.scratch / "junit.xml"
            return done, (*cases, *(read_junit(junit) if junit.exists() else ()))
        cases = (*cases, *results(run.scratch), ended)


def _interrupted(done: proc.Completed) -> bool:
    return not done.timed_out and done.returncode == _INTERRUPTED


def _stopped(done: proc.Completed, scratch: Path, timeout: float | None) -> tuple[Case, ...]:
    """The file or test a stopped run was in: at its time limit, or interrupted."""
    progress = scratch / "progress.txt"
    if done.timed_out:
        return (stuck(progress, "timeout", stopped_at_time_limit(timeout or 0.0)),)
    if _interrupted(done):
        return (stuck(progress, "error", interrupted_here()),)
    return ()


class _Tally:
    """Counts the outcome lines of the progress plugin and says the counts so far."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, line: str) -> None:
        at = line.find(_MARK)  # after pytest's own progress mark (`.`, `F`) on the line
        if at < 0:
            return
        outcome, _, nodeid = line[at + len(_MARK) :].partition(" ")
        self.counts["failed" if outcome == "error" else outcome] += 1
        said = ", ".join(f"{self.counts[k]} {k}" for k in ("passed", "failed", "skipped"))
        emit(f"{said} · {nodeid}", kind=("step", "line"), step="test", **self.counts)


def _require_tools(python: Path, prefix: Path) -> dict[str, bool]:
    """pytest must be in the env (never installed behind the user's back); which plugins are."""
    tools = _tools(python)
    if not tools["pytest"]:
        raise StepFailed(
            f"the env at {prefix} has no pytest",
            hint="add the test tools: run the same install again with --with-tests "
            f"(verl-bootstrap install --profile PROFILE --prefix {prefix} --with-tests)",
        )
    return tools


def _env_path(python: Path) -> str:
    """PATH with the env's bin first, as in an activated env: verl's tests run `python3 ...`."""
    return os.pathsep.join([str(python.parent), os.environ.get("PATH", os.defpath)])


# The files pytest reads its settings from, in the order it looks for them, with the section that
# makes a file count (None: the file counts as it is).
def _tools(python: Path) -> dict[str, bool]:
    done = proc.capture([str(python), "-c", _TOOLS_PROBE], env=_ENV, timeout=120)
    try:
        found: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise StepFailed(f"{python} does not run: {done.stderr.strip()[-500:]}") from None
    return found
