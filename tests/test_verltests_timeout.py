"""`verl-bootstrap test` bounds its run: a hung test file is stopped and reported as a timeout.

The env is the session's real cpu install; the test files are tiny stand-ins for verl's, one of
which hangs (in a test, or while it is imported). The run's `--timeout` stops pytest for real:
the test that passed before it is still counted, the hung one is a failure of class `timeout`,
the file after it is listed as not reached, the hung process is gone, and the command fails
(a stopped run did not prove the rest). A test's own limit (`--test-timeout`) needs
pytest-timeout: a real env made here with it shows a slow test reported as a timeout while the
run goes on; the cpu env, which lacks it, is told so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpuenv import Installed
from test_verltests_real import run_test

from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED
from verl_bootstrap.installer.cmdline import uv_binary

PASSES = "def test_passes():\n    pass\n"
SLEEPS = "import os, time\n\n\ndef test_sleeps():\n    {pid}\n    time.sleep(600)\n"
RECORD_PID = "open(os.environ['PID_FILE'], 'w').write(str(os.getpid()))"


def checkout(root: Path, hung: str) -> Path:
    tests = root / "verl" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_a_passes_on_cpu.py").write_text(PASSES)
    (tests / "test_b_hangs_on_cpu.py").write_text(hung)
    (tests / "test_c_after_on_cpu.py").write_text(PASSES)
    return root / "verl"


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_hung_test_is_stopped_and_reported_as_a_timeout(
    cpu_env_session: Installed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PID_FILE", str(tmp_path / "pid"))
    source = checkout(tmp_path, SLEEPS.format(pid=RECORD_PID))
    started = time.monotonic()
    code, body = run_test(
        ["--prefix", str(cpu_env_session.prefix), "--checkout", str(source), "--timeout", "20"]
    )
    assert time.monotonic() - started < 20 + 40  # the limit, then the interrupt's grace
    assert code == EXIT_STEP_FAILED
    assert (body["ok"], body["timed_out"]) == (False, True)
    assert body["counts"] == {"passed": 1, "failed": 0, "error": 0, "skipped": 0, "timeout": 1}
    (failure,) = body["failures"]
    assert failure["nodeid"] == "tests/test_b_hangs_on_cpu.py::test_sleeps"
    assert (failure["cls"], failure["rule"], failure["outcome"]) == (
        "timeout",
        "time-limit",
        "timeout",
    )
    assert "(>20s)" in failure["line"]
    assert body["by_class"]["timeout"] == 1
    assert body["not_reached"] == ["tests/test_c_after_on_cpu.py"]
    assert gone(int((tmp_path / "pid").read_text()))


def test_an_interrupted_run_is_not_a_finished_one(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    # Found in a real run: pytest stopped by a SIGINT (a user's Ctrl-C, a job scheduler) still
    # writes what it has, and the run was reported as finished with no env problem.
    interrupts = (
        "import os, signal\n\n\ndef test_sleeps():\n    os.kill(os.getpid(), signal.SIGINT)\n"
    )
    source = checkout(tmp_path, interrupts)
    code, body = run_test(["--prefix", str(cpu_env_session.prefix), "--checkout", str(source)])
    assert code == EXIT_STEP_FAILED
    assert (body["ok"], body["interrupted"], body["timed_out"]) == (False, True, False)
    assert body["counts"]["passed"] == 1
    (failure,) = body["failures"]
    assert failure["nodeid"] == "tests/test_b_hangs_on_cpu.py::test_sleeps"
    assert (failure["cls"], failure["rule"]) == ("other", "interrupted")
    assert body["not_reached"] == ["tests/test_c_after_on_cpu.py"]


def test_a_file_that_hangs_while_imported_is_named(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    source = checkout(tmp_path, "import time\n\ntime.sleep(600)\n")
    code, body = run_test(
        ["--prefix", str(cpu_env_session.prefix), "--checkout", str(source), "--timeout", "15"]
    )
    assert code == EXIT_STEP_FAILED
    (failure,) = body["failures"]
    assert (failure["nodeid"], failure["cls"]) == ("tests/test_b_hangs_on_cpu.py", "timeout")
    # collection stopped in b: nothing ran, so a and c were not reached either
    assert body["not_reached"] == ["tests/test_a_passes_on_cpu.py", "tests/test_c_after_on_cpu.py"]


def test_a_test_limit_needs_pytest_timeout_in_the_env(
    cpu_env_session: Installed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from verl_bootstrap import cli  # noqa: PLC0415

    source = checkout(tmp_path, PASSES)
    code = cli.main(
        [
            "test",
            "--prefix",
            str(cpu_env_session.prefix),
            "--checkout",
            str(source),
            "--test-timeout",
            "5",
        ]
    )
    assert code == EXIT_STEP_FAILED
    assert "--test-timeout needs pytest-timeout" in capsys.readouterr().err


@pytest.fixture(scope="module")
def env_with_pytest_timeout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real env holding pytest and pytest-timeout (from the default index, as any install)."""
    prefix = tmp_path_factory.mktemp("timeout-env") / "env"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(prefix / "bin" / "python"),
            "pytest",
            "pytest-timeout",
        ],
        check=True,
    )
    return prefix


def test_a_test_past_its_own_limit_is_a_timeout_and_the_run_goes_on(
    env_with_pytest_timeout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PID_FILE", str(tmp_path / "pid"))
    source = checkout(tmp_path, SLEEPS.format(pid=RECORD_PID))
    code, body = run_test(
        ["--prefix", str(env_with_pytest_timeout), "--checkout", str(source), "--test-timeout", "3"]
    )
    assert code == EXIT_OK  # the run finished; a slow test is reported, not an env problem
    assert (body["timed_out"], body["not_reached"]) == (False, [])
    assert body["counts"]["passed"] == 2
    (failure,) = body["failures"]
    assert (failure["outcome"], failure["cls"], failure["rule"]) == (
        "failed",
        "timeout",
        "time-limit",
    )
    assert "from pytest-timeout" in failure["line"]


# A test hung in native code: a default pthread mutex locked twice by the same thread waits
# forever inside glibc, which no signal interrupts, so pytest-timeout's alarm never runs.
HANGS_IN_C = (
    "import ctypes, os\n\n\ndef test_hangs_in_c():\n    {pid}\n"
    "    libc = ctypes.CDLL(None)\n    mutex = ctypes.create_string_buffer(64)\n"
    "    libc.pthread_mutex_lock(mutex)\n    libc.pthread_mutex_lock(mutex)\n"
)


def test_a_test_hung_in_native_code_is_stopped_at_its_limit_and_the_run_goes_on(
    env_with_pytest_timeout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PID_FILE", str(tmp_path / "pid"))
    source = checkout(tmp_path, HANGS_IN_C.format(pid=RECORD_PID))
    started = time.monotonic()
    args = ["--prefix", str(env_with_pytest_timeout), "--checkout", str(source)]
    code, body = run_test([*args, "--test-timeout", "3", "--timeout", "90"])
    assert time.monotonic() - started < 60  # its limit and the watchdog's margin, not --timeout
    assert code == EXIT_OK  # the run finished: the test after it ran too
    assert (body["timed_out"], body["not_reached"]) == (False, [])
    assert body["counts"]["passed"] == 2 and body["counts"]["timeout"] == 1
    (failure,) = body["failures"]
    assert failure["nodeid"] == "tests/test_b_hangs_on_cpu.py::test_hangs_in_c"
    assert (failure["outcome"], failure["cls"], failure["rule"]) == (
        "timeout",
        "timeout",
        "time-limit",
    )
    assert "--test-timeout 3" in failure["line"]
    assert gone(int((tmp_path / "pid").read_text()))
