"""`verl-bootstrap test` bounds its run: a hung test file is stopped and reported as a timeout.

The env is the session's real cpu install; the test files are tiny stand-ins for verl's, one of
which hangs (in a test, or while it is imported). The run's `--timeout` stops pytest for real:
the test that passed before it is still counted, the hung one is a failure of class `timeout`,
the file after it is listed as not reached, the hung process is gone, and the command fails
(a stopped run did not prove the rest). A test's own limit (`--test-timeout`) is
pytest-timeout's where the env has it (a real env made here with it shows a slow test reported
as a timeout while the run goes on), else the tool's own watchdog's, said on screen, with the
env left as it is (verl main's cpu slice has no pytest-timeout).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpuenv import Installed
from scaffold import run_tool
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


def _test_env(root: Path, *packages: str) -> Path:
    """A real env holding `packages` (from the default index, as any install)."""
    prefix = root / "env"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    python = str(prefix / "bin" / "python")
    subprocess.run([uv_binary(), "pip", "install", "-q", "--python", python, *packages], check=True)
    return prefix


@pytest.fixture(scope="module")
def env_with_pytest_timeout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _test_env(tmp_path_factory.mktemp("timeout-env"), "pytest", "pytest-timeout")


@pytest.fixture(scope="module")
def env_without_pytest_timeout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest alone, as verl main's cpu slice has it (no pytest-timeout)."""
    return _test_env(tmp_path_factory.mktemp("no-timeout-env"), "pytest")


def _has_pytest_timeout(prefix: Path) -> bool:
    probe = "import importlib.util as u; print(u.find_spec('pytest_timeout') is not None)"
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True
    )
    return done.stdout.strip() == "True"


def test_a_test_limit_without_pytest_timeout_is_the_tools_own_watchdog(
    env_without_pytest_timeout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verl main's cpu slice carries no pytest-timeout: the limit still holds, with no hand step
    monkeypatch.setenv("PID_FILE", str(tmp_path / "pid"))
    source = checkout(tmp_path, SLEEPS.format(pid=RECORD_PID))
    started = time.monotonic()
    args = ["--prefix", str(env_without_pytest_timeout), "--checkout", str(source)]
    code, body = run_test([*args, "--test-timeout", "3", "--timeout", "120"])
    assert time.monotonic() - started < 60  # its limit, then pytest started again: not --timeout
    assert code == EXIT_OK  # the run finished: the test after it ran too
    assert (body["timed_out"], body["not_reached"]) == (False, [])
    assert body["counts"]["passed"] == 2 and body["counts"]["timeout"] == 1
    (failure,) = body["failures"]
    assert failure["nodeid"] == "tests/test_b_hangs_on_cpu.py::test_sleeps"
    assert (failure["outcome"], failure["cls"], failure["rule"]) == (
        "timeout",
        "timeout",
        "time-limit",
    )
    assert "(>3s)" in failure["line"]  # at the limit itself: no plugin's alarm goes first
    assert "verl-bootstrap's watchdog stopped it" in failure["line"]
    (note,) = body["notes"]
    assert "has no pytest-timeout: each test is bounded at 3 s" in note
    assert gone(int((tmp_path / "pid").read_text()))
    assert not _has_pytest_timeout(env_without_pytest_timeout)  # the env is left as it was


def test_the_watchdog_alone_is_said_on_screen_and_stops_a_test_hung_in_native_code(
    env_without_pytest_timeout: Path, tmp_path: Path
) -> None:
    pid = tmp_path / "pid"
    source = checkout(tmp_path, HANGS_IN_C.format(pid=RECORD_PID))
    args = ["test", "--prefix", env_without_pytest_timeout, "--checkout", source]
    env = {**os.environ, "PID_FILE": str(pid)}
    done = run_tool(*args, "--test-timeout", "3", "--timeout", "120", env=env, timeout=120)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert f"the env at {env_without_pytest_timeout} has no pytest-timeout" in said
    assert "passed 2, failed 0, error 0, skipped 0, timeout 1" in done.stdout
    assert "[timeout] tests/test_b_hangs_on_cpu.py::test_hangs_in_c" in done.stdout
    assert gone(int(pid.read_text()))


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


# verl's Ray tests call ray.init() with no address; a suite that joined the user's cluster (or
# another run's: seen with verl main's suite beside another env's Ray) fails on its versions
OWN_RAY = (
    "import os, stat\n\n\ndef test_own_ray():\n"
    "    assert os.environ['RAY_ADDRESS'] == 'local'\n"
    "    folder = os.environ['RAY_TMPDIR']\n"
    "    assert os.path.basename(folder).startswith('vb-ray-')\n"
    "    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700\n"
    "    assert 'RAY_AUTH_TOKEN' not in os.environ\n"
    "    open(os.environ['PID_FILE'], 'w').write(folder)\n"
)


def test_the_suite_gets_a_ray_of_its_own_whatever_the_shell_points_at(
    env_without_pytest_timeout: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "folder"
    source = checkout(tmp_path, OWN_RAY)
    args = ["test", "--prefix", env_without_pytest_timeout, "--checkout", source, "--json"]
    shell = {
        "RAY_ADDRESS": "10.0.0.1:6379",
        "RAY_AUTH_TOKEN": "the-clusters",
        "PID_FILE": str(seen),
    }
    done = run_tool(*args, "--timeout", "120", env={**os.environ, **shell}, timeout=180)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert '"passed": 3' in done.stdout
    assert not Path(seen.read_text()).exists()  # the run's Ray folder goes with the run
