"""The one test scaffold: the CLI run as the tests run it, in this process or in a child one.

Every test module runs the tool through these helpers (test_layout checks that no other helper
calls `cli.main` or starts the tool): a fix to how a run is captured is made here once.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap import cli

REPO = Path(__file__).resolve().parents[1]
TOOL = Path(sys.executable).parent / "verl-bootstrap"  # the console script a user types

__all__ = [
    "REPO",
    "TOOL",
    "Ran",
    "Run",
    "invoke",
    "run",
    "run_cli",
    "run_tool",
    "tool_argv",
    "tool_json",
    "with_env",
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`verl-bootstrap ARGV` in this process: its exit code, stdout and stderr (read by capsys)."""
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@dataclass(frozen=True)
class Ran:
    """One CLI run in this process, without capsys: exit code, stdout, stderr."""

    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        """Stdout as the JSON report."""
        return json.loads(self.out)  # type: ignore[no-any-return]

    def hint(self) -> list[str]:
        """The printed resume command, as argv for `invoke`."""
        line = next(ln for ln in self.err.splitlines() if ln.startswith("resume with: "))
        words = shlex.split(line.removeprefix("resume with: "))
        assert words[0] == "verl-bootstrap"
        return words[1:]


def invoke(argv: list[str]) -> Ran:
    """`verl-bootstrap ARGV` in this process, its output caught apart from pytest's capture
    (so a fixture of any scope can run it)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return Ran(code, out.getvalue(), err.getvalue())


@dataclass(frozen=True)
class Run:
    """One CLI run with a JSON report: its exit code, the report, and what went to stderr."""

    code: int
    body: dict[str, Any]
    stderr: str

    @property
    def statuses(self) -> dict[str, str]:
        """Each step's status, by step id."""
        return {s["id"]: s["status"] for s in self.body["steps"]}

    def step(self, step_id: str) -> dict[str, Any]:
        """The report's entry for one step."""
        return next(s for s in self.body["steps"] if s["id"] == step_id)

    def log(self, step_id: str) -> str:
        """The step's log."""
        return Path(self.step(step_id)["log"]).read_text(encoding="utf-8")


def run_cli(argv: list[str]) -> Run:
    """`verl-bootstrap ARGV --json` in this process (`--json` added where ARGV lacks it); its
    report parsed."""
    done = invoke(argv if "--json" in argv else [*argv, "--json"])
    assert done.out, done.err  # no report: what the tool said instead
    return Run(code=done.code, body=json.loads(done.out), stderr=done.err)


def tool_argv(*args: str | Path, script: Path | None = None) -> list[str]:
    """The command line a user runs: the console script `script`, or `python -m verl_bootstrap`
    (this interpreter, so the child runs this checkout whatever PATH holds)."""
    head = [str(script)] if script is not None else [sys.executable, "-m", "verl_bootstrap"]
    return [*head, *map(str, args)]


def run_tool(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = REPO,
    timeout: float | None = 600,
    script: Path | None = None,
    prefix: Sequence[str] = (),
    preexec: Callable[[], object] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`verl-bootstrap ARGS` in a fresh process, as a user runs it; never raises on its exit code.

    `env` is the child's whole environment (None: this one's); `cwd` None keeps this one's;
    `prefix` goes before the command (e.g. `unshare -n`, or `setpriv` to run as another user).
    """
    return subprocess.run(
        [*prefix, *tool_argv(*args, script=script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=None if env is None else dict(env),
        check=False,
        preexec_fn=preexec,
    )


def tool_json(
    *args: str | Path, timeout: float, add_env: Mapping[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    """`run_tool` in the cwd the test runs in, `add_env` on top of this environment; its JSON
    report parsed ({} when stdout holds none: the caller sees why in stderr)."""
    done = run_tool(*args, env=with_env(**(add_env or {})), cwd=None, timeout=timeout)
    try:
        body: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    except ValueError:
        body = {}
    return done.returncode, body, done.stderr


def with_env(**extra: str) -> dict[str, str]:
    """This process's environment with `extra` on top."""
    return {**os.environ, **extra}


def process_scratch(prefix: str) -> Path:
    """A new private folder under the temp dir that lives as long as this test process (removed
    at exit): for what a process builds once and its tests share (a lab, a cache)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
