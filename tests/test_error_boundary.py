"""The CLI's one error boundary: no traceback for anything a user can cause.

An unexpected exception is one line naming the command and what failed, plus the path of a log
holding the (redacted) trace, exit 1; `--debug` prints the trace too. A reader that goes away
(`| head`) ends the run quietly.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from scaffold import TOOL

from verl_bootstrap import cli


def explode(*args: object, **kwargs: object) -> list[str]:
    raise RuntimeError("boom while reading https://user:s3cret@mirror.invalid/simple")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("verl_bootstrap.profile.list_profiles", explode)
    return tmp_path / "home"


def test_an_unexpected_error_is_one_line_and_a_log(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["profiles", "list"])
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.err and "s3cret" not in captured.err
    first, hint = captured.err.splitlines()
    assert first == (
        "error: `profiles` failed unexpectedly: RuntimeError: boom while reading "
        "https://***@mirror.invalid/simple"
    )
    logs = list((home / "logs").glob("crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in hint and "--debug" in hint
    trace = logs[0].read_text()
    assert "Traceback" in trace and "explode" in trace and "s3cret" not in trace
    assert oct(logs[0].stat().st_mode & 0o777) == "0o600"


def test_debug_shows_the_trace(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profiles", "list", "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "in explode" in err and "s3cret" not in err.split("error:")[1]


def test_a_closed_pipe_ends_the_run_quietly(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, as with `| head -0`
    done = subprocess.run(
        [str(TOOL), "profiles", "show", "fsdp"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    os.close(write)
    assert done.returncode == cli.EXIT_BROKEN_PIPE
    assert done.stderr == ""


def test_a_prefix_that_is_a_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("mine\n")
    assert cli.main(["plan", "--profile", "cpu", "--prefix", str(mine)]) == 2
    assert f"--prefix {mine} is a file, not a folder" in capsys.readouterr().err
    assert mine.read_text() == "mine\n"
