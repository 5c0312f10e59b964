"""Envs by name: a real cpu env reached as `cpu` (its folder's name) wherever a prefix is taken,
the only env when there is one, a clear refusal listing the names when it is ambiguous; inside an
activated env plan and install default to it; `run NAME -- CMD` runs a command in the env with its
activation and passes its exit code through, leaving the caller's environment as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cpuenv import Installed
from scaffold import TOOL, run_tool

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.run.state.envindex import register


def _tool(argv: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`verl-bootstrap ARGV` as a user runs it, with `home` as the tool's home."""
    clean = {k: v for k, v in os.environ.items() if k != "VERL_BOOTSTRAP_PREFIX"}
    environ = {**clean, "VERL_BOOTSTRAP_HOME": str(home), **env}
    return run_tool(*argv, script=TOOL, env=environ, cwd=None, timeout=None)


@pytest.fixture
def home(tmp_path: Path, cpu_env_session: Installed, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tool home whose registry lists the cpu env alone (named `cpu`, by its folder)."""
    home = tmp_path / "home"
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(home))
    register(cpu_env_session.prefix)
    return home


def _fake_env(folder: Path) -> Path:
    """A second env's folder as the registry sees one (its state folder)."""
    (folder / ".verl-bootstrap").mkdir(parents=True)
    register(folder)
    return folder


def test_info_takes_the_name_the_flag_and_the_only_env(
    home: Path, cpu_env_session: Installed
) -> None:
    prefix = str(cpu_env_session.prefix)
    for argv in (["info", "cpu"], ["info", "--name", "cpu"], ["info"]):
        done = _tool([*argv, "--json"], home)
        assert done.returncode == EXIT_OK, done.stderr
        assert json.loads(done.stdout)["prefix"] == prefix


def _refusal(argv: list[str], home: Path) -> dict[str, Any]:
    """The `--json` error of a refused command (its exit code checked), by its structured
    fields: which refusal it was, not its wording."""
    done = _tool([*argv, "--json"], home)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    error: dict[str, Any] = json.loads(done.stdout)["error"]
    assert error["kind"] == "InputError"
    return error


def test_a_name_that_is_not_there_gets_did_you_mean_and_the_names(home: Path) -> None:
    error = _refusal(["info", "cpy"], home)
    assert error["data"] == {"name": "cpy", "suggestion": "cpu", "envs": ["cpu"]}


def test_with_two_envs_and_none_named_the_refusal_lists_both(
    home: Path, tmp_path: Path, cpu_env_session: Installed
) -> None:
    other = _fake_env(tmp_path / "rl")
    error = _refusal(["verify"], home)
    listed = {(e["name"], e["prefix"]) for e in error["data"]["envs"]}
    assert listed == {("cpu", str(cpu_env_session.prefix)), ("rl", str(other))}
    assert "`verl-bootstrap verify NAME`" in error["hint"]  # the hint names the command


def test_two_envs_of_one_name_are_refused_naming_both_folders(
    home: Path, tmp_path: Path, cpu_env_session: Installed
) -> None:
    twin = _fake_env(tmp_path / "elsewhere" / "cpu")
    error = _refusal(["info", "cpu"], home)
    assert error["data"]["name"] == "cpu"
    assert set(error["data"]["prefixes"]) == {str(twin), str(cpu_env_session.prefix)}
    assert "--prefix" in error["hint"]


def test_remove_by_name_shows_what_would_go(home: Path, cpu_env_session: Installed) -> None:
    done = _tool(["remove", "cpu", "--dry-run"], home)
    assert done.returncode == EXIT_OK, done.stderr
    assert f"remove {cpu_env_session.prefix} (" in done.stderr
    assert cpu_env_session.prefix.is_dir()
    bare = _refusal(["remove"], home)  # a deletion never falls back to "the only env"
    assert bare["data"] == {"env": None, "prefix": None}


def test_verify_by_name(home: Path) -> None:
    done = _tool(["verify", "cpu", "--json"], home)
    assert done.returncode == EXIT_OK, done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_plan_inside_an_activated_env_plans_that_env(
    home: Path, cpu_env_session: Installed
) -> None:
    prefix = str(cpu_env_session.prefix)
    inside = _tool(["plan", "--json"], home, VERL_BOOTSTRAP_PREFIX=prefix)
    assert inside.returncode == EXIT_OK, inside.stderr
    assert json.loads(inside.stdout)["prefix"] == prefix
    same = _tool(["plan", "--profile", "cpu", "--json"], home, VERL_BOOTSTRAP_PREFIX=prefix)
    assert json.loads(same.stdout)["prefix"] == prefix
    other = _tool(
        ["plan", "--profile", "fsdp", "--cuda", "cu128", "--json"],
        home,
        VERL_BOOTSTRAP_PREFIX=prefix,
    )
    assert other.returncode == EXIT_OK, other.stderr
    assert json.loads(other.stdout)["prefix"] == str(home / "envs" / "fsdp")


def test_plan_by_name_finds_the_env_or_names_a_new_one(
    home: Path, cpu_env_session: Installed
) -> None:
    found = _tool(["plan", "--name", "cpu", "--json"], home)
    assert found.returncode == EXIT_OK, found.stderr
    assert json.loads(found.stdout)["prefix"] == str(cpu_env_session.prefix)
    new = _tool(["plan", "--name", "scratch", "--profile", "cpu", "--json"], home)
    assert json.loads(new.stdout)["prefix"] == str(home / "envs" / "scratch")


_PROBE = (
    "import os, sys; print(sys.prefix); print(os.environ['VIRTUAL_ENV']); "
    "print(os.environ.get('LD_LIBRARY_PATH', '')); sys.exit(int(sys.argv[1]))"
)


def test_run_runs_the_command_in_the_env_and_passes_its_exit_code(
    home: Path, tmp_path: Path, cpu_env_session: Installed
) -> None:
    foreign, own = tmp_path / "system-cudnn", tmp_path / "plain-libs"
    foreign.mkdir()
    own.mkdir()
    (foreign / "libcudnn.so.9").write_bytes(b"")
    library_path = f"{foreign}:{own}"
    done = _tool(
        ["run", "cpu", "--", "python", "-c", _PROBE, "7"], home, LD_LIBRARY_PATH=library_path
    )
    assert done.returncode == 7, done.stderr
    env_prefix, virtual_env, seen_path = done.stdout.splitlines()
    assert Path(env_prefix) == cpu_env_session.prefix  # the env's python, from its PATH
    assert virtual_env == str(cpu_env_session.prefix)
    assert seen_path == str(own)  # the activation kept the system cuDNN off the load path
    # the caller's environment is untouched: a second run sees the same LD_LIBRARY_PATH again
    again = _tool(["run", "--", "python", "-c", _PROBE, "0"], home, LD_LIBRARY_PATH=library_path)
    assert again.returncode == 0, again.stderr


def test_run_with_no_command_or_an_unknown_one(home: Path) -> None:
    bare = _tool(["run", "cpu"], home)
    assert bare.returncode == EXIT_BAD_INPUT
    assert "run: no command given (it goes after --)" in bare.stderr
    missing = _tool(["run", "cpu", "--", "no-such-command-here"], home)
    assert missing.returncode == 127  # as a shell reports a command it cannot find
    assert "no-such-command-here" in missing.stderr


def test_test_takes_the_env_by_name_then_node_ids(home: Path, tmp_path: Path) -> None:
    checkout = tmp_path / "verl"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_n_on_cpu.py").write_text(
        "def test_one():\n    pass\n\n\ndef test_two():\n    assert False\n"
    )
    argv = ["test", "cpu", "tests/test_n_on_cpu.py::test_one", "--checkout", str(checkout)]
    done = _tool([*argv, "--json"], home)
    assert done.returncode == EXIT_OK, done.stderr
    counts = json.loads(done.stdout)["counts"]
    assert (counts["passed"], counts["failed"]) == (1, 0)
    wrong = _tool(["test", "cpu", "tests/nope_on_cpu.py::t", "--checkout", str(checkout)], home)
    assert wrong.returncode == EXIT_BAD_INPUT
    assert "not a CPU test file" in wrong.stderr


def test_envs_list_shows_each_envs_name(home: Path, cpu_env_session: Installed) -> None:
    done = _tool(["envs", "list", "--no-size", "--json"], home)
    assert done.returncode == EXIT_OK, done.stderr
    envs = json.loads(done.stdout)["envs"]
    assert [(e["name"], e["prefix"]) for e in envs] == [("cpu", str(cpu_env_session.prefix))]
    text = _tool(["envs", "list", "--no-size"], home).stdout.splitlines()
    assert text[1].split()[:2] == ["cpu", str(cpu_env_session.prefix)]


def test_bash_completes_an_envs_name(home: Path) -> None:
    bindir = Path(sys.executable).parent
    script = (
        "source <(verl-bootstrap completion --shell bash)\n"
        "COMP_LINE='verl-bootstrap verify c'; COMP_POINT=${#COMP_LINE}\n"
        'read -ra COMP_WORDS <<< "$COMP_LINE"; COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
        '_python_argcomplete verl-bootstrap "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home), "VERL_BOOTSTRAP_HOME": str(home)}
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert done.stdout.split() == ["cpu"], done.stderr
