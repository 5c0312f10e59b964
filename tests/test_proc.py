"""The one subprocess wrapper: logs, tails, redaction, interrupts, and children that die with us."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, Interrupted


def test_output_goes_to_the_log_with_secrets_masked(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    done = proc.run(
        [sys.executable, "-c", "print('from https://user:s3cret@mirror.lab/simple')"],
        log_path=log,
        keep_output=True,
    )
    assert "s3cret" not in log.read_text() and "s3cret" not in done.output
    assert "https://***@mirror.lab/simple" in done.tail[-1]


def test_a_failing_command_raises_with_its_tail_and_log(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    with pytest.raises(CommandFailed) as info:
        proc.run([sys.executable, "-c", "print('boom'); raise SystemExit(4)"], log_path=log)
    assert info.value.returncode == 4
    assert info.value.tail == ["boom"]
    assert info.value.log_path == str(log)


def test_no_child_starts_after_an_interrupt_until_a_new_run() -> None:
    proc.terminate_all()
    try:
        with pytest.raises(Interrupted):
            proc.run([sys.executable, "-c", "pass"])
    finally:
        proc.allow_new_children()
    assert proc.run([sys.executable, "-c", "pass"]).returncode == 0


def test_children_die_when_verl_bootstrap_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import threading, time
        from verl_bootstrap import proc
        cmd = ["sh", "-c", "echo $$ > {marker}; exec sleep 60"]
        threading.Thread(target=lambda: proc.run(cmd), daemon=True).start()
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child = int(marker.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived a SIGKILLed verl-bootstrap"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = (
        Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}").exists() else "X"
    )
    return status != "Z"


def test_a_command_that_exits_leaving_a_process_on_its_output_ends_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a test suite's leftover worker keeps the output pipe open after pytest exits (seen with
    # verl's CPU suite): the run ends once the leftovers had their grace, and they are stopped
    monkeypatch.setattr(proc, "_LEFTOVER_SECONDS", 1.0)
    marker = tmp_path / "leftover.pid"
    script = f"sleep 300 & echo $! > {marker}; echo suite done"
    log = tmp_path / "suite.log"
    began = time.monotonic()
    done = proc.run(["sh", "-c", script], log_path=log, keep_output=True)
    assert time.monotonic() - began < 60  # not the leftover's 300 s
    assert done.returncode == 0 and done.output == "suite done"
    leftover = int(marker.read_text())
    deadline = time.monotonic() + 10
    while _alive(leftover) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(leftover)
    assert "stopping what it left running" in log.read_text()


def test_a_command_whose_output_closes_at_exit_is_not_held_for_the_grace(tmp_path: Path) -> None:
    began = time.monotonic()
    done = proc.run([sys.executable, "-c", "print('a'); print('b', end='')"], keep_output=True)
    assert done.output == "a\nb"  # the last line without its newline is kept too
    assert time.monotonic() - began < proc._LEFTOVER_SECONDS
