"""Small things a user reads: help examples that name files that are there, "did you mean" for a
ref written without its v, the route line's lockfile as the user can open it, the plan saying
when verl comes from its release sdist, and a preflight fix that names a flag."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from scaffold import TOOL, run_tool

from verl_bootstrap.cli.registry import COMMANDS, Command
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.plan.doctor.checks_network import Reach, _replacement

REPO = Path(__file__).resolve().parents[1]


_tool = functools.partial(run_tool, script=TOOL, timeout=300)  # the console script, as typed


def _examples(commands: tuple[Command, ...]) -> list[str]:
    return [e for c in commands for e in (*c.examples, *_examples(c.actions))]


def test_every_shipped_file_a_help_example_names_is_there() -> None:
    named = {m for e in _examples(COMMANDS) for m in re.findall(r"(?:lockfiles|profiles)/\S+", e)}
    assert "lockfiles/cpu/cpu-linux-64.lock.yaml" in named  # verify --help's --against
    assert [n for n in named if not (REPO / n).exists()] == []


def test_a_ref_without_its_v_gets_did_you_mean(tmp_path: Path) -> None:
    done = _tool("plan", "--profile", "cpu", "--verl-ref", "0.8.0", cwd=tmp_path)
    assert done.returncode == EXIT_BAD_INPUT
    assert "no stack for verl ref '0.8.0'; did you mean v0.8.0?" in done.stderr


def test_the_route_names_the_lockfile_from_where_the_user_is(tmp_path: Path) -> None:
    inside = _tool("plan", "--profile", "cpu", cwd=REPO)
    assert inside.returncode == EXIT_OK, inside.stderr
    assert inside.stdout.startswith("from lockfile lockfiles/cpu/cpu-linux-64.lock.yaml (")
    elsewhere = _tool("plan", "--profile", "cpu", cwd=tmp_path)
    whole = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
    assert elsewhere.stdout.startswith(f"from lockfile {whole} (")  # never relative to the tool


def test_the_plan_says_when_verl_comes_from_its_release_sdist(tmp_path: Path) -> None:
    plan = _tool("plan", "--profile", "cpu", cwd=tmp_path).stdout  # the lock pins the sdist
    assert "get verl v0.9.1: its release sdist verl-0.9.1.tar.gz (sha256 " in plan
    assert "install verl from its release sdist, unpacked by fetch-source" in plan
    assert "from its checkout" not in plan
    assert "git clone" not in plan  # the sdist is downloaded and checked: no git runs
    resolving = _tool("plan", "--profile", "cpu", "--resolve", cwd=tmp_path).stdout
    assert "install verl from its checkout" in resolving  # git first; the sdist a fallback


def test_an_unreachable_channel_is_fixed_with_the_channel_flag() -> None:
    reach = Reach("channel:conda-forge", "https://conda.example/conda-forge", "fail", "refused")
    fix = _replacement(reach)
    assert "--channel URL_OR_PATH" in fix and "env.channels" not in fix
