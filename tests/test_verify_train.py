"""`verify --train sft|rl` on a real cpu env (verl 0.9.1): a real verl training step, offline,
with the tool's CPU plugin; its loss, weight change, log-prob agreement and resume asserted.

The RL level is marked `train_rl`: one GRPO step and its resume take minutes on a shared 2-core
host (Ray and the workers start twice); a targeted run may skip it with `-m "not train_rl"`. The
whole module is real_slow (tests/conftest.py): `make test-real` runs it, CI too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpuenv import Installed, install_cpu_env
from scaffold import run_cli

from verl_bootstrap import cli
from verl_bootstrap.errors import InputError
from verl_bootstrap.paths import state_file
from verl_bootstrap.verify.train import LOGPROB_TOLERANCE, train_step


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Installed:
    """This module's own cpu env: training writes checkpoints and a record into it."""
    installed = install_cpu_env(tmp_path_factory, verl_repo_session)
    assert installed.first.code == 0, installed.first.stderr
    return installed


def _checks(body: dict[str, object]) -> dict[str, dict[str, object]]:
    train = body["train"]
    assert isinstance(train, dict)
    return {c["name"]: c for c in train["checks"]}


def _recorded(prefix: Path, level: str) -> dict[str, object]:
    train: dict[str, dict[str, object]] = json.loads(state_file(prefix).read_text())["train"]
    return train[level]


def test_sft_step_trains_saves_and_resumes(env: Installed) -> None:
    run = run_cli(["verify", "--prefix", str(env.prefix), "--train", "sft", "--json"])
    assert run.code == 0, run.body
    train = run.body["train"]
    assert train["route"] == "cpu"
    checks = _checks(run.body)
    assert {n: c["status"] for n, c in checks.items()} == {
        "loss": "ok",
        "gradient": "ok",
        "weights changed": "ok",
        "resume": "ok",
    }
    figures = train["figures"]
    assert math.isfinite(figures["loss"]) and figures["loss"] > 0
    assert figures["weights"]["changed"] == figures["weights"]["compared"] > 0
    assert figures["weights"]["max_abs_delta"] > 0
    assert "global_step_1" in checks["resume"]["detail"]
    recorded = _recorded(env.prefix, "sft")
    assert recorded["ok"] is True and recorded["figures"] == json.loads(json.dumps(figures))


@pytest.mark.train_rl
def test_rl_step_rewards_advantages_and_logprobs_agree(env: Installed) -> None:
    run = run_cli(["verify", "--prefix", str(env.prefix), "--train", "rl", "--json"])
    assert run.code == 0, run.body
    checks = _checks(run.body)
    assert all(c["status"] == "ok" for c in checks.values()), checks
    figures = run.body["train"]["figures"]
    assert math.isfinite(figures["policy_loss"]) and math.isfinite(figures["reward_mean"])
    assert figures["advantage_max_abs"] > 0  # the shaped reward gives the group a spread
    assert 0 <= figures["logprob_diff_max"] <= LOGPROB_TOLERANCE
    assert figures["weights"]["changed"] > 0
    assert _recorded(env.prefix, "rl")["ok"] is True


@pytest.fixture
def rollout_removed(env: Installed) -> Iterator[Path]:
    """The env with verl's rollout replica module gone (put back afterwards)."""
    module = env.prefix / "src" / "verl" / "verl" / "workers" / "rollout" / "replica.py"
    hidden = module.with_suffix(".removed")
    module.rename(hidden)
    try:
        yield module
    finally:
        hidden.rename(module)


def test_an_env_without_its_rollout_module_fails_naming_it(
    env: Installed, rollout_removed: Path
) -> None:
    report = train_step(env.prefix, "rl")
    assert not report.ok
    (check,) = report.checks
    assert check.status == "fail"
    assert "No module named 'verl.workers.rollout.replica'" in check.detail
    assert "verl.workers.rollout.llm_server" in check.detail  # the part that needs it


def test_an_unknown_level_is_bad_input(env: Installed, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["verify", "--prefix", str(env.prefix), "--train", "dpo"])
    assert code == 2
    assert "invalid choice: 'dpo'" in capsys.readouterr().err


def test_a_level_name_the_library_does_not_know_is_bad_input(env: Installed) -> None:
    with pytest.raises(InputError, match="not a level"):
        train_step(env.prefix, "dpo")


def test_a_release_without_the_platform_registry_says_why_it_cannot_train(env: Installed) -> None:
    """As verl 0.8.0 and older on a CPU: the level is skipped with the reason, not run, not ok."""
    registry = env.prefix / "src" / "verl" / "verl" / "plugin" / "platform" / "platform_manager.py"
    hidden = registry.with_suffix(".removed")
    registry.rename(hidden)
    try:
        report = train_step(env.prefix, "sft")
    finally:
        hidden.rename(registry)
    assert not report.ok
    (check,) = report.checks
    assert check.status == "skipped"
    assert "has no platform registry" in check.detail
    assert "on a GPU host it runs as is" in check.detail


def test_install_train_sft_runs_the_step_in_the_install_verify(env: Installed) -> None:
    """`install --train sft` on the installed env: every step is done already but verify, whose
    input (the training level) changed; it runs the real SFT step, kept in the step's outputs."""
    run = run_cli([*env.argv, "--train", "sft"])
    assert run.code == 0, run.body
    statuses = run.statuses
    assert statuses["verify"] == "done"
    assert {s for n, s in statuses.items() if n != "verify"} == {"skipped"}
    state = json.loads(state_file(env.prefix).read_text())
    train = state["steps"]["verify"]["outputs"]["train"]
    assert train["level"] == "sft" and train["ok"] is True and train["route"] == "cpu"
    assert train["figures"]["weights"]["changed"] > 0 and train["seconds"] > 0
