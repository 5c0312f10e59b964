"""The install's verify and its training step (`install --train`): what the plan shows, and the
rule that keeps the RL step in a GPU install's verify while it costs under a tenth of the install.

No GPU here: the GPU hosts are recorded real `nvidia-smi` outputs (tests/data/nvidia), parsed by
the tool's own parser, as tests/test_plan.py does; the plan is compiled exactly as the CLI does.
The training step itself runs for real in tests/test_verify_train.py (CPU) and
tests/test_train_gpu_heavy.py (GPU).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nvidiatext import parse_smi_table

from verl_bootstrap import cli
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.plan.stepcontract import VerifyInputs
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.steps.verify import _recorded_costs
from verl_bootstrap.verify.trainplan import install_cost, within_budget

NVIDIA = Path(__file__).parent / "data" / "nvidia"


def _h100() -> DriverInfo:
    driver = parse_smi_table((NVIDIA / "590.48.01-H100-table.txt").read_text(encoding="utf-8"))
    assert driver is not None
    return driver


def _plan(profile: str, prefix: Path, driver: DriverInfo | None, **options: object) -> Plan:
    opts = RunOptions(profile=profile, prefix=prefix, resolve=True, **options)  # type: ignore[arg-type]
    return prepare_plan(opts, driver=driver, detect=False, check_optional=False)


def _verify(plan: Plan) -> tuple[str | None, str]:
    (step,) = [s for s in plan.steps if s.id == "verify"]
    assert isinstance(step.inputs, VerifyInputs)
    return step.inputs.train, step.description


def test_a_gpu_profile_on_a_gpu_host_verifies_with_the_rl_step(tmp_path: Path) -> None:
    level, text = _verify(_plan("fsdp", tmp_path / "env", _h100()))
    assert level == "rl"
    assert text.endswith(
        "; then one RL training step (a GPU profile on a GPU host, while the step costs under "
        "10% of the install)"
    )


def test_train_none_opts_out_and_a_level_can_be_asked(tmp_path: Path) -> None:
    level, text = _verify(_plan("fsdp", tmp_path / "env", _h100(), train="none"))
    assert level is None and text.endswith("; no training step (--train none)")
    level, text = _verify(_plan("fsdp", tmp_path / "env", _h100(), train="sft"))
    assert level == "sft" and text.endswith("; then one SFT training step (--train sft)")


def test_a_gpu_profile_without_a_gpu_and_the_cpu_profile_train_only_when_asked(
    tmp_path: Path,
) -> None:
    level, text = _verify(_plan("fsdp", tmp_path / "env", None, cuda="cu128"))  # a login node
    assert level is None and text.endswith(
        "; no training step (no NVIDIA driver on this host to train on)"
    )
    level, text = _verify(_plan("cpu", tmp_path / "cpu", None))
    assert level is None and "training" not in text  # the cpu profile's plan reads as before
    level, text = _verify(_plan("cpu", tmp_path / "cpu", None, train="rl"))
    assert level == "rl" and text.endswith("(--train rl)")


def test_the_plan_json_shows_the_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--profile", "cpu", "--prefix", str(tmp_path / "e"), "--train", "sft"]
    assert cli.main([*argv, "--resolve", "--json"]) == 0
    steps = {s["id"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["verify"]["description"].endswith("; then one SFT training step (--train sft)")


def test_the_rule_compares_the_recorded_rl_step_with_the_install() -> None:
    assert within_budget(None, 1800.0) == (
        True,
        "no RL step recorded in this env yet: this run measures it",
    )
    assert within_budget(120.0, 1800.0) == (
        True,
        "the RL step took 120 s, the install 1800 s (7%, under 10%)",
    )
    keep, why = within_budget(240.0, 1800.0)
    assert not keep
    assert why == (
        "the RL step took 240 s, the install 1800 s (13%, not under 10%): run `verify --train rl`"
    )


def test_the_install_cost_is_its_finished_steps_less_verify() -> None:
    steps = {
        "create-env": {"status": "done", "started": 100.0, "finished": 110.0},
        "torch": {"status": "done", "started": 110.0, "finished": 710.0},
        "verify": {"status": "done", "started": 720.0, "finished": 900.0},
        "extras": {"status": "failed", "started": 710.0, "finished": 712.0},
    }
    assert install_cost(steps) == 610.0
    assert install_cost({}) is None


def test_the_costs_are_read_from_the_env_record(tmp_path: Path) -> None:
    """The state file as a run writes it: steps with their times, and `verify --train rl`'s."""
    plan = _plan("fsdp", tmp_path / "env", _h100())
    state = tmp_path / "env" / ".verl-bootstrap" / "state.json"
    state.parent.mkdir(parents=True)
    steps = {
        "create-env": {"status": "done", "fingerprint": "a", "started": 0.0, "finished": 900.0},
        "torch": {"status": "done", "fingerprint": "b", "started": 900.0, "finished": 1800.0},
    }
    train = {"rl": {"ok": True, "route": "gpu:vllm", "seconds": 95.0}}
    state.write_text(json.dumps({"version": 1, "steps": steps, "train": train}))
    assert _recorded_costs(plan) == (95.0, 1800.0)
