"""The one subprocess wrapper: every external command of verl-bootstrap runs through here.

Each command gets a log file with its full output, a tail kept in memory for error messages, and
its own process group, so an interrupt can stop the whole tree it started (pip spawns compilers).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from verl_bootstrap.errors import CommandFailed, Interrupted
from verl_bootstrap.redact import redact, redact_args
from verl_bootstrap.safety.credentials import Lifted, lift

__all__ = [
    "Completed",
    "allow_new_children",
    "capture",
    "interactive",
    "marked",
    "run",
    "terminate_all",
]

TAIL_LINES = 30
_GRACE_SECONDS = 5.0
# After a time limit: how long the command has to finish (and write its report) once
# interrupted, before its whole process group is stopped.
_INTERRUPT_GRACE_SECONDS = 30.0
# A command's output ends when every process holding its pipe has closed it, not when the command
# exits: what it left running (a test suite's Ray or multiprocessing workers) would hold the read
# forever. Once the command has exited, what it left has this long to finish writing; then its
# process group is stopped, and the read ends a grace after that even if a holder escaped it.
_LEFTOVER_SECONDS = 10.0

# Children alive right now, so an interrupt in any thread can stop every one of them.
_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()
# Set while an interrupt stops everything: no new child may start behind its back.
_stopping = threading.Event()
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Completed:
    """What a finished command left behind."""

    returncode: int
    tail: tuple[str, ...]
    output: str
    timed_out: bool = False


def child_env(overrides: Mapping[str, str | None] | None) -> dict[str, str]:
    """The environment for a child: ours, with overrides applied (None unsets a variable)."""
    env = dict(os.environ)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(
    args: Sequence[str],
    *,
    log_path: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    check: bool = True,
    keep_output: bool = False,
    timeout: float | None = None,
) -> Completed:
    """Run `args`, streaming its combined output to `log_path` and `on_line`.

    Raises CommandFailed (with the output's tail and the log path) when it exits non-zero and
    `check` is set. Past `timeout` seconds the command is interrupted (SIGINT, so that it can
    still write what it has), then its process group stopped; `timed_out` says so.
    """
    shown = shlex.join(redact_args(list(args)))
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    kept: list[str] = []
    log = log_path.open("a", encoding="utf-8") if log_path else None
    lifted: Lifted | None = None
    try:
        if log:
            log.write(f"$ {shown}\n")
            log.flush()
        proc, lifted = _start(args, env=env, cwd=cwd)
        assert proc.stdout is not None
        expired = threading.Event()
        watchdog = _watchdog(proc, timeout, expired)
        for raw in _output_lines(proc, log):
            line = redact(raw.decode("utf-8", "replace"))
            tail.append(line)
            if keep_output:
                kept.append(line)
            if log:
                log.write(line + "\n")
                log.flush()
            if on_line:
                on_line(line)
        returncode = proc.wait()
        _forget(proc)
        watchdog.cancel()
        if log:
            log.write(f"[exit {returncode}{' at the time limit' * expired.is_set()}]\n")
    finally:
        if lifted is not None:
            lifted.cleanup()
        if log:
            log.close()
    done = Completed(returncode, tuple(tail), "\n".join(kept), timed_out=expired.is_set())
    if check and returncode != 0:
        raise CommandFailed(
            f"command failed with exit code {returncode}: {shown}",
            returncode=returncode,
            tail=list(tail),
            log_path=str(log_path) if log_path else None,
        )
    return done


def _output_lines(proc: subprocess.Popen[bytes], log: TextIO | None) -> Iterator[bytes]:
    """The command's output, line by line, until its pipe closes, or until what the command
    left behind is stopped once it has exited (see _LEFTOVER_SECONDS)."""
    assert proc.stdout is not None
    fd, pending = proc.stdout.fileno(), b""
    ended: float | None = None  # when the command itself exited
    stopped = False
    while True:
        ready, _, _ = select.select([fd], [], [], 0.5)
        chunk = os.read(fd, 65536) if ready else b""
        if ready and not chunk:
            break  # every holder closed the pipe
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines
        if ended is None:
            ended = time.monotonic() if proc.poll() is not None else None
            continue
        waited = time.monotonic() - ended
        if waited > _LEFTOVER_SECONDS and not stopped:
            stopped = True
            if log:
                log.write("[the command exited; stopping what it left running]\n")
            _signal_group(proc, signal.SIGTERM)
        elif stopped and waited > _LEFTOVER_SECONDS + _GRACE_SECONDS:
            _signal_group(proc, signal.SIGKILL)
            if waited > _LEFTOVER_SECONDS + 2 * _GRACE_SECONDS:
                break  # a holder outside its group: the output is over all the same
    if pending:
        yield pending
    proc.stdout.close()


def capture(
    args: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a short command and return its stdout and stderr separately (no log file)."""
    full = child_env(env)
    lifted = lift(args, full)  # no credential in any child's argv
    try:
        return subprocess.run(
            lifted.argv,
            env={**full, **lifted.env},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        lifted.cleanup()


def marked(output: str, mark: str) -> Any:
    """The JSON a probe printed after `mark` on its last such line (None when it printed none).

    Probes print their answer on one marked line among whatever else the env prints (warnings,
    Ray's prefixed worker output), so the answer is found by its mark, from the end.
    """
    for line in reversed(output.splitlines()):
        if mark in line:
            return json.loads(line.split(mark, 1)[1])
    return None


def interactive(args: Sequence[str], *, env: Mapping[str, str | None] | None = None) -> int:
    """Run `args` on the user's own terminal (stdin, stdout and stderr ours, our process group,
    so Ctrl-C and job control reach it as they would from the shell); return its exit code, a
    signal's death as a shell reports it (128 + the signal)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the child's to answer
    try:
        child = subprocess.Popen(list(args), env=child_env(env), preexec_fn=_default_sigint)  # noqa: PLW1509 - a signal reset
        code = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    return 128 - code if code < 0 else code


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def allow_new_children() -> None:
    """Lift the stop that `terminate_all` set (a new run starts)."""
    _stopping.clear()


def terminate_all() -> None:
    """Stop every running child: SIGTERM to its process group, SIGKILL after a grace period."""
    _stopping.set()
    with _children_lock:
        procs = list(_children)
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_SECONDS
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM if verl-bootstrap itself dies (even by SIGKILL).

    SIGINT gets its default action back: run in the background (nohup, `&`), verl-bootstrap
    starts with it ignored, and a child that inherits that cannot be interrupted at a time
    limit (Python then never raises KeyboardInterrupt, and pytest writes no report).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the group stop still applies
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(
    args: Sequence[str], *, env: Mapping[str, str | None] | None, cwd: Path | None
) -> tuple[subprocess.Popen[bytes], Lifted]:
    full = child_env(env)
    lifted = lift(args, full)  # credentials go in the child's environment, never its argv
    with _children_lock:
        if _stopping.is_set():
            lifted.cleanup()
            raise Interrupted("interrupted; not starting another command")
        try:
            proc = subprocess.Popen(
                lifted.argv,
                env={**full, **lifted.env},
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so we can stop its whole tree
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - a signal reset and a prctl call
            )
        except BaseException:
            lifted.cleanup()
            raise
        _children.add(proc)
    return proc, lifted


def _watchdog(
    proc: subprocess.Popen[bytes], timeout: float | None, expired: threading.Event
) -> threading.Timer:
    """A timer that stops `proc` once `timeout` seconds have passed (None: never started)."""
    timer = threading.Timer(timeout or 0.0, _stop_late, args=(proc, expired))
    timer.daemon = True
    if timeout is not None:
        timer.start()
    return timer


def _stop_late(proc: subprocess.Popen[bytes], expired: threading.Event) -> None:
    """Interrupt the command alone first (it may write its report), then stop its whole tree."""
    expired.set()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_INTERRUPT_GRACE_SECONDS)
    _signal_group(proc, signal.SIGTERM)  # what it started (and left behind) goes too
    time.sleep(_GRACE_SECONDS)
    _signal_group(proc, signal.SIGKILL)


def _forget(proc: subprocess.Popen[bytes]) -> None:
    with _children_lock:
        _children.discard(proc)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
