"""What a person sees on a terminal: the real CLI driven in a pseudo-terminal. A quiet step
(verify, which prints nothing for seconds) shows a live line that ticks on its own; piped or with
NO_COLOR, plain lines without redraws or colour; a `n` at a prompt is an answer, not an error."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from cpuenv import Installed

BIN = Path(sys.executable).parent
TOOL = str(BIN / "verl-bootstrap")
_TICK = re.compile(r"\r\x1b\[K(?:\x1b\[2m)?[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] verify +(\d+)s │")


def _in_pty(
    argv: list[str],
    *,
    answer: bytes | None = None,
    env: dict[str, str] | None = None,
    limit: float = 600,
) -> tuple[int, str]:
    """Run `argv` with a terminal as its stdin, stdout and stderr; what the terminal showed."""
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        argv,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, **(env or {})},
        close_fds=True,
    )
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            shown += chunk
            if answer is not None and b"[y/N]" in shown:
                os.write(leader, answer)
                answer = None
        elif child.poll() is not None:
            break
    os.close(leader)
    return child.wait(timeout=30), shown.decode(errors="replace")


def test_a_quiet_verify_shows_a_line_that_ticks_on_its_own(cpu_env_session: Installed) -> None:
    code, shown = _in_pty([TOOL, "verify", "--prefix", str(cpu_env_session.prefix)])
    assert code == 0, shown
    seconds = [int(s) for s in _TICK.findall(shown)]
    # redrawn many times a second with nothing printed by the child, the clock moving on
    assert len(seconds) > 10, shown[:2000]
    assert seconds == sorted(seconds)
    assert seconds[-1] >= 1
    assert "\x1b[32m✓\x1b[0m" in shown  # the marks in colour on a terminal
    assert shown.rstrip().endswith("verified")


def test_no_color_and_a_pipe_get_plain_text(cpu_env_session: Installed) -> None:
    _, shown = _in_pty(
        [TOOL, "verify", "--prefix", str(cpu_env_session.prefix)], env={"NO_COLOR": "1"}
    )
    assert "\x1b[3" not in shown  # no colour, though the ticking line stays
    piped = subprocess.run(
        [TOOL, "verify", "--prefix", str(cpu_env_session.prefix)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0
    assert "\r" not in piped.stderr + piped.stdout
    assert "\x1b" not in piped.stderr + piped.stdout
    assert not _TICK.search(piped.stderr)


def test_color_always_colours_a_pipe(cpu_env_session: Installed) -> None:
    argv = [TOOL, "verify", "--prefix", str(cpu_env_session.prefix), "--color", "always"]
    piped = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert "\x1b[32m✓\x1b[0m" in piped.stdout


def test_answering_no_at_the_prompt_changes_nothing_and_exits_0(
    cpu_env_session: Installed,
) -> None:
    prefix = cpu_env_session.prefix
    before = (prefix / ".verl-bootstrap" / "state.json").read_bytes()
    code, shown = _in_pty([TOOL, "--prefix", str(prefix), "--verl-ref", "v0.9.0"], answer=b"n\n")
    assert "apply these changes? [y/N]" in shown
    assert code == 0, shown
    assert f"{prefix} was not changed" in shown
    assert "error:" not in shown
    assert (prefix / ".verl-bootstrap" / "state.json").read_bytes() == before
