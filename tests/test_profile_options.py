"""Stages of an option (`option: tests`): installed only when the run asks (`--with-tests`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.stacks import apply_stack, supported_refs
from verl_bootstrap.run.installrun import prepare_plan


@pytest.mark.parametrize("ref", supported_refs(load_profile("cpu")))
def test_the_cpu_profile_has_test_tools_at_every_ref_only_on_request(ref: str) -> None:
    cpu = load_profile("cpu")
    default = apply_stack(cpu, ref)
    with_tests = apply_stack(cpu, ref, options=frozenset({"tests"}))
    assert "tests" not in [s.id for s in default.stages]
    tests = next(s for s in with_tests.stages if s.id == "tests")
    assert {"pytest", "pytest-asyncio", "pytest-rerunfailures"} <= set(tests.packages)
    assert [s.id for s in with_tests.stages][:-1] == [s.id for s in default.stages]


def test_verl_0_9_1_takes_its_verl_core_extra_and_0_9_0_its_workflows_transferqueue() -> None:
    cpu = load_profile("cpu")
    deps = {
        ref: next(s for s in apply_stack(cpu, ref).stages if s.id == "verl-deps")
        for ref in ("v0.9.1", "v0.9.0")
    }
    assert deps["v0.9.1"].extras == ("verl-core",)
    assert "TransferQueue==0.1.8" in deps["v0.9.0"].packages
    assert (
        "megatron-core"
        in next(
            s
            for s in apply_stack(cpu, "v0.9.1", options=frozenset({"tests"})).stages
            if s.id == "tests"
        ).packages
    )


def test_the_plan_gets_the_tests_step_with_the_flag(tmp_path: Path) -> None:
    def steps(**flags: bool) -> list[str]:
        options = RunOptions(profile="cpu", prefix=tmp_path / "env", **flags)
        plan = prepare_plan(options, driver=None, detect=False, check_optional=False)
        return [s.id for s in plan.steps]

    assert "tests" not in steps()
    with_tests = steps(with_tests=True)
    assert with_tests.index("verl-deps") < with_tests.index("tests") < with_tests.index("verify")


def test_with_tests_is_refused_beside_a_lockfile_install(tmp_path: Path) -> None:
    options = RunOptions(profile="cpu", prefix=tmp_path / "env", locked=True, with_tests=True)
    with pytest.raises(InputError, match="--with-tests cannot be combined"):
        prepare_plan(options, driver=None, detect=False, check_optional=False)
    assert not (tmp_path / "env").exists()
