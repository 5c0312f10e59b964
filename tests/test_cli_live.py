"""What a person sees on a terminal: the real CLI driven in a pseudo-terminal. A quiet step
(verify, which prints nothing for seconds) shows a live line that ticks on its own; piped or with
NO_COLOR, plain lines without redraws or colour; a `n` at a prompt is an answer, not an error."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest
from cpuenv import Installed
from lockfixtures import CUTOFF, HOST_XY
from scaffold import TOOL

from verl_bootstrap.paths import LOCKFILES_DIR

_TICK = re.compile(r"\r\x1b\[K(?:\x1b\[2m)?[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] verify +(\d+)s │")


def _in_pty(
    argv: list[str],
    *,
    answer: bytes | None = None,
    env: dict[str, str] | None = None,
    limit: float = 600,
    cwd: Path | None = None,
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
        cwd=cwd,
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
    code, shown = _in_pty([str(TOOL), "verify", "--prefix", str(cpu_env_session.prefix)])
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
        [str(TOOL), "verify", "--prefix", str(cpu_env_session.prefix)], env={"NO_COLOR": "1"}
    )
    assert "\x1b[3" not in shown  # no colour, though the ticking line stays
    piped = subprocess.run(
        [str(TOOL), "verify", "--prefix", str(cpu_env_session.prefix)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0
    assert "\r" not in piped.stderr + piped.stdout
    assert "\x1b" not in piped.stderr + piped.stdout
    assert not _TICK.search(piped.stderr)


def test_color_always_colours_a_pipe(cpu_env_session: Installed) -> None:
    argv = [str(TOOL), "verify", "--prefix", str(cpu_env_session.prefix), "--color", "always"]
    piped = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert "\x1b[32m✓\x1b[0m" in piped.stdout


def test_answering_no_at_the_prompt_changes_nothing_and_exits_0(
    cpu_env_session: Installed,
) -> None:
    prefix = cpu_env_session.prefix
    before = (prefix / ".verl-bootstrap" / "state.json").read_bytes()
    code, shown = _in_pty(
        [str(TOOL), "--prefix", str(prefix), "--verl-ref", "v0.9.0"], answer=b"n\n"
    )
    assert "apply these changes? [y/N]" in shown
    assert code == 0, shown
    assert f"{prefix} was not changed" in shown
    assert "error:" not in shown
    assert (prefix / ".verl-bootstrap" / "state.json").read_bytes() == before


_TESTS = """\
import pytest


def test_passes():
    pass


def test_fails():
    assert False, "as written"


@pytest.mark.skip(reason="as written")
def test_skipped():
    pass


def test_passes_too():
    pass
"""


def _checkout(tmp_path: Path) -> Path:
    """A checkout with one CPU test file: two tests pass, one fails, one is skipped."""
    checkout = tmp_path / "verl"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_live_on_cpu.py").write_text(_TESTS)
    return checkout


_COUNTS = re.compile(r"test +\d+s │ (\d+) passed, (\d+) failed, (\d+) skipped · ([^\s\x1b]+)")


def test_verls_tests_show_a_live_line_with_the_counts(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    argv = [str(TOOL), "test", "--prefix", str(cpu_env_session.prefix)]
    code, shown = _in_pty([*argv, "--checkout", str(_checkout(tmp_path))])
    assert code == 0, shown  # the failure is the test's own, not the env's
    counts = [(int(p), int(f), int(s)) for p, f, s, _ in _COUNTS.findall(shown)]
    # a redraw as each test's outcome comes, in the order the tests ran (the ticker repeats it)
    assert list(dict.fromkeys(counts)) == [(1, 0, 0), (1, 1, 0), (1, 1, 1), (2, 1, 1)], shown
    assert "passed 2, failed 1, error 0, skipped 1" in shown


def test_verls_tests_take_node_ids_and_k(cpu_env_session: Installed, tmp_path: Path) -> None:
    checkout = str(_checkout(tmp_path))
    argv = [str(TOOL), "test", "--prefix", str(cpu_env_session.prefix), "--checkout", checkout]
    _, by_id = _in_pty([*argv, "tests/test_live_on_cpu.py::test_fails"])
    assert {c[3] for c in _COUNTS.findall(by_id)} == {"tests/test_live_on_cpu.py::test_fails"}
    assert "passed 0, failed 1, error 0, skipped 0" in by_id
    _, by_k = _in_pty([*argv, "-k", "passes"])
    assert "passed 2, failed 0, error 0, skipped 0" in by_k, by_k[-2000:]
    piped = subprocess.run([*argv, "-k", "passes"], capture_output=True, text=True, check=False)
    assert "\r" not in piped.stderr and "@@verl-bootstrap" not in piped.stdout + piped.stderr


@pytest.mark.real_slow  # a real lock of the cpu profile
def test_lock_shows_a_live_line_the_count_the_changes_and_where_it_wrote(
    verl_repo_session: Path, tmp_path: Path
) -> None:
    shipped = LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml"
    before = shipped.read_bytes()
    argv = [str(TOOL), "lock", "--profile", "cpu", "--cuda", "cpu", "--python-version", HOST_XY]
    argv += ["--exclude-newer", CUTOFF, "--verl-source", str(verl_repo_session)]
    code, shown = _in_pty(argv, cwd=tmp_path)
    assert code == 0, shown
    assert re.search(r"⠋ lock +\d+s │ resolving cpu cpu \(linux-64\)", shown), shown
    assert re.search(r"resolved \d+ packages in \d+\.\ds", shown), shown
    assert "a new lockfile (no previous one to compare with)" in shown
    assert "wrote lockfiles/cpu/cpu-linux-64.lock.yaml" in shown  # the current folder's
    written = tmp_path / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
    assert shipped.read_bytes() == before  # the tool's own lockfile is never the default
    # a version changed by hand: a re-lock keeps it where it still fits (as uv keeps a lock's
    # versions); --upgrade resolves afresh and names the change, from and to
    text = written.read_text()
    pinned = re.search(r"name: msgspec\n\s+source: \S+\n\s+version: (\S+)", text)
    assert pinned, text[:2000]
    written.write_text(text.replace(pinned.group(0), pinned.group(0).replace(pinned[1], "0.0.1")))
    code, again = _in_pty([*argv, "--upgrade"], cwd=tmp_path)
    assert code == 0, again
    assert f"msgspec: 0.0.1 → {pinned[1]}" in again, again
    assert "wrote lockfiles/cpu/cpu-linux-64.lock.yaml" in again
