"""The env as the default: inside an activated env (VERL_BOOTSTRAP_PREFIX) verify, info, test and
doctor work on it without --prefix; doctor --prefix takes the env's own profile; the prompt shows
(verl:NAME) while it is active; a folder that is not there is said plainly; envs prune."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cpuenv import Installed
from scaffold import TOOL, run

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.installer.envs.activation import activation_script, prompt_mark
from verl_bootstrap.plan.graph import Step
from verl_bootstrap.run.state.envindex import known_prefixes, register
from verl_bootstrap.run.steps.kinds import running_label


@pytest.mark.parametrize("command", [["verify"], ["info"], ["test"]])
def test_without_any_env_the_command_says_how_to_build_one(
    command: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VERL_BOOTSTRAP_PREFIX", raising=False)
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "empty-home"))
    code, out, _ = run([*command, "--json"], capsys)
    assert code == EXIT_BAD_INPUT
    error = json.loads(out)["error"]
    assert (error["kind"], error["data"]) == ("InputError", {"envs": []})  # none built yet
    assert "verl-bootstrap --profile NAME` builds one" in error["hint"]


@pytest.mark.parametrize("command", [["verify"], ["info"], ["test"]])
def test_a_prefix_that_is_not_there_is_said_as_such(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([*command, "--prefix", str(tmp_path / "gone"), "--json"], capsys)
    assert code == EXIT_BAD_INPUT
    data = json.loads(out)["error"]["data"]
    assert data == {"prefix": str(tmp_path / "gone"), "from": "--prefix", "folder": False}


def test_info_inside_an_activated_env_takes_it(
    cpu_env_session: Installed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_PREFIX", str(cpu_env_session.prefix))
    code, out, _ = run(["info", "--json"], capsys)
    assert code == EXIT_OK
    assert json.loads(out)["prefix"] == str(cpu_env_session.prefix)


def test_doctor_on_an_env_takes_its_recorded_profile(
    cpu_env_session: Installed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_PREFIX", str(cpu_env_session.prefix))
    code, out, _ = run(["doctor", "--json", "--skip-check", "network"], capsys)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    # the profile's checks ran: the protected versions and the cpu variant's driver verdict
    assert checks["protected-versions"]["status"] == "ok", checks["protected-versions"]
    assert (checks["driver"]["status"], checks["driver"]["data"]) == ("ok", {"source": None})
    assert not any("--profile cpu" in (c.get("fix") or "") for c in checks.values())
    assert code == EXIT_OK, checks


def test_doctor_refuses_python_with_the_new_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["doctor", "--python", sys.executable], capsys)
    assert code == EXIT_BAD_INPUT
    assert "--python is spelled --env-python here" in err


def _bash(script: str) -> str:
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    return done.stdout


def test_activation_marks_the_prompt_and_deactivate_restores_it(tmp_path: Path) -> None:
    prefix = tmp_path / "rl $(touch pwned)"
    (prefix / "bin").mkdir(parents=True)
    script = tmp_path / "activate"
    script.write_text(activation_script(prefix, "bash"))
    shown = _bash(f'PS1="$ "; . "{script}"; echo "[$PS1]"; deactivate; echo "[$PS1]"')
    assert shown.splitlines() == ["[(verl:rl___touch_pwned_) $ ]", "[$ ]"]
    assert prompt_mark(prefix) == "(verl:rl___touch_pwned_) "  # nothing a prompt would expand
    quiet = _bash(f'PS1="$ "; VERL_BOOTSTRAP_NO_PROMPT=1; . "{script}"; echo "[$PS1]"')
    assert quiet.strip() == "[$ ]"


def test_envs_prune_forgets_only_the_records_of_deleted_envs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a home of its own: the session's lists the envs of earlier tests, whose folders are gone
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    for prefix in (kept, gone):
        (prefix / ".verl-bootstrap").mkdir(parents=True)
        register(prefix)
    (gone / ".verl-bootstrap").rmdir()
    gone.rmdir()
    code, out, _ = run(["envs", "prune", "--dry-run"], capsys)
    assert code == EXIT_OK
    assert f"would forget {gone}" in out
    assert gone in known_prefixes()
    code, out, _ = run(["envs", "prune", "--json"], capsys)
    assert json.loads(out)["forgotten"] == [str(gone)]
    assert gone not in known_prefixes()
    assert kept in known_prefixes()


def test_envs_list_has_a_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table's header names its columns (an env of this test's own, so it never leans on
    envs other tests left in the session's tool home)."""
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    prefix = tmp_path / "env"
    (prefix / ".verl-bootstrap").mkdir(parents=True)
    register(prefix)
    code, out, _ = run(["envs", "list", "--no-size"], capsys)
    assert code == EXIT_OK
    header = out.splitlines()[0].split()
    assert header[:4] == ["NAME", "PREFIX", "STATUS", "PROFILE"]


def test_the_summary_says_time_packages_size_and_lockfile(cpu_env_session: Installed) -> None:
    """A resumed run of the session env (every step up to date) ends with the totals; it
    changed nothing, so the size is not walked again (a run that did work shows it:
    test_env_trust.py)."""
    done = subprocess.run(
        [str(TOOL), "--prefix", str(cpu_env_session.prefix)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = done.stderr.split("summary:", 1)[1]
    assert re.search(r"\n  total +[0-9.]+s\n", summary)
    assert re.search(r"\n  env: [0-9]{2,} packages, unchanged\n", summary)
    assert "verified. Enter the env with:" in summary
    assert "\x1b" not in done.stderr  # piped: no colour


def test_the_first_protected_stage_gives_uv_no_empty_constraints(
    cpu_env_session: Installed,
) -> None:
    state = cpu_env_session.prefix / ".verl-bootstrap"
    assert (state / "protected" / "torch.txt").read_text().split() == ["torch"]
    logs = list(state.glob("logs/*/torch.log"))
    assert logs
    assert not any("does not contain any dependencies" in p.read_text() for p in logs)


def test_labels_say_what_ran(
    cpu_env_session: Installed, capsys: pytest.CaptureFixture[str]
) -> None:

    step = Step(id="install-verl", kind="install-verl", deps=(), description="from its checkout")
    assert "release sdist" in running_label(step, {"fetch-source": {"kind": "sdist"}})
    assert running_label(step, {"fetch-source": {"kind": "git"}}) == "from its checkout"
    code, out, _ = run(["plan", "--prefix", str(cpu_env_session.prefix)], capsys)
    assert code == EXIT_OK
    assert "(a CPU env: no GPU smoke test)" in out
