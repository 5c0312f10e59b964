"""The README's exit-code table, checked against every command: each command answers bad input
with 2 (and a case must be added here for a new command), a finished command with 0, a refusal
with 3. A declined prompt exits 0 (tests/test_cli_live.py answers one in a terminal)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from scaffold import TOOL, run_tool

from verl_bootstrap.cli.registry import COMMANDS, Command
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED
from verl_bootstrap.run.state.state import State

README = Path(__file__).resolve().parents[1] / "README.md"
GONE = "/nonexistent-verl-bootstrap-test"
SHORT = 300  # seconds: each case is one quick run of the real CLI


def _leaves(commands: tuple[Command, ...], path: tuple[str, ...] = ()) -> list[str]:
    found = []
    for c in commands:
        found += _leaves(c.actions, (*path, c.name)) if c.actions else [" ".join((*path, c.name))]
    return found


# one bad input per command: the input, never a typo the parser catches, where the command reads any
BAD_INPUT: dict[str, list[str]] = {
    "install": ["--profile", "nosuch"],
    "plan": ["--profile", "cpu", "--cuda", "cu999"],
    "verify": ["--prefix", GONE],
    "doctor": ["--profile", "nosuch"],
    "test": ["--prefix", GONE],
    "lock": ["--profile", "fsdp", "--cuda", "cpu"],
    "export": ["--format", "pylock", "--lockfile", f"{GONE}.yaml"],
    "bundle": ["--lockfile", f"{GONE}.yaml"],
    "update": ["--prefix", GONE],
    "envs list": ["--color", "sometimes"],  # it reads no input of the user's
    "envs prune": ["--color", "sometimes"],
    "info": ["--prefix", GONE],
    "remove": ["--prefix", GONE],
    "activate": ["--prefix", GONE],
    "run": ["--prefix", GONE, "--", "python", "-V"],
    "profiles list": ["--color", "sometimes"],
    "profiles show": ["nosuch"],
    "profiles validate": [f"{GONE}.yaml"],
    "config show": ["--config", f"{GONE}.yaml"],
    "onboard": ["--config", f"{GONE}.yaml"],
    "cluster verify": ["--prefix", "/x"],
    "cluster install": ["--prefix", "/x"],
    "cluster script": ["--slurm", "--nodes", "0", "--prefix", "/x"],
    "wheelhouse list": ["--wheelhouse", "s3://bucket/wheels"],
    "wheelhouse add": [f"{GONE}.whl", "--key", "torch=2.11.0"],
    "wheelhouse check": ["--wheelhouse", "s3://bucket/wheels"],
    "completion": ["--shell", "tcsh"],
    "kernels coverage": ["--profile", "nosuch"],
}
OK: dict[str, list[str]] = {
    "plan": ["--profile", "cpu"],
    "install": ["--profile", "cpu", "--dry-run"],
    "lock": ["--check", "--profile", "cpu"],
    "envs list": ["--no-size"],
    "envs prune": ["--dry-run"],
    "profiles list": [],
    "profiles show": ["cpu"],
    "profiles validate": ["profiles/cpu.yaml"],
    "config show": [],
    "completion": ["--shell", "bash"],
    "cluster script": ["--slurm", "--nodes", "2", "--prefix", "/x"],
    "kernels coverage": ["--profile", "sglang"],
}


def _tool(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "VERL_BOOTSTRAP_HOME": str(home / "vb")}
    return run_tool(*argv, script=TOOL, env=env, cwd=README.parent, timeout=SHORT)


def test_the_readme_table_lists_the_codes_the_tool_uses() -> None:
    table = README.read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes == {0, 1, 2, 3, 130}
    assert "declined" in table


def test_every_command_has_a_bad_input_case() -> None:
    assert sorted(BAD_INPUT) == sorted(_leaves(COMMANDS))


@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_bad_input_exits_2_with_an_error_and_a_hint(command: str, tmp_path: Path) -> None:
    done = _tool(*command.split(), *BAD_INPUT[command], home=tmp_path)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "error: " in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", sorted(OK))
def test_a_finished_command_exits_0(command: str, tmp_path: Path) -> None:
    done = _tool(*command.split(), *OK[command], home=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr


def test_a_question_with_no_terminal_to_ask_on_is_a_refusal(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / ".verl-bootstrap").mkdir(parents=True)
    State(path=prefix / ".verl-bootstrap" / "state.json", made=[".verl-bootstrap"]).save()
    done = _tool("remove", "--prefix", str(prefix), "--json", home=tmp_path)
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert json.loads(done.stdout)["error"]["data"] == {"terminal": False}
    assert prefix.is_dir()
