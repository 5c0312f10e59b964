"""Run verl's own CPU test files from an env's checkout, in the env's interpreter, and classify.

verl's CPU workflow runs `pytest --asyncio-mode=auto tests/` with `python_files = *_on_cpu.py`;
this runs the same files (`tests/**/*_on_cpu.py` of the checkout: a git checkout has them all,
a release sdist a subset), without `-x`, so that every failure is seen and classified.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.envs.base import env_python
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.events import emit
from verl_bootstrap.verltests.classify import (
    CLASSES,
    Verdict,
    classify,
    interrupted_here,
    stopped_at_time_limit,
)
from verl_bootstrap.verltests.junit import Case, read_junit

__all__ = ["Failure", "SuiteReport", "find_test_files", "run_suite"]

PATTERN = "*_on_cpu.py"
_RUN = ("passed", "failed", "error", "skipped", "timeout")
_COLLECT_ONLY = ("collected", "error", "timeout")
_TOOLS = ("pytest", "pytest_asyncio", "pytest_rerunfailures", "pytest_timeout")
PLUGIN = "verl_bootstrap_progress"  # the module name progress_plugin.py gets in the run
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
    notes = _limit_notes(prefix, test_timeout, plugin=plugin)
    for note in notes:
        emit(note, kind=("note",), step="test")
    env = {**_ENV, **({} if allow_downloads else _OFFLINE), "PATH": _env_path(python)}
    with tempfile.TemporaryDirectory(prefix="verl-tests-") as scratch:
        where = Path(scratch)
        args = _pytest_args(
            python,
            where / "junit.xml",
            targets or files,
            tools=tools,
            settings=_confined_to(checkout, scratch=where),
            collect_only=collect_only,
            test_timeout=test_timeout,
            keyword=keyword,
        )
        env = {**env, **_with_plugin(where), **_watched(where, test_timeout, plugin=plugin)}
        deadline = None if timeout is None else time.monotonic() + timeout
        tally, cases = _Tally(), tuple[Case, ...]()
        while True:  # again after each test the watchdog ended, without the tests started
            left = None if deadline is None else max(1.0, deadline - time.monotonic())
            done = proc.run(
                args,
                log_path=log_path,
                env=env,
                cwd=checkout,
                check=False,
                keep_output=True,
                timeout=left,
                on_line=tally,
            )
            hung = None if done.timed_out else _hung(where, test_timeout, plugin=plugin)
            if hung is None:
                junit = where / "junit.xml"
                cases = (*cases, *(read_junit(junit) if junit.exists() else ()))
                break
            cases = (*cases, *_results(where), hung)
        interrupted = not done.timed_out and done.returncode == _INTERRUPTED
        if done.timed_out:
            cases = (
                *cases,
                _stuck(where / "progress.txt", "timeout", stopped_at_time_limit(timeout or 0.0)),
            )
        elif interrupted:
            cases = (*cases, _stuck(where / "progress.txt", "error", interrupted_here()))
    collected = _COLLECTED.findall(done.output) if collect_only else None
    if not cases and not collected:
        raise StepFailed(
            f"pytest reported no test of {len(files)} file(s) in {checkout}",
            hint=f"see its output in {log_path}",
        )
    number = int(collected[-1]) if collected else (0 if collect_only else None)
    return _report(
        checkout,
        files,
        cases,
        log_path,
        collected=number,
        timed_out=done.timed_out,
        interrupted=interrupted,
        notes=notes,
    )


def _limit_notes(prefix: Path, test_timeout: float | None, *, plugin: bool) -> tuple[str, ...]:
    """What is said of `--test-timeout` on an env without pytest-timeout: the tool's own
    watchdog bounds each test, and the env is left as its lockfile records it."""
    if test_timeout is None or plugin:
        return ()
    return (
        f"the env at {prefix} has no pytest-timeout: each test is bounded at {test_timeout:g} s "
        "by verl-bootstrap's own watchdog, which ends pytest at a test past it and starts it "
        "again after that test (the env is not changed)",
    )


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
_CONFIGS = (
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "[tool.pytest.ini_options]"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


def _confined_to(checkout: Path, *, scratch: Path) -> list[str]:
    """pytest's settings and conftest files from the checkout only, never from a folder above it.

    Without a settings file of its own (verl has none), pytest walks up from the checkout and
    takes the first one it finds: a checkout inside another project ran with that project's
    `filterwarnings = error`, and verl's own "torchtitan engine is not available" warning
    became an import error. The checkout's own settings win; else an empty file stands in.
    """
    own = next(
        (checkout / name for name, section in _CONFIGS if _is_config(checkout / name, section)),
        None,
    )
    if own is None:
        own = scratch / "pytest.ini"
        own.write_text("[pytest]\n", encoding="utf-8")
    return ["-c", str(own), f"--rootdir={checkout}", f"--confcutdir={checkout}"]


def _is_config(path: Path, section: str | None) -> bool:
    if not path.is_file():
        return False
    return section is None or section in path.read_text(encoding="utf-8", errors="replace")


def _with_plugin(scratch: Path) -> dict[str, str]:
    """Put the progress plugin where the run imports it from, and say where it writes."""
    shutil.copyfile(Path(__file__).with_name("progress_plugin.py"), scratch / f"{PLUGIN}.py")
    return {"PYTHONPATH": str(scratch), "VERL_BOOTSTRAP_PROGRESS": str(scratch / "progress.txt")}


def _watched(scratch: Path, test_timeout: float | None, *, plugin: bool) -> dict[str, str]:
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


def _hung(scratch: Path, test_timeout: float | None, *, plugin: bool) -> Case | None:
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


def _results(scratch: Path) -> tuple[Case, ...]:
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


def _stuck(progress: Path, outcome: str, message: str) -> Case:
    """The file or test the run was in when it was stopped (the plugin's last line)."""
    lines = progress.read_text(encoding="utf-8").splitlines() if progress.exists() else []
    where = lines[-1] if lines else "<pytest start-up>"
    return Case(where, outcome, message)


def _not_reached(files: tuple[str, ...], cases: tuple[Case, ...]) -> tuple[str, ...]:
    """The files no case names (JUnit names a test by its dotted module, pytest by its path)."""
    names = [c.nodeid for c in cases]

    def reached(path: str) -> bool:
        dotted = path.removesuffix(".py").replace("/", ".")
        return any(
            n.split("::")[0] == path or n.startswith((dotted + "::", dotted + ".")) for n in names
        )

    return tuple(f for f in files if not reached(f))


def _tools(python: Path) -> dict[str, bool]:
    done = proc.capture([str(python), "-c", _TOOLS_PROBE], env=_ENV, timeout=120)
    try:
        found: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise StepFailed(f"{python} does not run: {done.stderr.strip()[-500:]}") from None
    return found


def _pytest_args(
    python: Path,
    junit: Path,
    files: tuple[str, ...],
    *,
    tools: dict[str, bool],
    settings: list[str],
    collect_only: bool,
    test_timeout: float | None,
    keyword: str | None = None,
) -> list[str]:
    args = [
        str(python),
        "-m",
        "pytest",
        *settings,
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN,
        "-o",
        f"python_files={PATTERN}",
        "--continue-on-collection-errors",
        "-q",
        "-rN",
        f"--junitxml={junit}",
    ]
    if collect_only:
        args.append("--collect-only")
    if tools["pytest_asyncio"]:
        args.append("--asyncio-mode=auto")
    if test_timeout is not None and tools["pytest_timeout"]:  # else the watchdog alone
        args.append(f"--timeout={test_timeout:g}")
    if keyword:
        args += ["-k", keyword]
    return [*args, *files]


def _report(
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
